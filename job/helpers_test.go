package job_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	t       *testing.T
	st      *store.Store
	client  *job.Client
	reg     *job.Registry
	metrics *job.Metrics
	promReg *prometheus.Registry
	// clock, when set, is the clock of the workers startWorker starts.
	clock *clock.Fake
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st := pgtest.NewStore(t)
	promReg := prometheus.NewRegistry()
	m := job.NewMetrics(promReg)
	return &env{t: t, st: st, client: job.NewClient(st.Pool(), m), reg: job.NewRegistry(), metrics: m, promReg: promReg}
}

func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// startWorker starts a worker (and a listener feeding it) and stops both
// when the test ends.
func (e *env) startWorker(cfg job.WorkerConfig) *job.Worker {
	e.t.Helper()
	cfg.Pool, cfg.Registry, cfg.Metrics = e.st.Pool(), e.reg, e.metrics
	if cfg.NodeID == "" {
		cfg.NodeID = "node-a"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(e.t)
	}
	w, err := job.NewWorker(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.clock != nil {
		w.SetClock(e.clock)
	}
	l := e.st.NewListener(store.ListenerConfig{
		Channels: []string{store.ChannelJobs, store.ChannelUnits, store.ChannelControl}, OnNotify: w.HandleNotification, OnConnect: w.WakeAll,
	})
	ctx := context.Background()
	l.Start(ctx)
	if err := w.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	// Tests that count on a notification (a cancel reaching the handler
	// at once) need the LISTEN in place before they act.
	for deadline := time.Now().Add(10 * time.Second); !l.Connected(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatal("listener not connected after 10s")
		}
	}
	e.t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Stop(stopCtx)
		l.Stop()
	})
	return w
}

// polls turns e.clock so that the claim loop of a one-queue worker runs n
// whole polls, for tests whose claims come back short (or that claim
// nothing). Each turn fires the poll timer (and a fetch cooldown the loop
// may be waiting out, two claims having come at one instant of the fake
// clock); the loop arms the poll timer again first thing after its last
// poll returned, so a turn is over when it has, and n+1 turns hold n
// polls. The heartbeat ticker is the worker's other timer.
func (e *env) polls(poll time.Duration, n int) {
	e.t.Helper()
	for range n + 1 {
		e.clock.Advance(2 * poll) // past the poll's ±10% jitter
		if !e.clock.WaitForTimers(2, 10*time.Second) {
			e.t.Fatal("the claim loop did not come back to wait for its next poll")
		}
	}
}

func (e *env) enqueue(r job.Request) *job.Job {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), r)
	if err != nil {
		e.t.Fatalf("enqueue %+v: %v", r, err)
	}
	return res.Job
}

// waitFor polls the job until cond holds or 10s pass.
func (e *env) waitFor(id int64, what string, cond func(*job.Job) bool) *job.Job {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := e.client.Get(context.Background(), "", id)
		if err != nil {
			e.t.Fatalf("get job %d: %v", id, err)
		}
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d never became %s; last seen %s attempt %d errors %+v", id, what, j.State, j.Attempt, j.Errors)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) waitState(id int64, s job.State) *job.Job {
	e.t.Helper()
	return e.waitFor(id, string(s), func(j *job.Job) bool { return j.State == s })
}

func (e *env) counter(name string, labels ...string) float64 {
	e.t.Helper()
	families, err := e.promReg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				total += m.GetCounter().GetValue()
			} else if m.GetGauge() != nil {
				total += m.GetGauge().GetValue()
			}
		}
	}
	return total
}

// settledCounter is counter once it reaches want or 5 s pass: a worker
// counts an outcome after its write commits, so a test that saw the
// job's new state can read the counter a moment before it moves. The
// caller still compares the value, so a count past want is caught.
func (e *env) settledCounter(want float64, name string, labels ...string) float64 {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := e.counter(name, labels...)
		if got >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exec runs test-only SQL (moving the database's view of time for a job).
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.st.Pool().Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}
