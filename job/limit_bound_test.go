package job_test

import (
	"context"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// The claim admits without counting while a bucket's bound on its running
// attempts (limit_buckets.running_bound) leaves room, so the bound must never be below
// them. These tests break it in the two ways a claim could: a limit
// changed to cover jobs already running, and a claim that took jobs
// without seeing a new limit and committed after a count that could not
// see it.

// A limit changed to cover more jobs counts them: its bucket's bound is
// cleared. Red with the limits_changed trigger dropped (the bound of 4 a
// jobs lets 4 more start beside the 8 b jobs, 16 running under 14).
func TestChangedLimitCountsAfresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "a-only", Queue: "scope", Kind: "a", Concurrency: 14}); err != nil {
		t.Fatal(err)
	}
	kind := func(k string) func(*job.Request) { return func(r *job.Request) { r.Kind = k } }
	e.enqueueMany("t", "scope", 8, kind("b"))
	if _, jobs := e.claimN("scope", 8); len(jobs) != 8 {
		t.Fatalf("claimed %d b jobs, no limit on them: want 8", len(jobs))
	}
	// Two claims of a jobs: the first counts and sets the bound, the
	// second fits under it and raises it (4 running a jobs).
	e.enqueueMany("t", "scope", 8, kind("a"))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for range 2 {
			if _, jobs := e.claimN("scope", 2); len(jobs) != 2 {
				t.Fatalf("claimed %d a jobs, want 2", len(jobs))
			}
		}
		n := e.count(`SELECT coalesce(max(running_bound), -1) FROM gaffer.limit_buckets WHERE limit_name = 'a-only'`)
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bound %d after two claims of 2, want 4 (the test relies on it being set)", n)
		}
		e.exec(`UPDATE gaffer.jobs SET state = 'pending', lease_expires_at = NULL
			WHERE queue = 'scope' AND kind = 'a' AND state = 'running'`)
	}
	// Now every job of the queue counts: 12 running, 2 slots.
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "a-only", Queue: "scope", Concurrency: 14}); err != nil {
		t.Fatal(err)
	}
	if _, jobs := e.claimN("scope", 4); len(jobs) != 2 {
		t.Fatalf("claimed %d with 12 of 14 slots held: want 2", len(jobs))
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE queue = 'scope' AND state = 'running'`); n != 14 {
		t.Fatalf("%d running, want 14", n)
	}
}

// A claim in flight when a limit is created is counted by the claims
// after it: the limit's creation waits for the claims in flight to
// commit (the limits lock, store/schema/limits.sql), and claims made
// while it waits take nothing, so no count that could not see the claim
// in flight becomes the bucket's bound. Red with the lock taken out of
// gaffer.claim: the limit is set at once, a claim of 3 counts 0 running
// and sets a bound of 3, and a claim of 5 fits under it beside the 6 jobs
// of the claim in flight, 14 running under 10.
func TestClaimInFlightAcrossANewLimitIsCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.enqueueMany("t", "fence", 20)
	// A node's claim of 6 jobs, made before the limit exists, commits
	// only after the limit was asked for and another claim was made.
	tx, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE gaffer.jobs j
		SET state = 'running', attempt = j.attempt + 1, lease_token = 1,
		    lease_expires_at = now() + interval '1 hour', node = 'slow', attempted_at = now()
		FROM unnest(gaffer.claim_pick('fence', 6, 'slow', NULL, NULL, NULL, NULL, NULL, NULL, NULL)) AS p(id)
		WHERE j.id = p.id`); err != nil {
		t.Fatal(err)
	}
	set := make(chan error, 1)
	go func() {
		_, err := e.client.SetLimit(ctx, job.Limit{Name: "ten", Queue: "fence", Concurrency: 10})
		set <- err
	}()
	time.Sleep(200 * time.Millisecond) // the limit's creation is waiting for the claim in flight
	select {
	case err := <-set:
		t.Fatalf("the limit was set (err %v) while a claim that did not see it was in flight", err)
	default:
	}
	got, err := e.st.Claim(ctx, store.ClaimParams{Queue: "fence", Limit: 3, Token: 2, LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(got.Jobs) != 0 || !got.Busy {
		t.Fatalf("claimed %d (busy %v, err %v) while a limit was being set, want none and busy", len(got.Jobs), got.Busy, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-set; err != nil {
		t.Fatal(err)
	}
	// 6 running: four slots left.
	if _, jobs := e.claimN("fence", 5); len(jobs) != 4 {
		t.Fatalf("claimed %d with 6 of 10 slots held: want 4", len(jobs))
	}
	if _, jobs := e.claimN("fence", 5); len(jobs) != 0 {
		t.Fatalf("claimed %d with 10 of 10 slots held: want 0", len(jobs))
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE queue = 'fence' AND state = 'running'`); n != 10 {
		t.Fatalf("%d running, want 10", n)
	}
}

// A claim made while a limit is being changed claims nothing and says it
// was busy; the worker claims again shortly after, rather than leaving
// the job to its next poll (an hour here) or the next insert.
func TestWorkerClaimsAgainAfterALimitChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	started := make(chan int64, 1)
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		started <- j.ID
		return nil
	})
	e.startWorker(job.WorkerConfig{PollInterval: time.Hour})
	time.Sleep(200 * time.Millisecond) // the initial poll has passed
	// A limit's change in flight: it holds the limits lock exclusively.
	tx, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(gaffer.limits_lock_id())`); err != nil {
		t.Fatal(err)
	}
	id := e.enqueue(job.Request{Kind: "k"}).ID // its notification wakes a claim, which is busy
	select {
	case got := <-started:
		t.Fatalf("job %d started while a limit was being changed", got)
	case <-time.After(500 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	select {
	case got := <-started:
		if got != id {
			t.Fatalf("started %d, want %d", got, id)
		}
		if d := time.Since(committed); d > 2*time.Second {
			t.Fatalf("the job started %v after the change committed", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start after the limit's change committed: the busy claim was taken for an empty queue")
	}
}
