package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/internal/tzdata"
	"github.com/gafferhq/gaffer/webhook"
)

// e2e runs the real gaffer command (this test binary re-executed as
// main) against a real PostgreSQL and etcd.
type e2e struct {
	t      *testing.T
	dbURL  string
	pool   *pgxpool.Pool
	etcd   string
	env    []string
	logs   map[string]*bytes.Buffer
	logsMu sync.Mutex
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// gaffer runs one command to completion: stdout, stderr, exit code.
func (e *e2e) gaffer(args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "GAFFER_E2E_MAIN=1"), e.env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// ok runs a command that must succeed.
func (e *e2e) ok(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.gaffer(args...)
	if code != 0 {
		e.t.Fatalf("gaffer %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs a command that must fail with wantCode and a message.
func (e *e2e) fails(wantCode int, wantMsg string, args ...string) {
	e.t.Helper()
	out, errOut, code := e.gaffer(args...)
	if code != wantCode || !strings.Contains(errOut, wantMsg) {
		e.t.Fatalf("gaffer %s: exit %d (want %d), stderr %q (want %q); stdout %s", strings.Join(args, " "), code, wantCode, errOut, wantMsg, out)
	}
}

// jsonOK runs a command with --json and decodes its output.
func (e *e2e) jsonOK(v any, args ...string) {
	e.t.Helper()
	out := e.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("gaffer %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// server starts `gaffer server` on a free loopback port and waits until
// it is ready.
func (e *e2e) server(id string, extra ...string) (*serverProc, string) {
	e.t.Helper()
	addr := freeAddr(e.t)
	return e.serverListening(id, addr, addr, extra...)
}

// serverListening starts `gaffer server` with --addr listen, and waits
// until it answers on addr.
func (e *e2e) serverListening(id, listen, addr string, extra ...string) (*serverProc, string) {
	e.t.Helper()
	return e.start(id, addr, append([]string{"server", "--node-id", id, "--addr", listen, "--etcd", e.etcd,
		"--session-ttl", "3s", "--poll-interval", "200ms", "--drain-timeout", "5s"}, extra...)...)
}

// start runs a long-lived gaffer command (server or dev) listening on
// addr, logging as id, and waits until its /readyz answers.
func (e *e2e) start(id, addr string, args ...string) (*serverProc, string) {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "GAFFER_E2E_MAIN=1"), e.env...)
	log := &bytes.Buffer{}
	e.logsMu.Lock()
	e.logs[id] = log
	e.logsMu.Unlock()
	cmd.Stdout, cmd.Stderr = io.Discard, &lockedWriter{mu: &e.logsMu, w: log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	proc := &serverProc{done: done, process: cmd.Process}
	go func() {
		cmd.Wait()
		proc.code = cmd.ProcessState.ExitCode()
		close(done)
	}()
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if e.t.Failed() {
			e.logsMu.Lock()
			e.t.Logf("%s log:\n%s", id, log.String())
			e.logsMu.Unlock()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, code := e.gaffer("healthcheck", "--url", "http://"+addr+"/readyz"); code == 0 {
			return proc, "http://" + addr
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s never became ready", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *e2e) scalar(sql string, args ...any) string {
	e.t.Helper()
	var v any
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return fmt.Sprint(v)
}

func (e *e2e) waitSQL(what, sql, want string, args ...any) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := e.scalar(sql, args...)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %s = %s, want %s", what, sql, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newE2E starts an embedded etcd and makes a database for one test.
func newE2E(t *testing.T) *e2e {
	etcd, err := etcdserver.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &e2e{t: t, dbURL: dbURL, pool: pool, etcd: etcd.Endpoint(), env: []string{"DATABASE_URL=" + dbURL}, logs: map[string]*bytes.Buffer{}}
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	e := newE2E(t)

	// Migrations and tokens, against the database.
	if out := e.ok("migrate", "up"); !strings.Contains(out, "up to date") {
		t.Fatalf("migrate up: %s", out)
	}
	if out := e.ok("migrate", "status"); strings.Contains(out, "pending") {
		t.Fatalf("migrate status: %s", out)
	}
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "e2e-admin", "--tenant", "*", "--scopes", "admin"))
	reader := strings.TrimSpace(e.ok("tokens", "create", "--name", "e2e-reader", "--scopes", "jobs:read"))
	e.fails(2, "unknown scope", "tokens", "create", "--name", "x", "--scopes", "root")
	if e.scalar(`SELECT count(*) FROM gaffer.api_tokens`) != "2" {
		t.Fatal("tokens not stored")
	}

	// A webhook receiver on loopback, which the nodes refuse unless told
	// otherwise: they are given an allow entry for exactly it.
	var hookMu sync.Mutex
	var hookBody string
	var hookHeader http.Header
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hookMu.Lock()
		hookBody, hookHeader = string(b), r.Header.Clone()
		hookMu.Unlock()
		if strings.Contains(string(b), "fail") {
			w.WriteHeader(404)
			return
		}
		w.Write([]byte(`{"received":true}`))
	}))
	defer hook.Close()
	allowHook := strings.TrimPrefix(hook.URL, "http://")

	// Two nodes.
	_, url1 := e.server("node-1", "--webhook-allow", allowHook)
	node2, url2 := e.server("node-2", "--webhook-allow", allowHook)
	e.env = append(e.env, "GAFFER_URL="+url1, "GAFFER_TOKEN="+admin)
	e.waitSQL("a leader", `SELECT leader FROM gaffer.leader_fence`, "node-1")

	// The OpenAPI document is served.
	resp, err := http.Get(url2 + "/v1/openapi.json")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("openapi.json: %v %v", resp, err)
	}
	resp.Body.Close()

	// Jobs.
	var enq struct {
		Job struct {
			ID    int64  `json:"id"`
			State string `json:"state"`
		} `json:"job"`
	}
	e.jsonOK(&enq, "jobs", "enqueue", "--kind", "noop", "--queue", "default", "--idempotency-key", "e2e-1")
	e.waitSQL("noop completes", `SELECT state FROM gaffer.jobs WHERE id = $1`, "completed", enq.Job.ID)
	var again struct {
		Job struct {
			ID int64 `json:"id"`
		} `json:"job"`
	}
	e.jsonOK(&again, "jobs", "enqueue", "--kind", "noop", "--queue", "default", "--idempotency-key", "e2e-1")
	if again.Job.ID != enq.Job.ID || e.scalar(`SELECT count(*) FROM gaffer.jobs`) != "1" {
		t.Fatal("idempotency key did not hold across the CLI")
	}
	if out := e.ok("jobs", "get", fmt.Sprint(enq.Job.ID)); !strings.Contains(out, "completed") {
		t.Fatalf("jobs get: %s", out)
	}
	// Webhook: signed with the tenant's secret, completes.
	var secret struct {
		Secret string `json:"secret"`
	}
	e.jsonOK(&secret, "webhook-secrets", "rotate")
	e.jsonOK(&enq, "jobs", "enqueue", "--kind", "http", "--args", fmt.Sprintf(`{"url":%q,"body":{"hello":"world"}}`, hook.URL))
	e.waitSQL("webhook completes", `SELECT state FROM gaffer.jobs WHERE id = $1`, "completed", enq.Job.ID)
	hookMu.Lock()
	if _, err := (webhook.Verifier{Secrets: []string{secret.Secret}}).Verify(hookHeader, []byte(hookBody)); err != nil {
		t.Fatalf("webhook delivery %q does not verify: %v (headers %v)", hookBody, err, hookHeader)
	}
	hookMu.Unlock()
	if out := e.ok("webhook-secrets", "list"); !strings.Contains(out, "current") {
		t.Fatalf("webhook-secrets list: %s", out)
	}
	// A delayed job, cancelled.
	e.jsonOK(&enq, "jobs", "enqueue", "--kind", "noop", "--delay", "1h", "--priority", "2", "--max-attempts", "3", "--timeout", "10s", "--unique-key", "later")
	if out := e.ok("jobs", "list", "--state", "pending"); !strings.Contains(out, fmt.Sprint(enq.Job.ID)) {
		t.Fatalf("jobs list: %s", out)
	}
	e.ok("jobs", "cancel", fmt.Sprint(enq.Job.ID))
	e.waitSQL("cancelled", `SELECT state FROM gaffer.jobs WHERE id = $1`, "cancelled", enq.Job.ID)
	e.fails(1, "job_finished", "jobs", "cancel", fmt.Sprint(enq.Job.ID))
	e.fails(1, "invalid_field: priority", "jobs", "enqueue", "--kind", "noop", "--priority", "12")
	e.fails(1, "forbidden", "jobs", "enqueue", "--kind", "noop", "--token", reader)
	// A kind nothing runs is refused (api.md#unknown-kinds), unless asked.
	e.fails(1, "unknown_kind", "jobs", "enqueue", "--kind", "nobody.runs.this")
	e.jsonOK(&enq, "jobs", "enqueue", "--kind", "nobody.runs.this", "--allow-unknown-kind")
	e.fails(1, "unauthorized", "jobs", "list", "--token", "a-token-that-does-not-exist")
	e.fails(2, "an API token is required", "jobs", "list", "--token", "")

	// DLQ: a webhook answering 404 fails for good.
	e.jsonOK(&enq, "jobs", "enqueue", "--kind", "http", "--args", fmt.Sprintf(`{"url":%q,"body":"fail"}`, hook.URL))
	e.waitSQL("dead-lettered", `SELECT state FROM gaffer.jobs WHERE id = $1`, "failed", enq.Job.ID)
	entry := e.scalar(`SELECT id FROM gaffer.dlq WHERE job_id = $1`, enq.Job.ID)
	if out := e.ok("dlq", "list", "--kind", "http"); !strings.Contains(out, "HTTP 404") {
		t.Fatalf("dlq list: %s", out)
	}
	if out := e.ok("dlq", "get", entry); !strings.Contains(out, "permanent") {
		t.Fatalf("dlq get: %s", out)
	}
	e.ok("dlq", "replay", entry)
	e.fails(1, "already_replayed", "dlq", "replay", entry)
	e.waitSQL("replayed once", `SELECT count(*) FROM gaffer.jobs WHERE replay_of = $1`, "1", entry)
	e.waitSQL("the replay fails too", `SELECT count(*) FROM gaffer.dlq`, "2")
	if out := e.ok("dlq", "replay", "--kind", "http", "--all"); !strings.Contains(out, "replayed 1 entries") {
		t.Fatalf("dlq replay by filter: %s", out)
	}
	e.waitSQL("third failure", `SELECT count(*) FROM gaffer.dlq`, "3")
	third := e.scalar(`SELECT job_id FROM gaffer.dlq WHERE replayed_at IS NULL`)
	if out := e.ok("jobs", "retry", third); !strings.Contains(out, "job "+third+" was replayed as job") {
		t.Fatalf("jobs retry: %s", out)
	}
	e.fails(1, "not_retryable", "jobs", "retry", third)
	e.waitSQL("fourth failure", `SELECT count(*) FROM gaffer.dlq`, "4")
	e.ok("dlq", "delete", entry)
	e.fails(1, "not_found", "dlq", "delete", entry)
	e.fails(2, "add --yes", "dlq", "purge")
	if out := e.ok("dlq", "purge", "--kind", "http", "--yes"); !strings.Contains(out, "deleted 3") {
		t.Fatalf("dlq purge: %s", out)
	}

	// Cron.
	e.ok("cron", "add", "tick", "--schedule", "@every 1s", "--kind", "noop", "--timezone", "Europe/London", "--missed", "all")
	e.fails(1, "already_exists", "cron", "add", "tick", "--schedule", "@daily", "--kind", "noop")
	e.fails(1, "never fires", "cron", "add", "feb30", "--schedule", "0 0 30 2 *", "--kind", "noop")
	e.waitSQL("cron fires", `SELECT count(*) > 1 FROM gaffer.jobs WHERE cron_entry = 'tick'`, "true")
	if out := e.ok("cron", "list"); !strings.Contains(out, "tick") {
		t.Fatalf("cron list: %s", out)
	}
	if out := e.ok("cron", "get", "tick"); !strings.Contains(out, "Europe/London") || !strings.Contains(out, "last job") || !strings.Contains(out, "active") {
		t.Fatalf("cron get: %s", out)
	}
	var tickJobs struct {
		Data []struct {
			CronEntry string `json:"cron_entry"`
		} `json:"data"`
	}
	e.jsonOK(&tickJobs, "jobs", "list", "--cron-entry", "tick")
	if len(tickJobs.Data) < 2 || tickJobs.Data[0].CronEntry != "tick" {
		t.Fatalf("jobs list --cron-entry tick: %+v", tickJobs)
	}
	if out := e.ok("cron", "next", "tick", "--n", "3"); len(strings.Fields(out)) != 3 {
		t.Fatalf("cron next: %s", out)
	}
	e.ok("cron", "pause", "tick")
	e.waitSQL("paused", `SELECT paused FROM gaffer.cron_entries WHERE name = 'tick'`, "true")
	e.ok("cron", "trigger", "tick")
	if out := e.ok("cron", "history", "tick"); !strings.Contains(out, "triggered") || !strings.Contains(out, "fired") {
		t.Fatalf("cron history: %s", out)
	}
	e.ok("cron", "update", "tick", "--schedule", "@hourly", "--args", `{"n":2}`)
	if e.scalar(`SELECT schedule || ' ' || (job->'args'->>'n') FROM gaffer.cron_entries WHERE name = 'tick'`) != "@hourly 2" {
		t.Fatal("cron update did not land")
	}
	e.ok("cron", "resume", "tick")
	e.ok("cron", "delete", "tick")
	e.fails(1, "not_found", "cron", "get", "tick")

	// Workflows.
	def := filepath.Join(t.TempDir(), "wf.json")
	os.WriteFile(def, []byte(`{"name":"e2e","steps":[
		{"name":"a","kind":"noop"},
		{"name":"b","kind":"noop","depends_on":["a"]},
		{"name":"approve","signal":"1h","depends_on":["a"]},
		{"name":"c","kind":"noop","depends_on":["b","approve"]}]}`), 0o644)
	var run struct {
		ID int64 `json:"id"`
	}
	e.jsonOK(&run, "workflows", "submit", "--file", def)
	e.waitSQL("step b done", `SELECT state FROM gaffer.workflow_steps WHERE run_id = $1 AND name = 'b'`, "completed", run.ID)
	e.fails(1, "conflict", "workflows", "signal", fmt.Sprint(run.ID), "b")
	e.ok("workflows", "signal", fmt.Sprint(run.ID), "approve", "--payload", `{"by":"e2e"}`)
	e.waitSQL("run completed", `SELECT state FROM gaffer.workflow_runs WHERE id = $1`, "completed", run.ID)
	if out := e.ok("workflows", "get", fmt.Sprint(run.ID)); !strings.Contains(out, "completed") || !strings.Contains(out, `{"by":"e2e"}`) && !strings.Contains(out, `{"by": "e2e"}`) {
		t.Fatalf("workflows get: %s", out)
	}
	var runJobs struct {
		Data []struct {
			WorkflowRun int64 `json:"workflow_run"`
		} `json:"data"`
	}
	e.jsonOK(&runJobs, "jobs", "list", "--workflow-run", fmt.Sprint(run.ID))
	if len(runJobs.Data) < 2 || runJobs.Data[0].WorkflowRun != run.ID {
		t.Fatalf("jobs list --workflow-run %d: %+v", run.ID, runJobs)
	}
	e.jsonOK(&run, "workflows", "submit", "--file", def)
	e.ok("workflows", "cancel", fmt.Sprint(run.ID))
	e.waitSQL("run cancelled", `SELECT state FROM gaffer.workflow_runs WHERE id = $1`, "cancelled", run.ID)
	if out := e.ok("workflows", "list", "--state", "cancelled"); !strings.Contains(out, fmt.Sprint(run.ID)) {
		t.Fatalf("workflows list: %s", out)
	}
	os.WriteFile(def, []byte(`{"name":"bad","steps":[{"name":"a","kind":"noop","depends_on":["a"]}]}`), 0o644)
	e.fails(1, "depends on itself", "workflows", "submit", "--file", def)

	// Queues.
	e.ok("queues", "pause", "slow")
	e.jsonOK(&enq, "jobs", "enqueue", "--kind", "noop", "--queue", "slow")
	if out := e.ok("queues", "list"); !strings.Contains(out, "slow") || !strings.Contains(out, "true") {
		t.Fatalf("queues list: %s", out)
	}
	e.fails(1, "forbidden", "queues", "pause", "slow", "--token", reader)
	e.ok("queues", "resume", "slow")

	// Nodes and the cluster; drain node-2 and watch it leave.
	if out := e.ok("nodes", "list"); !strings.Contains(out, "node-1") || !strings.Contains(out, "node-2") || strings.Contains(out, "warning") {
		t.Fatalf("nodes list: %s", out)
	}
	var nodes struct {
		Data []struct {
			ID     string `json:"id"`
			TZData string `json:"tzdata"`
		} `json:"data"`
	}
	e.jsonOK(&nodes, "nodes", "list")
	for _, n := range nodes.Data {
		if n.TZData != tzdata.Version {
			t.Fatalf("node %s reports zone rules %q, want this build's %s", n.ID, n.TZData, tzdata.Version)
		}
	}
	if out := e.ok("cluster"); !strings.Contains(out, "node-1") {
		t.Fatalf("cluster: %s", out)
	}
	e.fails(1, "not_found", "nodes", "drain", "ghost")
	if out := e.ok("nodes", "drain", "node-2", "--deadline", "10s", "--wait"); !strings.Contains(out, "node-2 left (drained)") {
		t.Fatalf("nodes drain --wait: %s", out)
	}
	if err := waitExit(node2, 10*time.Second); err != nil {
		t.Fatalf("node-2 after drain: %v", err)
	}
	// One word for a node that left, here as on the dashboard.
	if out := e.ok("nodes", "list"); !regexp.MustCompile(`node-2 +node +left \(drained\)`).MatchString(out) {
		t.Fatalf("nodes list after the drain, want node-2 left (drained):\n%s", out)
	}
	e.fails(1, "not_found", "nodes", "undrain", "node-2")

	// Tokens: list and revoke.
	if out := e.ok("tokens", "list"); !strings.Contains(out, "e2e-reader") {
		t.Fatalf("tokens list: %s", out)
	}
	id := e.scalar(`SELECT id FROM gaffer.api_tokens WHERE name = 'e2e-reader'`)
	e.ok("tokens", "revoke", id)
	time.Sleep(6 * time.Second) // the nodes' token cache
	e.fails(1, "unauthorized", "jobs", "list", "--token", reader)
	e.fails(2, "unknown command", "frobnicate")
	_ = url2
}

// serverProc is a running gaffer server; code is set once done closes.
type serverProc struct {
	done    chan struct{}
	code    int
	process *os.Process
}

func waitExit(p *serverProc, d time.Duration) error {
	select {
	case <-p.done:
	case <-time.After(d):
		return fmt.Errorf("still running after %s", d)
	}
	if p.code != 0 {
		return fmt.Errorf("exit code %d", p.code)
	}
	return nil
}
