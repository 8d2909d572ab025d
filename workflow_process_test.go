package gaffer_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/workflow"
)

// A node killed with SIGKILL mid-workflow: the run completes, no step is
// lost, none is started twice, and no step's job has two accepted
// completions.
func TestWorkflowSurvivesNodeKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newClusterEnv(t, 2*time.Second)
	e.node("node-1", "GAFFER_TEST_CONCURRENCY=5")
	e.waitLeader("node-1")
	victim := e.node("node-2", "GAFFER_TEST_CONCURRENCY=5")
	e.node("node-3", "GAFFER_TEST_CONCURRENCY=5")

	b := workflow.New("survivor").Job("start", "work", map[string]int{"ms": 10})
	var parts []string
	for i := range 30 { // a step joins at most 32 results (workflow.MaxStepInputBytes)
		name := fmt.Sprintf("part-%02d", i)
		parts = append(parts, name)
		b.Job(name, "work", map[string]int{"ms": 1500}, workflow.After("start"))
	}
	b.Job("join", "work", map[string]int{"ms": 10}, workflow.After(parts...))
	def, err := b.Definition()
	if err != nil {
		t.Fatal(err)
	}
	run, err := workflow.NewClient(e.pool).Submit(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	// Kill node-2 while a 1.5 s part it started less than a second ago is
	// running (not "start", which takes 10 ms and may finish before the
	// signal). The parts are long so that a loaded machine's late polls
	// still find one of the two waves of parts (15 slots, 30 parts) young
	// enough.
	waitUntil(t, 20*time.Second, "node-2 to start a part", func() bool {
		return scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE workflow_run = $1 AND node = 'node-2' AND state = 'running'
			AND step LIKE 'part-%' AND attempted_at > clock_timestamp() - interval '1 second'`, run.ID) > 0
	})
	victim.Signal(syscall.SIGKILL)
	waitUntil(t, 60*time.Second, "the run to complete", func() bool {
		return scalar[string](t, e.pool, `SELECT state FROM gaffer.workflow_runs WHERE id = $1`, run.ID) == "completed"
	})
	steps := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.workflow_steps WHERE run_id = $1 AND state = 'completed'`, run.ID)
	jobs := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE workflow_run = $1`, run.ID)
	twice := scalar[int](t, e.pool, `SELECT count(*) FROM (SELECT c.job_id FROM test_completions c JOIN gaffer.jobs j ON j.id = c.job_id
		WHERE j.workflow_run = $1 GROUP BY c.job_id HAVING count(*) > 1) d`, run.ID)
	rerun := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE workflow_run = $1 AND attempt > 1`, run.ID)
	t.Logf("32 steps: %d completed, %d jobs, %d re-run after the kill, %d completed twice", steps, jobs, rerun, twice)
	if steps != 32 || jobs != 32 || twice != 0 {
		t.Fatal("want 32 completed steps, 32 jobs (no step started twice), none completed twice")
	}
	if rerun == 0 {
		t.Fatal("no step was re-run: the kill did not land mid-step")
	}
	var joined int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM json_object_keys((SELECT gaffer.step_inputs(workflow_run, step, inputs_from) FROM gaffer.jobs WHERE workflow_run = $1 AND step = 'join'))`, run.ID).Scan(&joined)
	if joined != 30 {
		t.Fatalf("join saw %d inputs, want 30", joined)
	}
}
