package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// claimAndFail claims the one due job of queue q and fails its attempt.
func (e *env) claimAndFail(q string, f store.Failure) {
	e.t.Helper()
	ctx := context.Background()
	jobs, err := e.st.ClaimJobs(ctx, store.ClaimParams{Queue: q, Limit: 1, Token: time.Now().UnixNano(), LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(jobs) != 1 {
		e.t.Fatalf("claim from %s: %d jobs, %v", q, len(jobs), err)
	}
	j := jobs[0]
	f.Lease = store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}
	if _, err := e.st.FailJob(ctx, f); err != nil {
		e.t.Fatal(err)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	// A job waiting out an hour's backoff becomes due now, same id.
	waiting := e.enqueue(job.Request{Kind: "k", Queue: "backoff", MaxAttempts: 3})
	e.claimAndFail("backoff", store.Failure{RetryDelay: time.Hour, Message: "boom", Kind: "error"})
	got, err := e.client.Retry(ctx, "", waiting.ID)
	if err != nil || got != waiting.ID {
		t.Fatalf("retry of a retrying job = %d, %v", got, err)
	}
	if j, _ := e.client.Get(ctx, "", waiting.ID); j.State != job.Retrying || time.Since(j.RunAt) < -time.Second {
		t.Fatalf("after retry: state %s run_at %v, want due now", j.State, j.RunAt)
	}

	// A failed job's DLQ entry is replayed into one new job, once.
	dead := e.enqueue(job.Request{Kind: "k", Queue: "dead", MaxAttempts: 1, Args: []byte(`{"n":7}`)})
	e.claimAndFail("dead", store.Failure{Message: "boom", Kind: "error"})
	replay, err := e.client.Retry(ctx, "default", dead.ID)
	if err != nil || replay == dead.ID {
		t.Fatalf("retry of a failed job = %d, %v", replay, err)
	}
	nj, err := e.client.Get(ctx, "", replay)
	if err != nil || nj.State != job.Pending || string(nj.Args) != `{"n":7}` || nj.ReplayOf == 0 {
		t.Fatalf("replayed job %+v, %v", nj, err)
	}
	if _, err := e.client.Retry(ctx, "", dead.ID); !errors.Is(err, job.ErrNotRetryable) {
		t.Fatalf("second retry of the failed job = %v, want ErrNotRetryable", err)
	}

	// Other states, other tenants and unknown ids are refused.
	pending := e.enqueue(job.Request{Kind: "k", Queue: "idle"})
	if _, err := e.client.Retry(ctx, "", pending.ID); !errors.Is(err, job.ErrNotRetryable) {
		t.Fatalf("retry of a pending job = %v", err)
	}
	if _, err := e.client.Retry(ctx, "other", waiting.ID); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("retry across tenants = %v", err)
	}
	if _, err := e.client.Retry(ctx, "", 1<<40); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("retry of an unknown id = %v", err)
	}
	var n int
	e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs`).Scan(&n)
	if n != 4 {
		t.Fatalf("%d jobs, want 4 (three enqueued, one replay)", n)
	}
}
