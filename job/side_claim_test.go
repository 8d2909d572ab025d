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
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%gaffer.claim(%')`).Scan(&waiting)
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
