package workflow_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// A replayed step is one dependency, counted once, however often it is
// replayed and however each replay ends: its dependent waits for the
// dependencies that have not run, and sees the replay's result.
func TestReplayedDependencyCountsOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		replay string
		want   string // z's inputs
	}{
		{"completes", `{"x":"x2","y":"y"}`},
		{"fails again", `{"x":null,"y":"y"}`},
	} {
		t.Run("replay "+c.replay, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			run := e.submit(workflow.New("once").
				Job("x", "k", nil, own("x"), workflow.AllowFailure()).
				Job("y", "k", nil, own("y")).
				Job("z", "k", nil, own("z"), workflow.After("x", "y"))).ID
			e.failStep(run, "x") // allowed: the run goes on, z waits for y
			e.replayStep(run, "x")
			if c.replay == "completes" {
				e.completeStep(run, "x", `"x2"`)
			} else {
				e.failStep(run, "x")
			}
			if z := step(e.get(run), "z"); z.State != "waiting" || e.due("z") != 0 {
				t.Fatalf("z started while y's job was still pending: %+v", z)
			}
			e.completeStep(run, "y", `"y"`)
			if got := e.completeStep(run, "z", `"z"`).Inputs; string(got) != c.want {
				t.Fatalf("z's inputs %s, want %s", got, c.want)
			}
			if done := e.get(run); done.State != workflow.Completed || string(done.Output) != `{"z":"z"}` {
				t.Fatalf("run %s, output %s", done.State, done.Output)
			}
		})
	}
}

// A replay of a step whose dependent already started re-runs the step
// alone: the dependent keeps the inputs it started with, and the run
// completes once the replay has finished too.
func TestReplayAfterDependentStartedRerunsTheStepAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.submit(workflow.New("late").
		Job("x", "k", nil, own("x"), workflow.AllowFailure()).
		Job("y", "k", nil, own("y")).
		Job("z", "k", nil, own("z"), workflow.After("x", "y"))).ID
	e.failStep(run, "x")
	e.completeStep(run, "y", `"y"`)
	zJob := step(e.get(run), "z").JobID
	e.replayStep(run, "x")
	z := e.completeStep(run, "z", `"z"`)
	if z.ID != zJob || string(z.Inputs) != `{"x":null,"y":"y"}` {
		t.Fatalf("z ran job %d (started as %d) with inputs %s", z.ID, zJob, z.Inputs)
	}
	if r := e.get(run); r.State != workflow.Running || step(r, "x").State != "active" {
		t.Fatalf("run %s with x %+v while x's replay is pending", r.State, step(r, "x"))
	}
	e.completeStep(run, "x", `"x2"`)
	done := e.get(run)
	if done.State != workflow.Completed || string(done.Output) != `{"z":"z"}` || string(step(done, "x").Result) != `"x2"` {
		t.Fatalf("run %s, output %s, x %+v", done.State, done.Output, step(done, "x"))
	}
}

// A run resumed by a replay brings back every step cancelled while it was
// failed, the job of one that had already started included: the run
// finishes, with each step's result reaching its dependents.
func TestResumedRunRestartsStepsCancelledWhileFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	run := e.submit(workflow.New("resume").
		Job("a", "k", nil, own("a")).
		Job("b", "k", nil, own("b")).
		Job("c", "k", nil, own("c"), workflow.After("a", "b"))).ID
	e.failStep(run, "a")
	failed := e.get(run)
	if failed.State != workflow.Failed || step(failed, "c").CancelReason != "run_failed" || step(failed, "b").State != "active" {
		t.Fatalf("run %s, steps %+v", failed.State, failed.Steps)
	}
	// b's job, pending in a failed run, is cancelled: b ends cancelled
	// and leaves no DLQ entry to replay.
	if state, err := job.NewClient(e.st.Pool(), nil).Cancel(ctx, "", step(failed, "b").JobID); err != nil || state != job.Cancelled {
		t.Fatalf("cancel b's job: %s %v", state, err)
	}
	if b := step(e.get(run), "b"); b.State != "cancelled" {
		t.Fatalf("b %+v", b)
	}
	e.replayStep(run, "a")
	e.completeStep(run, "a", `"A"`)
	e.completeStep(run, "b", `"B"`)
	if got := e.completeStep(run, "c", `"C"`).Inputs; string(got) != `{"a":"A","b":"B"}` {
		t.Fatalf("c's inputs %s", got)
	}
	if done := e.get(run); done.State != workflow.Completed || string(done.Output) != `{"c":"C"}` {
		t.Fatalf("run %s, output %s, steps %+v", done.State, done.Output, done.Steps)
	}
}

// A replayed signal step waits for its signal again, for its whole
// timeout, instead of being due (and failing) at once.
func TestReplayedSignalStepWaitsForItsSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	run := e.submit(workflow.New("approve").
		WaitSignal("approval", time.Hour, own("approval")).
		Job("after", "k", nil, own("after"), workflow.After("approval"))).ID
	// The hour passes with no signal: the timer job is due and fails, as
	// the built-in handler fails it.
	if _, err := e.st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET run_at = now() WHERE id = $1`, step(e.get(run), "approval").JobID); err != nil {
		t.Fatal(err)
	}
	e.failStep(run, "approval")
	if r := e.get(run); r.State != workflow.Failed {
		t.Fatalf("run %s", r.State)
	}
	replayed := e.replayStep(run, "approval")
	var wait time.Duration
	if err := e.st.Pool().QueryRow(ctx, `SELECT extract(epoch FROM run_at - now()) * interval '1 second' FROM gaffer.jobs WHERE id = $1`,
		replayed).Scan(&wait); err != nil {
		t.Fatal(err)
	}
	if e.due("approval") != 0 || wait < 59*time.Minute {
		t.Fatalf("the replayed signal step's job is due in %s: it would fail without waiting for a signal", wait)
	}
	if err := e.wf.Signal(ctx, "", run, "approval", json.RawMessage(`{"by":"ada"}`)); err != nil {
		t.Fatal(err)
	}
	if got := e.completeStep(run, "after", `"done"`).Inputs; string(got) != `{"approval":{"by":"ada"}}` {
		t.Fatalf("after's inputs %s", got)
	}
	if r := e.get(run); r.State != workflow.Completed {
		t.Fatalf("run %s", r.State)
	}
}
