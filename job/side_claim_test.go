package job_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// A due job of a tenant with nothing else waiting starts while the claim
// of the queue in flight is still running, however long that claim takes
// (here: blocked on the bucket lock of a's limit, which the test holds):
// the insert's notification of b's unit makes a side claim of b's jobs
// only. Red without the side claim: b's job waits for the claim in flight.
func TestSideClaimDoesNotWaitForTheClaimInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "a-one", Kind: "a", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO gaffer.limit_buckets (limit_name, key) VALUES ('a-one', '')`)
	e.enqueueMany("a", "side", 5, func(r *job.Request) { r.Kind = "a" })
	var aStarted, bStarted atomic.Int64
	e.reg.HandleFunc("a", func(ctx context.Context, j *job.Job) error {
		aStarted.Add(1)
		return nil
	})
	e.reg.HandleFunc("b", func(ctx context.Context, j *job.Job) error {
		bStarted.Add(1)
		return nil
	})

	// The claim of a's jobs waits on the bucket while this holds it.
	tx, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM gaffer.limit_buckets WHERE limit_name = 'a-one' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// Claims of up to 10 of 20 slots: the claim in flight leaves 10 free.
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"side": 20}, ClaimBatch: 10, PollInterval: time.Hour})
	waitUntil(t, 10*time.Second, "the claim of a's jobs to wait on the bucket lock", func() bool {
		var waiting bool
		err := e.st.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%gaffer.claim_ready(%')`).Scan(&waiting)
		return err == nil && waiting
	})

	e.enqueue(job.Request{Kind: "b", Tenant: "b", Queue: "side"})
	waitUntil(t, 5*time.Second, "b's job to start while the claim of a's is in flight", func() bool { return bStarted.Load() == 1 })
	if n := aStarted.Load(); n != 0 {
		t.Fatalf("%d of a's jobs started while the claim of them waited on the bucket", n)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "a's jobs to start once the bucket is free", func() bool { return aStarted.Load() == 5 })
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
	}
}

// Hole 4 of issue 23: the side claims' grace leaves a fresh job of a unit
// the last claim did not serve to the side claim its insert asks for —
// but an insert that comes while the claim loop is idle asks for none,
// and the job waited for the next poll (here 2 s) instead of the 25 ms
// grace. The loop's last claim served tenant a, whose due jobs a limit
// now refuses. Red with graceFor ignoring the unasked notification.
func TestGraceDoesNotLeaveAJobNoSideClaimTakes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "a-one", Kind: "a", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var aStarted atomic.Int64
	bStarted := make(chan time.Time, 1)
	e.reg.HandleFunc("a", func(ctx context.Context, j *job.Job) error {
		aStarted.Add(1)
		<-release
		return nil
	})
	e.reg.HandleFunc("b", func(ctx context.Context, j *job.Job) error {
		bStarted <- time.Now()
		return nil
	})
	defer close(release)
	e.enqueueMany("a", "grace4", 3, func(r *job.Request) { r.Kind = "a" })
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"grace4": 10}, PollInterval: 2 * time.Second})
	waitUntil(t, 10*time.Second, "one of a's jobs to start", func() bool { return aStarted.Load() == 1 })
	time.Sleep(300 * time.Millisecond) // the claim loop is idle, waiting for its poll
	for range 3 {
		enqueued := time.Now()
		e.enqueue(job.Request{Kind: "b", Tenant: "b", Queue: "grace4"})
		select {
		case at := <-bStarted:
			if d := at.Sub(enqueued); d > time.Second {
				t.Fatalf("b's job started %s after its insert: it waited for a poll", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("b's job did not start")
		}
		time.Sleep(300 * time.Millisecond)
	}
	if n := aStarted.Load(); n != 1 {
		t.Fatalf("%d of a's jobs started under a limit of 1", n)
	}
}
