package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
)

// These tests run the Workers on a fake clock: a claim's wait, its polls
// and the sweep move only when the test turns the clock, so none of them
// waits on the wall clock for a deadline, and each goes red if the code
// reads the wall clock instead (it would then wait out an hour's poll).

type claimed struct {
	jobs []remote.ClaimedJob
	err  error
}

// claimAsync starts c in the background and returns once the claim waits
// for work with its poll timer armed.
func (e *env) claimAsync(r *remote.Workers, c remote.Claim) <-chan claimed {
	e.t.Helper()
	done := make(chan claimed, 1)
	go func() {
		res, err := r.Claim(context.Background(), c)
		done <- claimed{res.Jobs, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); r.Waiting() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatal("the claim did not wait for work")
		}
	}
	if !e.clock.WaitForTimers(1, 10*time.Second) {
		e.t.Fatal("the waiting claim armed no timer on its clock")
	}
	return done
}

// result returns what the claim got, failing the test if it does not
// answer within 10s of real time.
func (e *env) result(done <-chan claimed, what string) claimed {
	e.t.Helper()
	select {
	case got := <-done:
		return got
	case <-time.After(10 * time.Second):
		e.t.Fatalf("%s: the claim did not answer", what)
		return claimed{}
	}
}

// stillWaiting fails the test if the claim answers within 200ms.
func (e *env) stillWaiting(done <-chan claimed, what string) {
	e.t.Helper()
	select {
	case got := <-done:
		e.t.Fatalf("%s: the claim answered %v %+v while its clock stood still", what, got.err, got.jobs)
	case <-time.After(200 * time.Millisecond):
	}
}

// A waiting claim wakes on the insert's notification, not on its poll
// or its deadline: on a clock that stands still it still returns with the
// job. An empty wait ends at its deadline by its clock, and EndWaits
// answers a waiting claim at once. Red with Workers.HandleNotification
// doing nothing (the first claim never answers).
func TestClaimWakesOnNotification(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clock = clock.NewFake(time.Now())
	r := e.newWorkers(remote.Config{})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})

	done := e.claimAsync(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 5, Wait: 5 * time.Second})
	j := e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	if got := e.result(done, "after an insert"); got.err != nil || len(got.jobs) != 1 || got.jobs[0].ID != j.ID {
		t.Fatalf("claim: %v %+v", got.err, got.jobs)
	}

	done = e.claimAsync(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 5, Wait: 5 * time.Second})
	e.stillWaiting(done, "before its deadline")
	e.clock.Advance(5 * time.Second)
	if got := e.result(done, "at its deadline"); got.err != nil || len(got.jobs) != 0 {
		t.Fatalf("empty wait: %v %+v", got.err, got.jobs)
	}

	done = e.claimAsync(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 5, Wait: 10 * time.Second})
	r.EndWaits()
	if got := e.result(done, "after EndWaits"); got.err != nil || len(got.jobs) != 0 {
		t.Fatalf("after EndWaits: %v %+v", got.err, got.jobs)
	}
}

// A job that becomes due without a notification (its run_at passing) is
// found at the claim's next poll, by its clock. Red with the poll timed
// by the wall clock (an hour's poll: the claim does not answer).
func TestClaimPollsOnItsClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clock = clock.NewFake(time.Now())
	r := e.newWorkers(remote.Config{PollInterval: time.Hour, MaxWait: 2 * time.Hour})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	j := e.enqueue(job.Request{Kind: "k", Tenant: "acme", Delay: time.Hour}) // not due: no notification

	done := e.claimAsync(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 5, Wait: 2 * time.Hour})
	// Due now, by the database's clock, and nobody told.
	e.exec(`UPDATE gaffer.jobs SET run_at = now() WHERE id = $1`, j.ID)
	e.stillWaiting(done, "before its poll")
	e.clock.Advance(90 * time.Minute) // past the poll and its ±10% jitter, before the deadline
	if got := e.result(done, "at its poll"); got.err != nil || len(got.jobs) != 1 || got.jobs[0].ID != j.ID {
		t.Fatalf("claim at the poll: %v %+v", got.err, got.jobs)
	}
}

// The sweep runs on the Workers' clock: an idle drained worker is moved
// along once the clock passes the sweep's interval, not before. Red with
// the sweep timed by the wall clock (an hour's interval: it never runs).
func TestSweepRunsOnItsClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.clock = clock.NewFake(time.Now())
	r := e.newWorkers(remote.Config{SweepInterval: time.Hour})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	if err := cluster.NewAdmin(e.st.Pool()).Drain(ctx, w.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.clock.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the sweep armed no timer on its clock")
	}
	time.Sleep(200 * time.Millisecond)
	if st := e.nodeState(w.ID); st == "dead" {
		t.Fatal("swept before the clock was turned")
	}
	e.clock.Advance(6 * time.Hour) // five intervals while none is live, and the jitter
	for deadline := time.Now().Add(10 * time.Second); e.nodeState(w.ID) != "dead"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not swept after the clock passed the interval: %s", e.nodeState(w.ID))
		}
	}
	if reason := e.leftReason(w.ID); reason != "drained" {
		t.Fatalf("left reason %q, want drained", reason)
	}
}

// A waiting claim that meets a limit's change in flight (Busy: it claimed
// nothing) claims again shortly after, not at its next poll (an hour
// here). Red with a busy claim waiting for its poll like an empty one.
func TestWaitingClaimClaimsAgainAfterALimitChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.newWorkers(remote.Config{PollInterval: time.Hour, MaxWait: 2 * time.Hour})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	ctx := context.Background()
	done := make(chan claimed, 1)
	go func() {
		res, err := r.Claim(ctx, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 5, Wait: time.Hour})
		done <- claimed{res.Jobs, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); r.Waiting() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the claim did not wait for work")
		}
	}
	tx, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(gaffer.limits_lock_id())`); err != nil {
		t.Fatal(err)
	}
	j := e.enqueue(job.Request{Kind: "k", Tenant: "acme"}) // wakes the claim, which is busy
	select {
	case got := <-done:
		t.Fatalf("the claim answered %v %+v while a limit was being changed", got.err, got.jobs)
	case <-time.After(500 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.result(done, "after the change committed"); got.err != nil || len(got.jobs) != 1 || got.jobs[0].ID != j.ID {
		t.Fatalf("claim after the change: %v %+v", got.err, got.jobs)
	}
}
