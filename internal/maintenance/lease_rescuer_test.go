package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
)

func TestLeaseRescueRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := newRescuer(e)
	j := e.enqueue(job.Request{Kind: "k", MaxAttempts: 2})

	// A node claims it and vanishes. Before the lease expires (by the
	// database clock) nothing is rescued.
	e.claimAs("ghost", time.Hour)
	if n, err := r.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("rescued %d (%v) before expiry", n, err)
	}
	// Expire the lease in the database rather than waiting for it.
	e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("rescued %d (%v), want 1", n, err)
	}
	got, _ := e.client.Get(ctx, "", j.ID)
	if got.State != job.Retrying || got.Attempt != 1 || len(got.Errors) != 1 || got.Errors[0].Kind != "lost" || got.Errors[0].Node != "ghost" {
		t.Fatalf("after rescue: %s attempt %d errors %+v", got.State, got.Attempt, got.Errors)
	}

	// The last attempt is lost too: into the DLQ.
	e.claimAs("ghost", time.Hour)
	e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
	r.RunOnce(ctx)
	got, _ = e.client.Get(ctx, "", j.ID)
	if got.State != job.Failed {
		t.Fatalf("last attempt lost: state %s", got.State)
	}
	var reason string
	e.st.Pool().QueryRow(ctx, `SELECT reason FROM gaffer.dlq WHERE job_id = $1`, j.ID).Scan(&reason)
	if reason != "lost" {
		t.Fatalf("DLQ reason %q", reason)
	}
	if n := e.counter("gaffer_job_rescued_total"); n != 2 {
		t.Fatalf("rescued_total %v", n)
	}
}

func TestRescueOfCancelRequestedJobCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	j := e.enqueue(job.Request{Kind: "k"})
	e.claimAs("ghost", time.Hour)
	if st, err := e.client.Cancel(ctx, "", j.ID); err != nil || st != job.Running {
		t.Fatalf("cancel = %s %v", st, err)
	}
	e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
	newRescuer(e).RunOnce(ctx)
	if got, _ := e.client.Get(ctx, "", j.ID); got.State != job.Cancelled {
		t.Fatalf("state %s", got.State)
	}
}
