package workflow_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

// A run's cancel racing its step's completion: both succeed. A completion
// locks the step's job row, then (in the trigger) the run's row; the
// cancel must not hold the run's row while it waits for the job's, or
// PostgreSQL breaks the deadlock by failing one of the two.
func TestCancelRacingStepCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	run := e.submit(workflow.New("race").
		Job("slow", "k", nil, own("slow")).
		Job("next", "k", nil, own("next"), workflow.After("slow"))).ID
	slow := e.claimStep(run, "slow")

	// The completion's transaction holds the job's row, as the completing
	// UPDATE does from the moment it writes the row until its trigger has
	// moved the run (the width of a batch of completions).
	tx, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM gaffer.jobs WHERE id = $1 FOR UPDATE`, slow.ID); err != nil {
		t.Fatal(err)
	}
	cancelled := make(chan error, 1)
	go func() {
		_, err := e.wf.Cancel(ctx, "", run)
		cancelled <- err
	}()
	for waiting := 0; waiting == 0; {
		if err := e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The cancel now waits for the job's row; the completion goes on.
	ok, err := e.st.CompleteJobs(ctx, tx, []store.Completion{{Lease: lease(slow), Result: json.RawMessage(`"done"`)}})
	if err != nil || len(ok) != 1 {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit the completion: %v", err)
	}
	if err := <-cancelled; err != nil {
		t.Fatalf("cancel: %v", err)
	}
	r := e.get(run)
	if r.State != workflow.Cancelled || step(r, "slow").State != "completed" || step(r, "next").State != "cancelled" || e.due("next") != 0 {
		t.Fatalf("run %s, steps %+v", r.State, r.Steps)
	}
}
