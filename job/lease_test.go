package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// claimAs claims the job directly, as a node that then goes silent.
func (e *env) claimAs(node string, ttl time.Duration) store.Job {
	e.t.Helper()
	rows, err := e.st.ClaimJobs(context.Background(), store.ClaimParams{Queue: "default", Limit: 1, Token: 42, LeaseTTL: ttl, Node: node})
	if err != nil || len(rows) != 1 {
		e.t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	return rows[0]
}

func newRescuer(e *env) *maintenance.LeaseRescuer {
	r, err := maintenance.NewLeaseRescuer(maintenance.LeaseRescuerConfig{Pool: e.st.Pool(), Metrics: e.metrics})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func TestHeartbeatKeepsLongJobAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	release := make(chan struct{})
	e.reg.HandleFunc("long", func(ctx context.Context, j *job.Job) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	e.startWorker(job.WorkerConfig{LeaseTTL: time.Second})
	j := e.enqueue(job.Request{Kind: "long"})
	first := e.waitState(j.ID, job.Running)
	r := newRescuer(e)
	// Run for three lease lengths; heartbeats keep moving the lease forward
	// so the rescuer never takes the job.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n, _ := r.RunOnce(ctx); n != 0 {
			t.Fatal("rescuer took a job that was heartbeating")
		}
		time.Sleep(100 * time.Millisecond)
	}
	now, _ := e.st.GetJob(ctx, "", j.ID)
	if !now.LeaseExpiresAt.After(first.RunAt.Add(2 * time.Second)) {
		t.Fatalf("lease not extended: %s", now.LeaseExpiresAt)
	}
	close(release)
	if done := e.waitState(j.ID, job.Completed); done.Attempt != 1 {
		t.Fatalf("attempt %d", done.Attempt)
	}
}

func TestRefusedHeartbeatCancelsHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	causes := make(chan error, 1)
	e.reg.HandleFunc("long", func(ctx context.Context, j *job.Job) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil // would complete the job, if it were still ours
	})
	e.startWorker(job.WorkerConfig{LeaseTTL: time.Second})
	j := e.enqueue(job.Request{Kind: "long"})
	e.waitState(j.ID, job.Running)
	// The job moves on without this attempt: its lease expires and it is
	// rescued (the queue is paused so that it stays retrying), so the next
	// heartbeat is refused.
	if err := e.client.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
	if n, _ := newRescuer(e).RunOnce(ctx); n != 1 {
		// A heartbeat got in between the two statements; expire again.
		e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
		if n, _ := newRescuer(e).RunOnce(ctx); n != 1 {
			t.Fatal("rescue did not happen")
		}
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, job.ErrLeaseLost) {
			t.Fatalf("cause %v", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled after its heartbeat was refused")
	}
	time.Sleep(100 * time.Millisecond)
	got, _ := e.client.Get(ctx, "", j.ID)
	if got.State != job.Retrying {
		t.Fatalf("stale handler's return changed the job: %s", got.State)
	}
	if n := e.counter("gaffer_job_stale_rejected_total", "op", "heartbeat"); n != 1 {
		t.Fatalf("stale heartbeat count %v", n)
	}
}

func TestStopReleasesRunningJobsAtDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	started := make(chan struct{}, 2)
	e.reg.HandleFunc("quick", func(ctx context.Context, j *job.Job) error {
		started <- struct{}{}
		time.Sleep(100 * time.Millisecond)
		return nil
	})
	e.reg.HandleFunc("stuck", func(ctx context.Context, j *job.Job) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	w, err := job.NewWorker(job.WorkerConfig{Pool: e.st.Pool(), Registry: e.reg, NodeID: "leaving", Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	quick := e.enqueue(job.Request{Kind: "quick"})
	stuck := e.enqueue(job.Request{Kind: "stuck", MaxAttempts: 1})
	w.Start(ctx)
	<-started
	<-started
	stopCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	// The quick job finished within the deadline; the stuck one was released
	// without using up its only attempt, and is claimable at once.
	if got, _ := e.client.Get(ctx, "", quick.ID); got.State != job.Completed {
		t.Fatalf("quick job %s", got.State)
	}
	got, _ := e.client.Get(ctx, "", stuck.ID)
	if got.State != job.Pending || got.MaxAttempts != 2 || got.Errors[0].Kind != "released" {
		t.Fatalf("stuck job %s max %d errors %+v", got.State, got.MaxAttempts, got.Errors)
	}
	if got.RunAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("released job not due at once: %s", got.RunAt)
	}
}

func TestDrainStopsClaiming(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error { return nil })
	e.clock = clock.NewFake(time.Now())
	const poll = 50 * time.Millisecond
	w := e.startWorker(job.WorkerConfig{PollInterval: poll})
	w.SetClaiming(false)
	j := e.enqueue(job.Request{Kind: "k"})
	e.polls(poll, 3)
	if got, _ := e.client.Get(ctx, "", j.ID); got.State != job.Pending {
		t.Fatalf("non-claiming worker ran a job: %s", got.State)
	}
	w.SetClaiming(true)
	e.waitState(j.ID, job.Completed)
}

