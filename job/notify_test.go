package job_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/job"
)

// The LISTEN connection is killed server-side; the worker must reconnect
// and be woken by inserts again (polling is an hour, so only NOTIFY can).
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	done := make(chan int64, 10)
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		done <- j.ID
		return nil
	})
	e.startWorker(job.WorkerConfig{PollInterval: time.Hour})
	waitRun := func(what string) {
		t.Helper()
		id := e.enqueue(job.Request{Kind: "k"}).ID
		select {
		case got := <-done:
			if got != id {
				t.Fatalf("%s: ran %d, want %d", what, got, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: job not picked up: the listener is not listening", what)
		}
	}
	time.Sleep(200 * time.Millisecond) // the initial poll has passed
	waitRun("before the kill")
	var killed int
	err := e.st.Pool().QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d listening backends (%v), want 1", killed, err)
	}
	// Reconnecting takes a backoff of up to ~100ms; inserts made before it
	// is back are caught by the wake-up that follows every reconnect.
	waitRun("after the kill")
}

// While notifications cannot reach a worker (its node's LISTEN
// connection is lost), its claim loops poll every 50 ms: a job enqueued
// meanwhile starts in milliseconds, not after the poll interval (an hour
// here). Red without the short poll.
func TestDeafWorkerPollsSoon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	done := make(chan int64, 1)
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		done <- j.ID
		return nil
	})
	w, err := job.NewWorker(job.WorkerConfig{Pool: e.st.Pool(), Registry: e.reg, NodeID: "deaf", PollInterval: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w.Stop(stopCtx)
	})
	time.Sleep(200 * time.Millisecond) // the initial poll has passed
	w.SetListening(false)              // no LISTEN: as when its connection was lost
	id := e.enqueue(job.Request{Kind: "k"}).ID
	select {
	case got := <-done:
		if got != id {
			t.Fatalf("ran %d, want %d", got, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a job enqueued while the worker could not hear notifications waited for the hour's poll")
	}
}

// When the server terminates every connection of a node's pool at once
// (a pooler recycling them, pg_terminate_backend, as bench pressure
// backend-kill does), the claim meets the dead connections one after
// another: each is claimed on again at once, not after a growing wait
// (10 ms doubling up to 250 ms: about a second past sixteen dead
// connections, 1.03 s when it was taken out).
func TestClaimPastTerminatedConnectionsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	done := make(chan int64, 1)
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		done <- j.ID
		return nil
	})
	cfg := e.st.Pool().Config().Copy()
	cfg.ConnConfig.RuntimeParams["application_name"] = "doomed-worker"
	cfg.MaxConns, cfg.MinConns = 16, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the worker's stop, which writes its completion
	w, err := job.NewWorker(job.WorkerConfig{Pool: pool, Registry: e.reg, NodeID: "doomed", PollInterval: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w.Stop(stopCtx)
	})
	time.Sleep(200 * time.Millisecond) // the initial poll has passed
	// Sixteen live connections in the pool, idle, then all terminated.
	var conns []*pgxpool.Conn
	for range 16 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	var killed int
	if err := e.st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = 'doomed-worker' AND datname = current_database()`).Scan(&killed); err != nil || killed != 16 {
		t.Fatalf("terminated %d of the pool's 16 backends (%v)", killed, err)
	}
	id := e.enqueue(job.Request{Kind: "k"}).ID
	start := time.Now()
	w.Wake(job.DefaultQueue)
	select {
	case got := <-done:
		if got != id {
			t.Fatalf("ran %d, want %d", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	// Waiting after each dead connection took 1.03 s here (the waits'
	// lower bounds: 5, 10, 20, 40, 80, then 125 ms each).
	if took := time.Since(start); took > 750*time.Millisecond {
		t.Fatalf("the job started %s after the wake, past 16 terminated connections: the claim waited between them", took)
	}
}

// A claim that committed while its answer was on the way when the
// connection broke (a backend terminated, a restart, a network cut)
// started a job under a lease the node never heard of. The node gives
// such a claim's jobs back before its next claim, found by the claim's
// lease token: the job runs again within moments, not a lease (a
// minute here) later, and the attempt is not counted. Red without it:
// the job stays running on the node until the lease expires.
func TestClaimWhoseAnswerWasLostIsGivenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ran := make(chan int, 4)
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		ran <- j.Attempt
		return nil
	})
	cfg := e.st.Pool().Config().Copy()
	proxy, err := faultproxy.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	host, port, _ := net.SplitHostPort(proxy.Addr())
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w, err := job.NewWorker(job.WorkerConfig{Pool: pool, Registry: e.reg, NodeID: "cut-off", PollInterval: 100 * time.Millisecond,
		LeaseTTL: time.Minute, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// Every answer takes 400 ms to come back: the claim commits, and the
	// connection is cut while its answer is still in the proxy.
	proxy.SetLatency(400 * time.Millisecond)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w.Stop(stopCtx)
	})
	id := e.enqueue(job.Request{Kind: "k"}).ID
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if j, err := e.st.GetJob(ctx, "", id); err == nil && j.State == string(job.Running) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker's claim did not commit")
		}
	}
	proxy.Set(faultproxy.Reset) // the answer never arrives
	proxy.SetLatency(0)
	proxy.Set(faultproxy.Pass)
	select {
	case attempt := <-ran:
		if attempt != 2 {
			t.Fatalf("the job ran as attempt %d, want 2 (the lost claim's 1 given back)", attempt)
		}
	case <-time.After(10 * time.Second):
		j, _ := e.st.GetJob(ctx, "", id)
		t.Fatalf("the job did not run within 10 s of its claim's lost answer: %s on %v, lease until %v", j.State, j.Node, j.LeaseExpiresAt)
	}
	e.waitState(id, job.Completed)
}
