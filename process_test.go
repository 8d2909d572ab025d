package gaffer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
)

// runChildNode is a worker node process for the process tests. It serves
// /metrics on a loopback port that it prints as "METRICS <addr>", prints
// "READY" once started, and drains on SIGTERM.
//
// Handlers:
//   - "work": records the execution in test_effects, sleeps args.ms
//     (honouring cancellation) and completes with result {"node": id}.
//   - "stubborn": sleeps args.ms ignoring cancellation, then returns
//     args.outcome: "complete" (nil) or "fail" (an error).
func runChildNode() int {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	lease, _ := time.ParseDuration(os.Getenv("GAFFER_TEST_LEASE"))
	sessionTTL, _ := time.ParseDuration(os.Getenv("GAFFER_TEST_SESSION_TTL"))
	concurrency := 10
	if c, err := strconv.Atoi(os.Getenv("GAFFER_TEST_CONCURRENCY")); err == nil {
		concurrency = c
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: os.Stderr})
	cfg := gaffer.Config{
		DatabaseURL: os.Getenv("GAFFER_TEST_DATABASE_URL"), ID: os.Getenv("GAFFER_TEST_NODE"),
		Queues: map[string]int{"default": concurrency}, LeaseTTL: lease, RescueInterval: 200 * time.Millisecond,
		PollInterval: 200 * time.Millisecond, Logger: log, Registerer: reg,
		SessionTTL: sessionTTL, ReportInterval: 500 * time.Millisecond, ClusterPrefix: os.Getenv("GAFFER_TEST_PREFIX"),
		TrustFenceOnly: os.Getenv("GAFFER_TEST_FENCE_ONLY") != "",
	}
	if e := os.Getenv("GAFFER_TEST_ETCD"); e != "" {
		cfg.EtcdEndpoints = []string{e}
	}
	node, err := gaffer.NewNode(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := node.Store().Pool()
	type workArgs struct {
		MS      int    `json:"ms"`
		Outcome string `json:"outcome"`
	}
	job.HandleArgs(node.Registry(), "work", func(ctx context.Context, j *job.Job, a workArgs) error {
		if _, err := pool.Exec(ctx, `INSERT INTO test_effects (job_id, attempt, node) VALUES ($1, $2, $3)`, j.ID, j.Attempt, node.ID()); err != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return j.SetResult(map[string]string{"node": node.ID()})
	})
	job.HandleArgs(node.Registry(), "stubborn", func(ctx context.Context, j *job.Job, a workArgs) error {
		time.Sleep(time.Duration(a.MS) * time.Millisecond)
		if a.Outcome == "fail" {
			return fmt.Errorf("stubborn failure from %s", node.ID())
		}
		return j.SetResult(map[string]string{"node": node.ID()})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go http.Serve(ln, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	fmt.Printf("METRICS %s\n", ln.Addr())
	if err := node.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("READY")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
	case <-node.Done(): // drained through the cluster and left
		fmt.Println("LEFT")
		return 0
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := node.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is a running node process.
type child struct {
	t       *testing.T
	id      string
	cmd     *exec.Cmd
	metrics string
	exited  chan struct{}
	left    chan struct{} // closed when the node prints LEFT
}

func startChild(t *testing.T, dbURL, id string, lease time.Duration, extraEnv ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GAFFER_TEST_NODE="+id, "GAFFER_TEST_DATABASE_URL="+dbURL, "GAFFER_TEST_LEASE="+lease.String())
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := cmd.StdoutPipe()
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, id: id, cmd: cmd, exited: make(chan struct{}), left: make(chan struct{})}
	go func() { cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			t.Logf("node %s log:\n%s", id, logs.String())
		}
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if addr, ok := strings.CutPrefix(line, "METRICS "); ok {
				c.metrics = addr
			}
			if line == "READY" {
				ready <- nil
			}
			if line == "LEFT" {
				close(c.left)
			}
		}
		ready <- fmt.Errorf("node %s exited before it was ready: %s", id, logs.String())
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s not ready", id)
	}
	return c
}

func (c *child) signal(s syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(s); err != nil {
		c.t.Fatalf("signal %s to %s: %v", s, c.id, err)
	}
}

// metric sums a metric's samples (optionally with one label=value) from
// the node's /metrics.
func (c *child) metric(name, label, value string) float64 {
	c.t.Helper()
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		c.t.Fatalf("scrape %s: %v", c.id, err)
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if label != "" && !strings.Contains(line, label+`="`+value+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		total += v
	}
	return total
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// auditCompletions installs a trigger that records every accepted
// completion write, so a test can count them per job.
func auditCompletions(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		CREATE TABLE test_effects (job_id bigint, attempt int, node text, at timestamptz DEFAULT clock_timestamp());
		CREATE TABLE test_completions (job_id bigint, attempt int, node text, result jsonb);
		CREATE FUNCTION test_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO test_completions VALUES (NEW.id, NEW.attempt, NEW.node, NEW.result);
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.state = 'completed' AND NEW.finalized_at IS DISTINCT FROM OLD.finalized_at)
			EXECUTE FUNCTION test_audit();`)
	if err != nil {
		t.Fatal(err)
	}
}

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