// One node can run two attempts of a job at once: the one that lost its
// lease and the one that took over. They must be tracked apart.
func TestSameNodeReclaimsJobItLostTheLeaseOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	causes := make(chan error, 2)
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		if j.Attempt == 1 {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil // a stale success: must not count
		}
		return j.SetResult("attempt 2")
	})
	e.startWorker(job.WorkerConfig{LeaseTTL: time.Second})
	j := e.enqueue(job.Request{Kind: "k"})
	e.waitFor(j.ID, "attempt 1 running", func(x *job.Job) bool { return x.State == job.Running && x.Attempt == 1 })
	r := newRescuer(e)
	for n := 0; n == 0; {
		e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1 AND attempt = 1`, j.ID)
		n, _ = r.RunOnce(ctx)
	}
	done := e.waitState(j.ID, job.Completed)
	if done.Attempt != 2 || string(done.Result) != `"attempt 2"` {
		t.Fatalf("completed by attempt %d with %s", done.Attempt, done.Result)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, job.ErrLeaseLost) {
			t.Fatalf("attempt 1 cause %v", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("attempt 1 never learned it lost its lease")
	}
}

// A worker whose pool is saturated — every connection held by something
// slow — still renews its leases: heartbeats go through a pool of their
// own (WorkerConfig.LeasePool) and never wait behind claims and
// completions for a connection. Red with LeasePool left to the shared
// pool: the lease of 1 s ran out while the pool was busy.
func TestLeasesKeptWhileThePoolIsSaturated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	open := func(conns int32) *store.Store {
		st, err := store.OpenWith(ctx, url, store.ConnectOptions{MaxConns: conns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	shared, leases, observer := open(2), open(1), open(2)
	reg := job.NewRegistry()
	started, release := make(chan struct{}), make(chan struct{})
	reg.HandleFunc("long", func(ctx context.Context, j *job.Job) error {
		close(started)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	w, err := job.NewWorker(job.WorkerConfig{Pool: shared.Pool(), LeasePool: leases.Pool(), Registry: reg, NodeID: "n1",
		LeaseTTL: time.Second, CheckInterval: 50 * time.Millisecond, Queues: map[string]int{"default": 1}, Logger: testLogger(t)})
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
	client := job.NewClient(observer.Pool(), nil)
	res, err := client.Enqueue(ctx, job.Request{Kind: "long"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	// Every connection of the shared pool, held for 2.5 lease TTLs.
	var held []*pgxpool.Conn
	releaseHeld := func() {
		for _, c := range held {
			c.Release()
		}
		held = nil
	}
	defer releaseHeld() // before the pools close
	for range 2 {
		c, err := shared.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var live bool
		if err := observer.Pool().QueryRow(ctx, `SELECT lease_expires_at > clock_timestamp() FROM gaffer.jobs WHERE id = $1`, res.Job.ID).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if !live {
			t.Fatal("the running job's lease ran out while the worker's pool was busy: its heartbeats waited for a connection")
		}
	}
	releaseHeld()
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := client.Get(ctx, "", res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == job.Completed {
			if j.Attempt != 1 || len(j.Errors) != 0 {
				t.Fatalf("completed at attempt %d with errors %+v, want its first attempt, never lost", j.Attempt, j.Errors)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not complete: %s attempt %d", j.State, j.Attempt)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An attempt whose handler returned holds its lease until its outcome is
// written: a completion queued behind a slow database for three lease
// lengths is renewed all along, the rescuer never takes the job, and the
// completion lands on attempt 1. (Unrenewed, the lease ran out a lease
// length after the handler returned: the attempt was lost, and a job on
// its last attempt dead-lettered after its handler had succeeded.)
func TestLeaseHeldWhileCompletionIsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	returned := make(chan struct{}, 1)
	e.reg.HandleFunc("quick", func(ctx context.Context, j *job.Job) error {
		returned <- struct{}{}
		return nil
	})
	w := e.startWorker(job.WorkerConfig{LeaseTTL: time.Second})
	release := w.HoldCompletions()
	defer release()
	j := e.enqueue(job.Request{Kind: "quick", MaxAttempts: 1})
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
	r := newRescuer(e)
	returnedAt := time.Now()
	for time.Since(returnedAt) < 3*time.Second {
		if n, err := r.RunOnce(ctx); err != nil || n != 0 {
			t.Fatalf("the rescuer took %d jobs (%v) while their completion waited", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	held, err := e.st.GetJob(ctx, "", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if held.State != string(job.Running) || held.LeaseExpiresAt == nil || !held.LeaseExpiresAt.After(time.Now()) {
		t.Fatalf("while its completion waited: state %s, lease until %v", held.State, held.LeaseExpiresAt)
	}
	release()
	done := e.waitState(j.ID, job.Completed)
	if done.Attempt != 1 || len(done.Errors) != 0 {
		t.Fatalf("completed on attempt %d with errors %v", done.Attempt, done.Errors)
	}
	// Written, the attempt is no longer held (nor renewed) here.
	for deadline := time.Now().Add(5 * time.Second); len(w.RunningJobs()) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node still holds %v after the completion was written", w.RunningJobs())
		}
	}
}
