package clients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// The reference clients' examples, run as child processes against a real
// `gaffer server` (PostgreSQL, embedded etcd), talking to it only over
// HTTP with a worker-scoped token, as a user would run them.

var (
	buildDir   string
	buildOnce  sync.Once
	gafferPath string
	buildErr   error
)

func TestMain(m *testing.M) {
	var err error
	if buildDir, err = os.MkdirTemp("", "gaffer-clients-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// gaffer builds the gaffer command once per test binary.
func gaffer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		gafferPath = filepath.Join(buildDir, "gaffer")
		out, err := exec.Command("go", "build", "-o", gafferPath, "github.com/gafferhq/gaffer/cmd/gaffer").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/gaffer: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return gafferPath
}

// runtime is a client's language runtime: the program, the version it
// needs, and the environment variable that makes its absence a failure.
type runtime struct {
	lang, program, example, require string
	versionArgs                     []string
	versionRE                       *regexp.Regexp
	major, minor                    int
}

var (
	python = runtime{lang: "python", program: "python3", example: "python/example.py", require: "GAFFER_REQUIRE_PYTHON",
		versionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`Python (\d+)\.(\d+)`), major: 3, minor: 9}
	node = runtime{lang: "typescript", program: "node", example: "typescript/example.mjs", require: "GAFFER_REQUIRE_NODE",
		versionArgs: []string{"--version"}, versionRE: regexp.MustCompile(`v(\d+)\.(\d+)`), major: 20, minor: 0}
)

// need skips the test when the runtime is missing or too old, or fails
// it when its GAFFER_REQUIRE_* variable says it must be there (.ci/run
// sets GAFFER_REQUIRE_PYTHON; Node may be missing there).
func (r runtime) need(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		msg := fmt.Sprintf("the %s client's test needs %s %d.%d or later: %s", r.lang, r.program, r.major, r.minor, why)
		if os.Getenv(r.require) != "" {
			t.Fatalf("%s (%s is set, so this is a failure, not a skip)", msg, r.require)
		}
		t.Skipf("%s; skipped (set %s=1 to make this a failure)", msg, r.require)
	}
	path, err := exec.LookPath(r.program)
	if err != nil {
		missing("not found on PATH")
	}
	out, err := exec.Command(path, r.versionArgs...).CombinedOutput()
	m := r.versionRE.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		missing(fmt.Sprintf("cannot tell its version: %v %s", err, out))
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < r.major || major == r.major && minor < r.minor {
		missing("found " + strings.TrimSpace(string(out)))
	}
	return path
}

// server is a real `gaffer server` process with its own database and
// etcd: lease 2s (a heartbeat every ~0.7s), claims wait at most 10s (a
// silent worker is lost after 14s, well after its jobs' leases are
// rescued, which takes up to 7s: lease and the rescuer's 5s period). Its
// own node works only the queue "default", so jobs of queue "clients"
// are left to the remote workers.
type server struct {
	t      *testing.T
	url    string
	admin  string // spans tenants, scope admin
	worker string // tenant default, scope worker
	pool   *pgxpool.Pool
	log    *lockedBuffer
}

