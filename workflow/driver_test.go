package workflow_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

// Tests that need one exact interleaving run no worker: each step's job is
// alone in its own queue (own), and the test claims, completes, fails and
// replays it through the store, in the order it chooses.

// own puts a step's job alone in queue "step-<name>".
func own(name string) workflow.StepOption { return workflow.Queue("step-" + name) }

var tokens atomic.Int64

// claimStep claims the due job of a step put in its own queue; the test
// fails, showing the run, if there is none. It claims twice if need be,
// as a node's claim loop does: a job whose run_at came while it waited in
// the scheduled index is made due by a claim, for the next one, which
// that claim's notification wakes.
func (e *env) claimStep(run int64, name string) store.Job {
	e.t.Helper()
	var jobs []store.Job
	for range 2 {
		var err error
		jobs, err = e.st.ClaimJobs(context.Background(), store.ClaimParams{Queue: "step-" + name, Limit: 1,
			Token: tokens.Add(1), LeaseTTL: time.Minute, Node: "test"})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(jobs) > 0 {
			break
		}
	}
	if len(jobs) != 1 {
		b, _ := json.MarshalIndent(e.get(run), "", " ")
		e.t.Fatalf("step %s has no job due:\n%s", name, b)
	}
	return jobs[0]
}

// due counts the jobs of a step (in its own queue) that a worker could
// claim now.
func (e *env) due(name string) int {
	e.t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM gaffer.jobs WHERE queue = $1 AND state IN ('pending', 'retrying') AND run_at <= now()`,
		"step-"+name).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// completeStep runs a step's job to completion with result (JSON) and
// returns the job as its handler saw it.
func (e *env) completeStep(run int64, name, result string) store.Job {
	e.t.Helper()
	j := e.claimStep(run, name)
	ok, err := e.st.CompleteJobs(context.Background(), nil, []store.Completion{{Lease: lease(j), Result: json.RawMessage(result)}})
	if err != nil || len(ok) != 1 {
		e.t.Fatalf("complete %s: %v %v", name, ok, err)
	}
	return j
}

// failStep fails a step's job for good: it goes to the DLQ.
func (e *env) failStep(run int64, name string) {
	e.t.Helper()
	j := e.claimStep(run, name)
	state, err := e.st.FailJob(context.Background(), store.Failure{Lease: lease(j), Permanent: true, Message: "boom", Kind: "error"})
	if err != nil || state != "failed" {
		e.t.Fatalf("fail %s: %s %v", name, state, err)
	}
}

// replayStep replays the step's unreplayed DLQ entry and returns the new
// job's id.
func (e *env) replayStep(run int64, name string) int64 {
	e.t.Helper()
	var id int64
	if err := e.st.Pool().QueryRow(context.Background(),
		`SELECT id FROM gaffer.dlq WHERE workflow_run = $1 AND step = $2 AND replayed_at IS NULL`, run, name).Scan(&id); err != nil {
		e.t.Fatalf("DLQ entry of %s: %v", name, err)
	}
	r, err := dlq.NewClient(e.st.Pool()).Replay(context.Background(), "", id)
	if err != nil {
		e.t.Fatalf("replay %s: %v", name, err)
	}
	return r.JobID
}

func (e *env) get(run int64) workflow.Run {
	e.t.Helper()
	r, err := e.wf.Get(context.Background(), "", run)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func lease(j store.Job) store.Lease {
	return store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}
}
