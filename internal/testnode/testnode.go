// Package testnode runs Gaffer nodes as separate processes for tests that
// kill, pause and cut them off: the test binary re-executes itself as a
// node (Main, called first thing from TestMain, runs it). It also holds
// the helpers those tests share.
package testnode

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/gafferhq/gaffer/internal/knobs"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/webhook"
)

// runNode is a worker node process for the process tests. It serves
// /metrics on a loopback port that it prints as "METRICS <addr>", prints
// "READY" once started, and drains on SIGTERM.
//
// Handlers:
//   - "work": records the execution in test_effects, sleeps args.ms
//     (honouring cancellation) and completes with result {"node": id}.
//   - "stubborn": sleeps args.ms ignoring cancellation, then returns
//     args.outcome: "complete" (nil) or "fail" (an error).
//   - "http", the built-in kind, when GAFFER_TEST_WEBHOOK_ALLOW names the
//     loopback destinations it may call.
func runNode() int {
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
		Queues: map[string]int{"default": concurrency}, LeaseTTL: lease, RescueInterval: RescueInterval,
		// The leader's fenced writes come often, so that a deposed leader
		// trusting only the fence meets it soon (TestPausedLeaderIsFencedOnResume).
		QueueMonitorInterval: 200 * time.Millisecond,
		PollInterval:         200 * time.Millisecond, Logger: log, Registerer: reg,
		SessionTTL: sessionTTL, ReportInterval: 500 * time.Millisecond, ClusterPrefix: os.Getenv("GAFFER_TEST_PREFIX"),
	}
	if r, err := strconv.ParseFloat(os.Getenv("GAFFER_TEST_CRON_FIRE_RATE"), 64); err == nil {
		cfg.CronTenantFireRate = r
	}
	knobs.SetTrustFenceOnly(cfg.ID, os.Getenv("GAFFER_TEST_FENCE_ONLY") != "")
	if e := os.Getenv("GAFFER_TEST_ETCD"); e != "" {
		cfg.EtcdEndpoints = strings.Split(e, ",")
	}
	node, err := gaffer.NewNode(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := node.Pool()
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
	// chaos.work: an external effect (its own statement, so it may repeat
	// when the job runs again), a sleep of args.ms, then either a
	// permanent failure (args.fail; args.fail_first: unless the job is a
	// DLQ replay) or an effect written in the job's own completion
	// transaction (exactly once). Its result names the node and the job,
	// so a workflow step's inputs show which job of a dependency they
	// came from.
	type chaosArgs struct {
		MS        int  `json:"ms"`
		Fail      bool `json:"fail"`
		FailFirst bool `json:"fail_first"`
	}
	job.HandleArgs(node.Registry(), "chaos.work", func(ctx context.Context, j *job.Job, a chaosArgs) error {
		if _, err := pool.Exec(ctx, `INSERT INTO chaos_effects (job_id, attempt, node) VALUES ($1, $2, $3)`, j.ID, j.Attempt, node.ID()); err != nil {
			return err
		}
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		if a.Fail || a.FailFirst && j.ReplayOf == 0 {
			return job.Permanent(fmt.Errorf("chaos: planned failure"))
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, `INSERT INTO chaos_tx_effects (job_id, attempt, node) VALUES ($1, $2, $3)`, j.ID, j.Attempt, node.ID()); err != nil {
			return err
		}
		if err := j.SetResult(map[string]any{"node": node.ID(), "job": j.ID}); err != nil {
			return err
		}
		if err := job.CompleteTx(ctx, tx, j); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, job.KindOptions{Backoff: job.ExponentialBackoff{Base: 200 * time.Millisecond, Max: 2 * time.Second}})
	// fanin: a workflow step that records, in test_fanin, the md5 of each
	// dependency's result among its inputs as it received them (the
	// inputs as a whole when it has none: "{}"), then returns a result of
	// args.bytes random hex digits, so that the stored bytes of a fan-in
	// do not compress away.
	type faninArgs struct {
		Bytes int `json:"bytes"`
	}
	job.HandleArgs(node.Registry(), "fanin", func(ctx context.Context, j *job.Job, a faninArgs) error {
		var inputs map[string]json.RawMessage
		if err := json.Unmarshal(j.Inputs, &inputs); err != nil {
			return job.Permanent(fmt.Errorf("fanin: inputs %.40q: %w", j.Inputs, err))
		}
		for dep, raw := range inputs {
			sum := md5.Sum(raw)
			if _, err := pool.Exec(ctx, `INSERT INTO test_fanin (job_id, attempt, step, dep, md5) VALUES ($1, $2, $3, $4, $5)`,
				j.ID, j.Attempt, j.Step, dep, hex.EncodeToString(sum[:])); err != nil {
				return err
			}
		}
		fill := make([]byte, a.Bytes/2)
		rand.Read(fill)
		return j.SetResult(map[string]string{"step": j.Step, "fill": hex.EncodeToString(fill)})
	})
	// http: the built-in kind, allowed to call the loopback destinations
	// GAFFER_TEST_WEBHOOK_ALLOW names.
	if allow := os.Getenv("GAFFER_TEST_WEBHOOK_ALLOW"); allow != "" {
		hooks, err := webhook.New(ctx, webhook.Config{Allow: strings.Split(allow, ","), DefaultTimeout: 10 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		hooks.Register(node.Registry())
	}
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

// Child is a running node process.
type Child struct {
	t       *testing.T
	ID      string
	Cmd     *exec.Cmd
	metrics string
	// Exited closes when the process has exited; Left when the node printed
	// LEFT (it drained through the cluster and left).
	Exited chan struct{}
	Left   chan struct{}
}

// Start runs a node process with id against dbURL, with job lease lease
// and the extra environment given (GAFFER_TEST_ETCD, GAFFER_TEST_SESSION_TTL,
// GAFFER_TEST_CONCURRENCY, GAFFER_TEST_PREFIX, GAFFER_TEST_FENCE_ONLY,
// GAFFER_TEST_WEBHOOK_ALLOW), and
// waits until it is ready. The process is killed when t ends.
func Start(t *testing.T, dbURL, id string, lease time.Duration, extraEnv ...string) *Child {
	t.Helper()
	cmd := exec.Command(Binary, "-test.run=^$")
	cmd.Env = append(os.Environ(), "GAFFER_TEST_NODE="+id, "GAFFER_TEST_DATABASE_URL="+dbURL, "GAFFER_TEST_LEASE="+lease.String())
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := cmd.StdoutPipe()
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Child{t: t, ID: id, Cmd: cmd, Exited: make(chan struct{}), Left: make(chan struct{})}
	// Wait closes the stdout pipe once the process has exited, dropping
	// what the reader below has not read yet (a LEFT printed just before
	// the exit): it waits for the reader to reach the end first.
	read := make(chan struct{})
	go func() { <-read; cmd.Wait(); close(c.Exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-c.Exited
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
				close(c.Left)
			}
		}
		io.Copy(io.Discard, stdout)
		close(read)
		ready <- fmt.Errorf("node %s exited before it was ready: %s", id, logs.String())
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

// Signal sends s to the process.
func (c *Child) Signal(s syscall.Signal) {
	c.t.Helper()
	if err := c.Cmd.Process.Signal(s); err != nil {
		c.t.Fatalf("signal %s to %s: %v", s, c.ID, err)
	}
}

// Metric sums a metric's samples (optionally with one label=value) from
// the node's /metrics.
func (c *Child) Metric(name, label, value string) float64 {
	c.t.Helper()
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		c.t.Fatalf("scrape %s: %v", c.ID, err)
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

// AuditCompletions installs a trigger that records every accepted
// completion write, so a test can count them per job.
func AuditCompletions(t *testing.T, pool *pgxpool.Pool) {
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

// Scalar runs a one-value query.
func Scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// WaitUntil polls cond every 20ms, failing t after timeout.
func WaitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RescueInterval is how often a node process sweeps expired leases: a
// job whose node died runs again within the lease TTL plus this (and a
// claim), with or without etcd.
const RescueInterval = 200 * time.Millisecond

// Binary is the program Start runs as a node: this test binary, unless a
// test (the chaos suite's mutation run) swaps in another build of it.
var Binary = os.Args[0]

// Main runs this process as a node when it was started as one, and
// exits; otherwise it returns. Call it first in TestMain.
func Main() {
	if os.Getenv("GAFFER_TEST_NODE") != "" {
		os.Exit(runNode())
	}
}
