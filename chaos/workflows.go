package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// Workflow plans: what the harness does to a run, and so how it must end.
const (
	// planDAG: a 6-step DAG left alone. It completes.
	planDAG = "dag"
	// planReplay: x and w (allow_failure) fail into the DLQ at once and
	// are replayed while y, slow, still runs; z needs all three. x's
	// replay completes, w's fails again. z must wait for y and for both
	// replays, and see x's replay's result. It completes.
	planReplay = "replay"
	// planResume: a fails the run while b, slow, still runs; b's job is
	// cancelled in the failed run, then a's DLQ entry is replayed. The
	// run resumes, b runs again, c sees both results. It completes.
	planResume = "resume"
	// planCancel: q's job is cancelled while the run is running. The run
	// ends cancelled (completed, if the job finished before the cancel).
	planCancel = "cancel"
)

// scriptDeadline bounds how long the harness drives one scripted run.
const scriptDeadline = 2 * time.Minute

type trackedRun struct {
	id   int64
	plan string
	// want is the state the run must end in ("" for any final state);
	// for planCancel, cancelled is the job the harness cancelled.
	want      string
	cancelled int64
}

// auditSteps records every change of a workflow step's state or job, in
// the order the run's lock serializes them (seq), with the clock at the
// change: the checks replay each run's history from it, since a step's
// row keeps only its latest job's times.
func auditSteps(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		CREATE TABLE chaos_step_log (seq bigserial PRIMARY KEY, run_id bigint, name text, state text, job_id bigint,
			cancel_reason text, at timestamptz DEFAULT clock_timestamp());
		CREATE INDEX ON chaos_step_log (run_id, name, seq);
		CREATE FUNCTION chaos_step_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO chaos_step_log (run_id, name, state, job_id, cancel_reason)
			VALUES (NEW.run_id, NEW.name, NEW.state, NEW.job_id, NEW.cancel_reason);
			RETURN NULL;
		END $$;
		CREATE TRIGGER chaos_step_insert AFTER INSERT ON gaffer.workflow_steps FOR EACH ROW EXECUTE FUNCTION chaos_step_audit();
		CREATE TRIGGER chaos_step_update AFTER UPDATE ON gaffer.workflow_steps FOR EACH ROW
			WHEN (NEW.state IS DISTINCT FROM OLD.state OR NEW.job_id IS DISTINCT FROM OLD.job_id)
			EXECUTE FUNCTION chaos_step_audit();`); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) track(id int64, plan, want string) *trackedRun {
	r := &trackedRun{id: id, plan: plan, want: want}
	h.mu.Lock()
	h.runs = append(h.runs, r)
	h.mu.Unlock()
	return r
}

func work(ms int) map[string]any { return map[string]any{"ms": ms} }

// workflowLoad submits a 6-step DAG every WorkflowEvery.
func (h *harness) workflowLoad(ctx context.Context) {
	if h.o.Profile.WorkflowEvery == 0 {
		return
	}
	c := workflow.NewClient(h.pool)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.o.Profile.WorkflowEvery):
		}
		b := workflow.New("chaos").Job("a", "chaos.work", work(20), workflow.MaxAttempts(100))
		var mids []string
		for i := range 4 {
			n := fmt.Sprintf("b%d", i)
			mids = append(mids, n)
			b.Job(n, "chaos.work", work(50), workflow.After("a"), workflow.MaxAttempts(100))
		}
		b.Job("c", "chaos.work", work(20), workflow.After(mids...), workflow.MaxAttempts(100))
		if run, ok := h.submit(ctx, c, b); ok {
			h.track(run, planDAG, workflow.Completed)
		}
	}
}

func (h *harness) submit(ctx context.Context, c *workflow.Client, b *workflow.Builder) (int64, bool) {
	def, err := b.Definition()
	if err != nil {
		h.t.Errorf("workflow definition: %v", err)
		return 0, false
	}
	run, err := c.Submit(ctx, def)
	if err != nil {
		return 0, false // not accepted (PostgreSQL restarting): not tracked
	}
	return run.ID, true
}

// scriptedLoad submits a scripted run every ScriptedEvery, the plans in
// turn, and drives each (replays, cancels) until its script is done.
func (h *harness) scriptedLoad(ctx context.Context) {
	every := h.o.Profile.ScriptedEvery
	if every == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(h.o.Seed), 3))
	c := workflow.NewClient(h.pool)
	plans := []string{planReplay, planResume, planCancel}
	for i := rng.IntN(len(plans)); ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		slow := 2000 + rng.IntN(2001)
		var b *workflow.Builder
		switch plan := plans[i%len(plans)]; plan {
		case planReplay:
			b = workflow.New("chaos-replay").
				Job("x", "chaos.work", map[string]any{"ms": 20, "fail_first": true}, workflow.AllowFailure(), workflow.MaxAttempts(100)).
				Job("w", "chaos.work", map[string]any{"ms": 20, "fail": true}, workflow.AllowFailure(), workflow.MaxAttempts(100)).
				Job("y", "chaos.work", work(slow), workflow.MaxAttempts(100)).
				Job("z", "chaos.work", work(20), workflow.After("x", "w", "y"), workflow.MaxAttempts(100))
		case planResume:
			b = workflow.New("chaos-resume").
				Job("a", "chaos.work", map[string]any{"ms": 20, "fail_first": true}, workflow.MaxAttempts(100)).
				Job("b", "chaos.work", work(slow), workflow.MaxAttempts(100)).
				Job("c", "chaos.work", work(20), workflow.After("a", "b"), workflow.MaxAttempts(100))
		case planCancel:
			b = workflow.New("chaos-cancel").
				Job("p", "chaos.work", work(100), workflow.MaxAttempts(100)).
				Job("q", "chaos.work", work(slow), workflow.After("p"), workflow.MaxAttempts(100)).
				Job("r", "chaos.work", work(20), workflow.After("q"), workflow.MaxAttempts(100))
		}
		run, ok := h.submit(ctx, c, b)
		if !ok {
			continue
		}
		plan := plans[i%len(plans)]
		want := ""
		if plan == planReplay {
			want = workflow.Completed
		}
		tr := h.track(run, plan, want)
		h.scripts.Add(1)
		go func() {
			defer h.scripts.Done()
			h.drive(tr)
		}()
	}
}

// drive carries out a scripted run's plan: it polls the run and replays
// or cancels its steps as the plan says, retrying through faults, until
// the script is done or scriptDeadline passes (then the run must only end
// in some final state).
func (h *harness) drive(tr *trackedRun) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptDeadline)
	defer cancel()
	wf, jobs := workflow.NewClient(h.pool), job.NewClient(h.pool, nil)
	replayed := map[string]bool{}
	cancelled := false
	for ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
		r, err := wf.Get(ctx, "", tr.id)
		if err != nil {
			continue
		}
		switch tr.plan {
		case planReplay:
			if r.State != workflow.Running {
				return
			}
			for _, name := range []string{"x", "w"} {
				if s := stepOf(r, name); s.State == "failed" && !replayed[name] && h.replayStep(ctx, s.JobID) {
					replayed[name] = true
				}
			}
			if len(replayed) == 2 {
				return
			}
		case planResume:
			if r.State != workflow.Failed {
				if r.State != workflow.Running {
					h.logf("resume run %d ended %s before its replay", tr.id, r.State)
					return
				}
				continue
			}
			b := stepOf(r, "b")
			if b.State == "active" {
				if !cancelled {
					if _, err := jobs.Cancel(ctx, "", b.JobID); err == nil || errors.Is(err, job.ErrFinished) {
						cancelled = true
						h.count(&h.stepCancels)
					}
				}
				continue // wait for b's job to end
			}
			if h.replayStep(ctx, stepOf(r, "a").JobID) {
				h.setWant(tr, workflow.Completed)
				return
			}
		case planCancel:
			if r.State != workflow.Running {
				return
			}
			q := stepOf(r, "q")
			if q.State != "active" {
				continue
			}
			if _, err := jobs.Cancel(ctx, "", q.JobID); err == nil || errors.Is(err, job.ErrFinished) {
				h.mu.Lock()
				tr.cancelled = q.JobID
				h.mu.Unlock()
				h.count(&h.stepCancels)
				return
			}
		}
	}
	h.logf("gave up driving %s run %d after %s", tr.plan, tr.id, scriptDeadline)
}

func (h *harness) setWant(tr *trackedRun, want string) {
	h.mu.Lock()
	tr.want = want
	h.mu.Unlock()
}

func (h *harness) count(n *int) {
	h.mu.Lock()
	*n++
	h.mu.Unlock()
}

// replayStep replays the DLQ entry of a step's failed job; it reports
// whether the entry is now replayed (by this call or an earlier one whose
// answer was lost).
func (h *harness) replayStep(ctx context.Context, jobID int64) bool {
	c := dlq.NewClient(h.pool)
	entries, err := c.List(ctx, dlq.Filter{JobID: jobID})
	if err != nil || len(entries) != 1 {
		return false
	}
	if entries[0].ReplayedAt != nil {
		return true
	}
	_, err = c.Replay(ctx, "", entries[0].ID)
	if err == nil {
		h.count(&h.stepReplays)
	}
	return err == nil || errors.Is(err, dlq.ErrAlreadyReplayed)
}

func stepOf(r workflow.Run, name string) workflow.StepState {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return workflow.StepState{}
}

// checkWorkflows checks, from PostgreSQL and the step log:
//   - every run ended in a final state, the one its plan wants;
//   - no step started before each dependency was done (completed, or
//     failed with allow_failure) at that moment, by the step's history;
//   - a step's inputs hold each dependency's final result, for the
//     dependencies that did not change after the step started (a replay
//     after a dependent started re-runs the dependency alone, and the
//     dependent keeps its inputs: workflow/doc.go).
func (h *harness) checkWorkflows(ctx context.Context, r *Report, v func(string, ...any)) {
	t := h.t
	h.mu.Lock()
	runs := make([]trackedRun, len(h.runs))
	for i, tr := range h.runs {
		runs[i] = *tr
	}
	h.mu.Unlock()
	ids := make([]int64, len(runs))
	for i, tr := range runs {
		ids[i] = tr.id
	}
	states := map[int64]string{}
	rows, err := h.pool.Query(ctx, `SELECT id, state FROM gaffer.workflow_runs WHERE id = ANY($1)`, ids)
	if err != nil {
		t.Fatalf("workflow run states: %v", err)
	}
	for rows.Next() {
		var id int64
		var state string
		if err := rows.Scan(&id, &state); err != nil {
			t.Fatal(err)
		}
		states[id] = state
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var stuck, wrong []string
	r.ScriptedRuns = map[string]int{}
	for _, tr := range runs {
		r.ScriptedRuns[tr.plan]++
		got := states[tr.id]
		want := tr.want
		if tr.plan == planCancel && tr.cancelled != 0 {
			var js string
			if err := h.pool.QueryRow(ctx, `SELECT state FROM gaffer.jobs WHERE id = $1`, tr.cancelled).Scan(&js); err != nil {
				t.Fatalf("cancelled step's job: %v", err)
			}
			want = map[string]string{"cancelled": workflow.Cancelled, "completed": workflow.Completed}[js]
		}
		switch {
		case got != workflow.Completed && got != workflow.Failed && got != workflow.Cancelled:
			stuck = append(stuck, fmt.Sprintf("%s run %d %s: %s", tr.plan, tr.id, got, h.stepStates(ctx, tr.id)))
		case want != "" && got != want:
			wrong = append(wrong, fmt.Sprintf("%s run %d %s, want %s: %s", tr.plan, tr.id, got, want, h.stepStates(ctx, tr.id)))
		}
	}
	if len(stuck) > 0 {
		v("%d workflow runs did not end in a final state (e.g. %s)", len(stuck), strings.Join(stuck[:min(3, len(stuck))], "; "))
	}
	if len(wrong) > 0 {
		v("%d workflow runs ended in the wrong state (e.g. %s)", len(wrong), strings.Join(wrong[:min(3, len(wrong))], "; "))
	}

	// Every start of a step (its first job, a replay, a restart after a
	// resume), against its dependencies' states just before it.
	early, err := h.pool.Query(ctx, `
		SELECT st.run_id, st.name, st.job_id, string_agg(format('%s was %s', d.name, coalesce(prev.state, 'none')), ' and ' ORDER BY d.name), st.at
		FROM chaos_step_log st
		JOIN gaffer.workflow_steps s ON s.run_id = st.run_id AND s.name = st.name
		JOIN gaffer.workflow_steps d ON d.run_id = st.run_id AND d.name = ANY (s.depends_on)
		LEFT JOIN LATERAL (SELECT l.state FROM chaos_step_log l WHERE l.run_id = st.run_id AND l.name = d.name AND l.seq < st.seq
		                   ORDER BY l.seq DESC LIMIT 1) prev ON true
		WHERE st.state = 'active'
		  AND NOT coalesce(prev.state = 'completed' OR prev.state = 'failed' AND d.allow_failure, false)
		GROUP BY st.seq, st.run_id, st.name, st.job_id, st.at
		ORDER BY st.seq`)
	if err != nil {
		t.Fatalf("step starts: %v", err)
	}
	var starts []string
	for early.Next() {
		var run, jobID int64
		var step, deps string
		var at time.Time
		if err := early.Scan(&run, &step, &jobID, &deps, &at); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, fmt.Sprintf("run %d step %s started job %d at %s while %s",
			run, step, jobID, at.Format("15:04:05.000"), deps))
	}
	if err := early.Err(); err != nil {
		t.Fatal(err)
	}
	if len(starts) > 0 {
		v("%d workflow step starts came before a dependency was done (e.g. %s)", len(starts), strings.Join(starts[:min(3, len(starts))], "; "))
	}

	var checked, mismatched int
	var example string
	if err := h.pool.QueryRow(ctx, `
		WITH pairs AS (
			SELECT s.run_id, s.name, d.name AS dep, (coalesce(j.inputs, gaffer.step_inputs(j.workflow_run, j.step, j.inputs_from)) -> d.name)::jsonb AS got, coalesce(d.result::jsonb, 'null'::jsonb) AS want
			FROM gaffer.workflow_steps s
			JOIN gaffer.jobs j ON j.id = s.job_id
			JOIN gaffer.workflow_steps d ON d.run_id = s.run_id AND d.name = ANY (s.depends_on)
			WHERE d.state IN ('completed', 'failed')
			  AND (SELECT max(seq) FROM chaos_step_log WHERE run_id = d.run_id AND name = d.name)
			    < (SELECT max(seq) FROM chaos_step_log WHERE run_id = s.run_id AND name = s.name AND state = 'active' AND job_id = s.job_id))
		SELECT count(*), count(*) FILTER (WHERE got IS DISTINCT FROM want),
		       coalesce(min(format('run %s step %s got %s from %s, whose result is %s', run_id, name, coalesce(got::text, 'nothing'), dep, want))
		                FILTER (WHERE got IS DISTINCT FROM want), '')
		FROM pairs`).Scan(&checked, &mismatched, &example); err != nil {
		t.Fatalf("step inputs: %v", err)
	}
	if mismatched > 0 {
		v("%d of %d step inputs are not their dependency's final result (e.g. %s)", mismatched, checked, example)
	}
	r.InputsChecked = checked

	// That the scenarios happened: replays of allow_failure steps while a
	// dependent still waited, and steps whose job was cancelled brought
	// back by a resume.
	if err := h.pool.QueryRow(ctx, `
		SELECT count(*) FROM chaos_step_log a
		JOIN gaffer.workflow_steps s ON s.run_id = a.run_id AND s.name = a.name AND s.allow_failure
		WHERE a.state = 'active'
		  AND EXISTS (SELECT 1 FROM chaos_step_log f WHERE f.run_id = a.run_id AND f.name = a.name AND f.state = 'failed' AND f.seq < a.seq)
		  AND EXISTS (SELECT 1 FROM gaffer.workflow_steps z WHERE z.run_id = a.run_id AND a.name = ANY (z.depends_on)
		              AND (SELECT l.state FROM chaos_step_log l WHERE l.run_id = z.run_id AND l.name = z.name AND l.seq < a.seq
		                   ORDER BY l.seq DESC LIMIT 1) = 'waiting')`).Scan(&r.ReplaysBeforeDependent); err != nil {
		t.Fatalf("replays while a dependent waited: %v", err)
	}
	if err := h.pool.QueryRow(ctx, `
		SELECT count(*) FROM chaos_step_log w
		WHERE w.state = 'waiting'
		  AND (SELECT l.cancel_reason FROM chaos_step_log l WHERE l.run_id = w.run_id AND l.name = w.name AND l.seq < w.seq
		       ORDER BY l.seq DESC LIMIT 1) = 'job cancelled'`).Scan(&r.CancelledStepsResumed); err != nil {
		t.Fatalf("cancelled steps resumed: %v", err)
	}
}

// stepStates describes a run's steps for a violation: name, state, and
// the state of its job.
func (h *harness) stepStates(ctx context.Context, run int64) string {
	var s string
	h.pool.QueryRow(ctx, `
		SELECT string_agg(format('%s %s%s (job %s %s)', s.name, s.state, coalesce(' ' || s.cancel_reason, ''),
		                         coalesce(s.job_id::text, '-'), coalesce(j.state, '-')), ', ' ORDER BY s.name)
		FROM gaffer.workflow_steps s LEFT JOIN gaffer.jobs j ON j.id = s.job_id WHERE s.run_id = $1`, run).Scan(&s)
	return s
}