func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	bin := gaffer(t)
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
	env := append(os.Environ(), "DATABASE_URL="+dbURL)
	token := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"tokens", "create"}, args...)...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gaffer tokens create %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	s := &server{t: t, pool: pool, log: &lockedBuffer{},
		admin:  token("--name", "admin", "--tenant", "*", "--scopes", "admin"),
		worker: token("--name", "client-example", "--scopes", "worker")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s.url = "http://" + addr
	cmd := exec.Command(bin, "server", "--node-id", "node-1", "--addr", addr, "--etcd", etcd.Endpoint(),
		"--session-ttl", "3s", "--poll-interval", "200ms", "--drain-timeout", "5s",
		"--lease-ttl", "2s", "--remote-max-wait", "10s", "--queues", "default=1")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = io.Discard, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("gaffer server log:\n%s", s.log)
		}
	})
	waitFor(t, 30*time.Second, "the server to be ready", func() bool {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return s
}

// api calls the API with the admin token and decodes a 2xx answer.
func (s *server) api(method, path string, in, out any) {
	s.t.Helper()
	var body io.Reader
	if in != nil {
		body = bytes.NewReader(mustJSON(in))
	}
	var b []byte
	var resp *http.Response
	for try := 0; ; try++ {
		req, _ := http.NewRequest(method, s.url+path, body)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		var err error
		if resp, err = http.DefaultClient.Do(req); err != nil {
			s.t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		// A server started with a low --rate-limit limits the test too.
		if resp.StatusCode != http.StatusTooManyRequests || try == 20 {
			break
		}
		after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		time.Sleep(time.Duration(max(after, 1)) * time.Second)
		if in != nil {
			body = bytes.NewReader(mustJSON(in))
		}
	}
	if resp.StatusCode/100 != 2 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// jobView is the part of GET /v1/jobs/{id} the tests read.
type jobView struct {
	ID          int64           `json:"id"`
	State       string          `json:"state"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	Node        string          `json:"node"`
	Result      json.RawMessage `json:"result"`
	Errors      []struct {
		Attempt int    `json:"attempt"`
		Error   string `json:"error"`
		Kind    string `json:"kind"`
	} `json:"errors"`
	Progress *struct {
		Percent float64 `json:"percent"`
		Message string  `json:"message"`
	} `json:"progress"`
}

// enqueue enqueues a job of kind in queue "clients" over the API; often
// before the example that works it registers, so allowing the kind.
func (s *server) enqueue(kind, args string) int64 {
	s.t.Helper()
	var out struct {
		Job jobView `json:"job"`
	}
	s.api("POST", "/v1/jobs", map[string]any{"kind": kind, "queue": "clients", "args": json.RawMessage(args), "max_attempts": 3, "allow_unknown_kind": true}, &out)
	return out.Job.ID
}

// enqueueTraced enqueues a job of kind under the W3C trace context
// traceparent, as a traced caller's HTTP client would send it.
func (s *server) enqueueTraced(kind, traceparent string) int64 {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/v1/jobs", bytes.NewReader(mustJSON(map[string]any{"kind": kind, "queue": "clients", "args": map[string]any{}, "allow_unknown_kind": true})))
	req.Header.Set("Authorization", "Bearer "+s.admin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Job jobView `json:"job"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		s.t.Fatalf("enqueue %s with a traceparent: %d, %v", kind, resp.StatusCode, err)
	}
	return out.Job.ID
}

func (s *server) job(id int64) jobView {
	s.t.Helper()
	var j jobView
	s.api("GET", fmt.Sprintf("/v1/jobs/%d?tenant=default", id), nil, &j)
	return j
}

// await waits until job id is in state.
func (s *server) await(id int64, state string) jobView {
	s.t.Helper()
	var j jobView
	waitFor(s.t, 20*time.Second, fmt.Sprintf("job %d %s", id, state), func() bool {
		j = s.job(id)
		return j.State == state
	})
	return j
}

// nodeView is a row of GET /v1/nodes.
type nodeView struct {
	ID         string `json:"id"`
	Kind       string `json:"kind"`
	State      string `json:"state"`
	LeftReason string `json:"left_reason"`
}

func (s *server) node(id string) nodeView {
	s.t.Helper()
	var out struct {
		Data []nodeView `json:"data"`
	}
	s.api("GET", "/v1/nodes", nil, &out)
	for _, n := range out.Data {
		if n.ID == id {
			return n
		}
	}
	s.t.Fatalf("worker %s not in the nodes view: %+v", id, out.Data)
	return nodeView{}
}

// client is a running example process.
type client struct {
	id     string // the worker id it registered as
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

// startExample runs a client's example against s, working queue
// "clients", and waits until it has registered.
func (s *server) startExample(r runtime, program string, env ...string) *client {
	s.t.Helper()
	cmd := exec.Command(program, r.example)
	cmd.Env = append(os.Environ(), append([]string{"PYTHONDONTWRITEBYTECODE=1", "GAFFER_URL=" + s.url, "GAFFER_TOKEN=" + s.worker, "GAFFER_QUEUES=clients"}, env...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := cmd.StdoutPipe()
	c := &client{cmd: cmd, out: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = c.out
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	registered := make(chan string, 1)
	// Wait closes the stdout pipe once the process has exited, dropping
	// lines not read yet (STOPPED, printed last): it waits for the reader
	// to reach the end first.
	read := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.out.Write([]byte(sc.Text() + "\n"))
			if id, ok := strings.CutPrefix(sc.Text(), "WORKER "); ok {
				registered <- id
			}
		}
		io.Copy(io.Discard, stdout)
		close(read)
	}()
	go func() { <-read; cmd.Wait(); close(c.exited) }()
	s.t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.exited
		if s.t.Failed() {
			s.t.Logf("%s example output:\n%s", r.lang, c.out)
		}
	})
	select {
	case c.id = <-registered:
	case <-c.exited:
		s.t.Fatalf("the %s example exited before it registered:\n%s", r.lang, c.out)
	case <-time.After(20 * time.Second):
		s.t.Fatalf("the %s example did not register:\n%s", r.lang, c.out)
	}
	return c
}

func TestPythonClient(t *testing.T) {
	t.Parallel()
	exerciseClient(t, python)
}

func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	exerciseClient(t, node)
}

// exerciseClient runs a client's example against a real server: every
// outcome a handler can have, heartbeats keeping a job past its lease,
// then a graceful stop on SIGTERM mid-job.
func exerciseClient(t *testing.T, r runtime) {
	program := r.need(t)
	s := startServer(t)
	s.auditLeases()

	t.Run("outcomes", func(t *testing.T) {
		s.t = t
		c := s.startExample(r, program)
		if n := s.node(c.id); n.Kind != "remote" || n.State != "active" {
			t.Fatalf("the example's worker in the nodes view: %+v", n)
		}
		greet := s.enqueue("greet", `{"name":"Ada"}`)
		// Longer than the 2s lease: only heartbeats keep it.
		count := s.enqueue("count", `{"to":8,"ms":400}`)
		flaky := s.enqueue("flaky", `{}`)
		later := s.enqueue("later", `{"seconds":0.3}`)
		reject := s.enqueue("reject", `{"reason":"no such customer"}`)
		const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		traced := s.enqueueTraced("trace", traceparent)

		j := s.await(count, "completed")
		if j.Attempt != 1 || !sameJSON(j.Result, fmt.Sprintf(`{"counted":8,"by":%q}`, r.lang)) {
			t.Fatalf("count: attempt %d result %s, want attempt 1 (heartbeats kept its lease) and the handler's result", j.Attempt, j.Result)
		}
		if j.Progress == nil || j.Progress.Percent != 100 || j.Progress.Message != "counted 8 of 8" {
			t.Fatalf("count's progress: %+v", j.Progress)
		}
		// 3.2s of work: its claim's lease and at least two heartbeats'.
		if n, span := s.leases(count, 1); n < 3 || span < time.Second {
			t.Fatalf("count's lease: given %d times over %s, want its claim and heartbeats every ~0.7s", n, span)
		}

		j = s.await(traced, "completed")
		if want := fmt.Sprintf(`{"traceparent":%q}`, traceparent); !sameJSON(j.Result, want) {
			t.Fatalf("trace: result %s, want %s (the claim's traceparent reaches the handler)", j.Result, want)
		}
		j = s.await(greet, "completed")
		if want := fmt.Sprintf(`{"greeting":"hello, Ada","by":%q,"attempt":1}`, r.lang); !sameJSON(j.Result, want) || j.Node != c.id {
			t.Fatalf("greet: result %s by %s, want %s by %s", j.Result, j.Node, want, c.id)
		}
		j = s.await(flaky, "completed")
		if j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Error != "first attempts always fail" {
			t.Fatalf("flaky: attempt %d errors %+v, want attempt 2 after one retryable failure", j.Attempt, j.Errors)
		}
		j = s.await(later, "completed")
		if j.Attempt != 2 || len(j.Errors) != 0 || j.MaxAttempts != 4 {
			t.Fatalf("later: attempt %d of %d, errors %+v: want a snooze (no error, no attempt used up) then a completion", j.Attempt, j.MaxAttempts, j.Errors)
		}
		j = s.await(reject, "failed")
		if j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Error != "no such customer" {
			t.Fatalf("reject: attempt %d errors %+v, want one permanent failure", j.Attempt, j.Errors)
		}

		// A job cancelled while it runs: the next heartbeat says so, the
		// handler stops, and its failure ends the job cancelled.
		cancel := s.enqueue("count", `{"to":100,"ms":100}`)
		s.await(cancel, "running")
		s.api("POST", fmt.Sprintf("/v1/jobs/%d/cancel?tenant=default", cancel), nil, nil)
		if j := s.await(cancel, "cancelled"); len(j.Errors) != 1 || !strings.HasPrefix(j.Errors[0].Error, "stopped at ") {
			t.Fatalf("the cancelled job: %+v, want its handler stopped part way", j)
		}

		// SIGINT with nothing to do: it leaves at once.
		c.cmd.Process.Signal(syscall.SIGINT)
		c.waitExit(t, 10*time.Second)
		if n := s.node(c.id); n.State != "dead" || n.LeftReason != "stopped" {
			t.Fatalf("the stopped worker in the nodes view: %+v, want dead, stopped", n)
		}
	})

	// G11 from the client's side: a worker paused past its lease finds,
	// when it wakes, that its attempt is gone; it drops that attempt's
	// result (the node would refuse it) and runs the job's next attempt.
	t.Run("paused past its lease", func(t *testing.T) {
		s.t = t
		c := s.startExample(r, program)
		id := s.enqueue("count", `{"to":10,"ms":200}`)
		s.await(id, "running")
		c.cmd.Process.Signal(syscall.SIGSTOP)
		// Its lease expires and the node takes attempt 1 back (the claim
		// the worker left waiting may take attempt 2 at once, for it).
		waitFor(t, 15*time.Second, "attempt 1 lost", func() bool {
			j := s.job(id)
			return len(j.Errors) > 0 && j.Errors[0].Kind == "lost"
		})
		c.cmd.Process.Signal(syscall.SIGCONT)
		j := s.await(id, "completed")
		if j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Kind != "lost" || j.Node != c.id {
			t.Fatalf("the paused worker's job: %+v, want attempt 1 lost, attempt 2 completed by the same worker", j)
		}
		waitFor(t, 5*time.Second, "the example to drop attempt 1's result", func() bool {
			return strings.Contains(c.out.String(), fmt.Sprintf("job %d attempt 1: lease_lost; its result is dropped", id))
		})
		if n := s.scalar(`SELECT count(*) FROM gaffer.jobs j, lease_audit a WHERE a.job_id = j.id AND j.id = $1 AND a.attempt = 1`, id); n == "0" {
			t.Fatal("no lease recorded for attempt 1")
		}
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.waitExit(t, 10*time.Second)
	})

	// Drained by an operator: its claim answers draining, it finishes the
	// job it runs and leaves on its own.
	t.Run("drained", func(t *testing.T) {
		s.t = t
		c := s.startExample(r, program)
		id := s.enqueue("count", `{"to":4,"ms":200}`)
		s.await(id, "running")
		s.api("POST", "/v1/nodes/"+c.id+"/drain", map[string]any{"deadline": "20s"}, nil)
		c.waitExit(t, 10*time.Second)
		if j := s.job(id); j.State != "completed" || j.Attempt != 1 {
			t.Fatalf("the drained worker's job: %+v, want completed", j)
		}
		if n := s.node(c.id); n.State != "dead" {
			t.Fatalf("the drained worker in the nodes view: %+v, want dead", n)
		}
		if !strings.Contains(c.out.String(), "drained: stopping") {
			t.Fatal("the example did not see the drain")
		}
	})

	// A node that answers 429 rate_limited (2 requests a second per
	// token, burst 4): the worker waits Retry-After and tries again, and
	// no job's outcome is lost to it.
	t.Run("rate limited", func(t *testing.T) {
		s := startServer(t, "--rate-limit", "2")
		// The test's own token has a burst of 4 too.
		var ids []int64
		for i := range 3 {
			ids = append(ids, s.enqueue("greet", fmt.Sprintf(`{"name":"%d"}`, i)))
		}
		ids = append(ids, s.enqueue("count", `{"to":3,"ms":50}`))
		c := s.startExample(r, program)
		// Watched in the database: the test's token is limited too.
		for _, id := range ids {
			waitFor(t, 30*time.Second, fmt.Sprintf("job %d completed", id), func() bool {
				return s.scalar(`SELECT state FROM gaffer.jobs WHERE id = $1`, id) == "completed"
			})
			if a := s.scalar(`SELECT attempt FROM gaffer.jobs WHERE id = $1`, id); a != "1" {
				t.Fatalf("job %d completed at attempt %s, want 1", id, a)
			}
		}
		if !strings.Contains(c.out.String(), "429 rate_limited") {
			t.Fatal("the worker was never rate limited: the test tests nothing")
		}
		c.cmd.Process.Signal(syscall.SIGTERM)
		c.waitExit(t, 10*time.Second)
	})

	t.Run("sigterm mid-job", func(t *testing.T) {
		s.t = t
		c := s.startExample(r, program, "GAFFER_STOP_TIMEOUT=2.5")
		short := s.enqueue("count", `{"to":5,"ms":300}`)
		long := s.enqueue("count", `{"to":100,"ms":300}`)
		// Running in the database is not yet running in the example: the
		// claim's answer may still be on its way, and a SIGTERM cuts it
		// (the node then releases its jobs at the leave). Both handlers
		// have reported progress once they run.
		for _, id := range []int64{short, long} {
			waitFor(t, 20*time.Second, fmt.Sprintf("job %d's handler to report progress", id), func() bool {
				j := s.job(id)
				return j.State == "running" && j.Progress != nil
			})
		}
		if j := s.job(short); j.State != "running" {
			t.Fatalf("the short job is %s before the SIGTERM: the test needs it running", j.State)
		}
		stopAt := time.Now()
		c.cmd.Process.Signal(syscall.SIGTERM)
		// It stops claiming: a job enqueued once it says so is not run.
		waitFor(t, 5*time.Second, "the example to say it is stopping", func() bool { return strings.Contains(c.out.String(), "stopping: finishing 2 in-flight jobs") })
		pending := s.enqueue("greet", `{"name":"nobody"}`)
		c.waitExit(t, 10*time.Second)
		if took := time.Since(stopAt); took < 2*time.Second {
			t.Fatalf("the example exited %s after SIGTERM, before its 2.5s stop deadline, with the long job running", took)
		}
		if !strings.Contains(c.out.String(), "STOPPED") {
			t.Fatalf("the example did not return from run()")
		}
		// The job that could finish did; the one that could not was
		// released by the leave, to run again without using up an attempt.
		if j := s.job(short); j.State != "completed" || j.Attempt != 1 || j.Node != c.id {
			t.Fatalf("the short job: %+v, want completed by %s before it left", j, c.id)
		}
		j := s.job(long)
		if j.State != "pending" || j.Attempt != 1 || j.MaxAttempts != 4 || j.Progress == nil || j.Progress.Percent >= 100 {
			t.Fatalf("the long job: %+v, want released (pending, its attempt given back) part way", j)
		}
		// The claim the stop cut may have taken it as it closed: then the
		// node gave it back when it saw the connection gone.
		if j := s.job(pending); j.State != "pending" || j.Result != nil ||
			j.Attempt != 0 && (j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Kind != "released") {
			t.Fatalf("a job enqueued after SIGTERM: %+v, want pending, not run", j)
		}
		if n := s.node(c.id); n.State != "dead" || n.LeftReason != "stopped" {
			t.Fatalf("the worker after SIGTERM: %+v, want dead, stopped", n)
		}
	})
}

// auditLeases records every lease a job is given (claim, heartbeat).
func (s *server) auditLeases() {
	s.t.Helper()
	_, err := s.pool.Exec(context.Background(), `
		CREATE TABLE lease_audit (job_id bigint, attempt int, expires_at timestamptz);
		CREATE FUNCTION lease_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO lease_audit VALUES (NEW.id, NEW.attempt, NEW.lease_expires_at);
			RETURN NEW;
		END $$;
		CREATE TRIGGER lease_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.lease_expires_at IS NOT NULL AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at)
			EXECUTE FUNCTION lease_audit();`)
	if err != nil {
		s.t.Fatal(err)
	}
}

// leases are the leases job id's attempt was given, and the time
// between its first lease's expiry and its last's.
func (s *server) leases(id int64, attempt int) (n int, span time.Duration) {
	s.t.Helper()
	var secs float64
	err := s.pool.QueryRow(context.Background(), `SELECT count(*), coalesce(extract(epoch FROM max(expires_at) - min(expires_at)), 0)::float8
		FROM lease_audit WHERE job_id = $1 AND attempt = $2`, id, attempt).Scan(&n, &secs)
	if err != nil {
		s.t.Fatal(err)
	}
	return n, time.Duration(secs * float64(time.Second))
}

func (s *server) scalar(sql string, args ...any) string {
	s.t.Helper()
	var v any
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
	return fmt.Sprint(v)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// sameJSON reports whether got holds the same JSON value as want.
func sameJSON(got json.RawMessage, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
}

func (c *client) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		t.Fatalf("the example did not exit within %s of the signal", timeout)
	}
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the example exited %d", code)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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
