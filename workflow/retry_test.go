package workflow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// Retrying a failed step's job (POST /v1/jobs/{id}/retry, the job page's
// Retry) already lets the run go on: it replays the job's DLQ entry,
// which resumes the run.
func TestRetryingAFailedStepsJobResumesTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.submit(workflow.New("r").Job("a", "k", nil, own("a")).Job("b", "k", nil, own("b"), workflow.After("a")))
	e.failStep(run.ID, "a")
	failed := e.get(run.ID)
	if failed.State != workflow.Failed || step(failed, "b").State != "cancelled" {
		t.Fatalf("after a failed: %+v", failed)
	}
	newID, err := job.NewClient(e.st.Pool(), nil).Retry(context.Background(), "", step(failed, "a").JobID)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.get(run.ID); r.State != workflow.Running || step(r, "a").JobID != newID || step(r, "a").State != "active" {
		t.Fatalf("after the retry: %+v", r)
	}
	e.completeStep(run.ID, "a", `1`)
	e.completeStep(run.ID, "b", `2`)
	if r := e.get(run.ID); r.State != workflow.Completed {
		t.Fatalf("the retried run ended %s", r.State)
	}
}

// RetryStep retries exactly a failed step of a running or failed run: the
// run returns to running, the step follows a new job, its dependants run
// after it. Anything else is refused and changes nothing.
func TestRetryStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	run := e.submit(workflow.New("r").Job("a", "k", nil, own("a")).Job("b", "k", nil, own("b"), workflow.After("a")).
		Job("c", "k", nil, own("c"), workflow.After("b")))
	e.completeStep(run.ID, "a", `1`)
	// b is active: not failed, refused.
	if _, err := e.wf.RetryStep(ctx, "", run.ID, "b"); !errors.Is(err, workflow.ErrStepNotRetryable) {
		t.Fatalf("retry of an active step: %v", err)
	}
	if _, err := e.wf.RetryStep(ctx, "", run.ID, "nope"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("retry of no step: %v", err)
	}
	e.failStep(run.ID, "b")
	if r := e.get(run.ID); r.State != workflow.Failed {
		t.Fatalf("run %s after b failed", r.State)
	}
	// Another tenant does not see the run.
	if _, err := e.wf.RetryStep(ctx, "acme", run.ID, "b"); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("another tenant's retry: %v", err)
	}
	// A completed step is refused.
	if _, err := e.wf.RetryStep(ctx, "", run.ID, "a"); !errors.Is(err, workflow.ErrStepNotRetryable) {
		t.Fatalf("retry of a completed step: %v", err)
	}
	newID, err := e.wf.RetryStep(ctx, "", run.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	r := e.get(run.ID)
	if r.State != workflow.Running || step(r, "b").JobID != newID || step(r, "c").State != "waiting" {
		t.Fatalf("after the retry: %+v", r)
	}
	// The same failure twice: the step is active again, refused.
	if _, err := e.wf.RetryStep(ctx, "", run.ID, "b"); !errors.Is(err, workflow.ErrStepNotRetryable) {
		t.Fatalf("a second retry: %v", err)
	}
	e.completeStep(run.ID, "b", `2`)
	if j := e.completeStep(run.ID, "c", `3`); j.ID == 0 {
		t.Fatal("c did not run")
	}
	if r := e.get(run.ID); r.State != workflow.Completed {
		t.Fatalf("run ended %s", r.State)
	}

	// A failed step whose DLQ entry was purged cannot be retried.
	run2 := e.submit(workflow.New("r2").Job("x", "k", nil, own("x")))
	e.failStep(run2.ID, "x")
	if _, err := dlq.NewClient(e.st.Pool()).Purge(ctx, dlq.Filter{Queue: "step-x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.wf.RetryStep(ctx, "", run2.ID, "x"); !errors.Is(err, workflow.ErrStepNotRetryable) {
		t.Fatalf("retry after the purge: %v", err)
	}
	// A cancelled run's failed step is not retried.
	run3 := e.submit(workflow.New("r3").Job("y", "k", nil, own("y"), workflow.AllowFailure()).Job("z", "k", nil, own("z")))
	e.failStep(run3.ID, "y")
	if _, err := e.wf.Cancel(ctx, "", run3.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.wf.RetryStep(ctx, "", run3.ID, "y"); !errors.Is(err, workflow.ErrStepNotRetryable) {
		t.Fatalf("retry in a cancelled run: %v", err)
	}
}
