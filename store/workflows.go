package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlInsertWorkflowRun   = query("insert_workflow_run")
	sqlInsertWorkflowSteps = query("insert_workflow_steps")
	sqlStartWorkflow       = query("start_workflow")
	sqlGetWorkflowRun      = query("get_workflow_run")
	sqlListWorkflowRuns    = query("list_workflow_runs")
	sqlGetWorkflowSteps    = query("get_workflow_steps")
	sqlLockWorkflowRun     = query("lock_workflow_run")
	sqlLockWorkflowJobs    = query("lock_workflow_jobs")
	sqlCountUnlockedJobs   = query("count_unlocked_workflow_jobs")
	sqlCancelWorkflowRun   = query("cancel_workflow_run")
	sqlSignalWorkflowStep  = query("signal_workflow_step")
	sqlWorkflowStepState   = query("get_workflow_step_state")
)

// WorkflowStepParams is one validated step to create.
type WorkflowStepParams struct {
	Name         string
	Type         string // job, sleep, signal
	Kind         string
	Queue        string
	Args         json.RawMessage
	Priority     int
	MaxAttempts  int
	Timeout      time.Duration
	Wait         time.Duration // sleep length, or signal timeout
	DependsOn    []string
	AllowFailure bool
}

// WorkflowRun is a run's row.
type WorkflowRun struct {
	ID     int64
	Tenant string
	Name   string
	State  string
	Output json.RawMessage
	// OutputBytes is the size of an output GetWorkflowRun left out
	// (Output nil) to keep within its budget.
	OutputBytes int
	Error       string
	CreatedAt   time.Time
	FinishedAt  *time.Time
}

// WorkflowStep is a step's state, with its current job's attempt.
type WorkflowStep struct {
	Name         string
	Type         string
	Kind         string
	Queue        string
	DependsOn    []string
	AllowFailure bool
	State        string
	JobID        int64
	Attempt      int
	Result       json.RawMessage
	// ResultBytes is the size of a result GetWorkflowRun left out (Result
	// nil) to keep within its budget.
	ResultBytes  int
	Error        string
	StartedAt    *time.Time
	FinishedAt   *time.Time
	CancelReason string
}

// CreateWorkflowRun stores a run and its steps and starts the steps with
// no dependencies, in one transaction (a savepoint of q when q is the
// caller's). It returns the run's id.
func (s *Store) CreateWorkflowRun(ctx context.Context, q DB, tenant, name string, steps []WorkflowStepParams) (int64, error) {
	var id int64
	tx, err := s.begin(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("create workflow run: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	err = func() error {
		if err := tx.QueryRow(ctx, sqlInsertWorkflowRun, tenant, name).Scan(&id); err != nil {
			return err
		}
		n := len(steps)
		names, types, kinds, queues := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		args, deps := make([][]byte, n), make([][]byte, n)
		prio, attempts := make([]int16, n), make([]int32, n)
		timeouts, waits := make([]int64, n), make([]int64, n)
		allow := make([]bool, n)
		for i, st := range steps {
			names[i], types[i], kinds[i], queues[i], args[i] = st.Name, st.Type, st.Kind, st.Queue, st.Args
			prio[i], attempts[i], timeouts[i], waits[i] = int16(st.Priority), int32(st.MaxAttempts), st.Timeout.Milliseconds(), st.Wait.Milliseconds()
			d := st.DependsOn
			if d == nil {
				d = []string{}
			}
			deps[i], _ = json.Marshal(d)
			allow[i] = st.AllowFailure
		}
		if _, err := tx.Exec(ctx, sqlInsertWorkflowSteps, id, names, types, kinds, queues, args, prio, attempts, timeouts, waits, deps, allow); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sqlStartWorkflow, id)
		return err
	}()
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("create workflow run: %w", err)
	}
	return id, nil
}

func scanWorkflowRun(row pgx.Row) (WorkflowRun, error) {
	var r WorkflowRun
	err := row.Scan(&r.ID, &r.Tenant, &r.Name, &r.State, &r.Output, &r.Error, &r.CreatedAt, &r.FinishedAt)
	return r, err
}

// GetWorkflowRun returns a run and its steps; tenant, when not empty,
// scopes the lookup. q is a transaction to read in, or nil. With
// maxResultBytes (0: no bound) the run's output and the steps' results
// kept take at most that many bytes: past it the output or a step's
// result is left out, its size in OutputBytes or ResultBytes. Errors: ErrNotFound.
func (s *Store) GetWorkflowRun(ctx context.Context, q DB, tenant string, id int64, maxResultBytes int) (WorkflowRun, []WorkflowStep, error) {
	r, err := scanWorkflowRun(s.db(q).QueryRow(ctx, sqlGetWorkflowRun, id, nullString(tenant)))
	if err != nil {
		return r, nil, notFound(err)
	}
	used := 0
	if maxResultBytes > 0 && r.Output != nil {
		// The output is the last steps' results: it counts first.
		if len(r.Output) > maxResultBytes {
			r.OutputBytes, r.Output = len(r.Output), nil
		} else {
			used = len(r.Output)
		}
	}
	rows, err := s.db(q).Query(ctx, sqlGetWorkflowSteps, id)
	if err != nil {
		return r, nil, fmt.Errorf("workflow steps: %w", err)
	}
	defer rows.Close()
	var steps []WorkflowStep
	for rows.Next() {
		var st WorkflowStep
		if err := rows.Scan(&st.Name, &st.Type, &st.Kind, &st.Queue, &st.DependsOn, &st.AllowFailure, &st.State, &st.JobID,
			&st.Attempt, &st.Result, &st.Error, &st.StartedAt, &st.FinishedAt, &st.CancelReason); err != nil {
			return r, nil, err
		}
		if maxResultBytes > 0 && st.Result != nil {
			// Each row's result is dropped as it is read once the results
			// kept would pass the budget: 1,000 steps of 1 MiB results are
			// a gigabyte.
			if used+len(st.Result) > maxResultBytes {
				st.ResultBytes, st.Result = len(st.Result), nil
			} else {
				used += len(st.Result)
			}
		}
		steps = append(steps, st)
	}
	return r, steps, rows.Err()
}

// ListWorkflowRuns lists runs newest first.
func (s *Store) ListWorkflowRuns(ctx context.Context, tenant, state string, beforeID int64, limit int) ([]WorkflowRun, error) {
	runs, _, err := s.ListWorkflowRunsPage(ctx, tenant, state, beforeID, limit, 0)
	return runs, err
}

// ListWorkflowRunsPage is ListWorkflowRuns reading no further once the
// runs read take maxBytes (their outputs and names; 0: no bound), the
// run that crosses it included; more says runs may follow.
func (s *Store) ListWorkflowRunsPage(ctx context.Context, tenant, state string, beforeID int64, limit, maxBytes int) (runs []WorkflowRun, more bool, _ error) {
	var before *int64
	if beforeID > 0 {
		before = &beforeID
	}
	limit = clampLimit(limit)
	rows, err := s.pool.Query(ctx, sqlListWorkflowRuns, nullString(tenant), nullString(state), before, limit)
	if err != nil {
		return nil, false, fmt.Errorf("list workflow runs: %w", err)
	}
	defer rows.Close()
	b := budget{max: maxBytes}
	for rows.Next() {
		r, err := scanWorkflowRun(rows)
		if err != nil {
			return nil, false, err
		}
		runs = append(runs, r)
		if b.spent(rowOverheadBytes + len(r.Output) + len(r.Name) + len(r.Tenant) + len(r.Error)) {
			return runs, true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list workflow runs: %w", err)
	}
	return runs, len(runs) == limit, nil
}

// ErrRunFinished: the run already completed, failed or was cancelled.
var ErrRunFinished = errors.New("workflow run already finished")

// CancelWorkflowRun cancels a running run: waiting steps are cancelled,
// active steps' jobs are cancelled or told to stop. Errors: ErrNotFound,
// ErrRunFinished.
func (s *Store) CancelWorkflowRun(ctx context.Context, tenant string, id int64) error {
	for {
		err := pgx.BeginTxFunc(ctx, s.pool, guarded, func(tx pgx.Tx) error { return s.cancelWorkflowRun(ctx, tx, tenant, id) })
		// A step started between the two locks: start over. Each time means
		// the run moved on, and a run has finitely many steps to start.
		if !errors.Is(err, errRunMoved) {
			return err
		}
	}
}

// errRunMoved: a step of the run started after its jobs were locked.
var errRunMoved = errors.New("workflow run moved on while it was being locked")

// cancelWorkflowRun locks the jobs of the run's active steps and then the
// run — the order in which a statement finishing a step's job takes them,
// its trigger locking the run after the job. Locking the run first and
// then waiting for a job that such a statement holds would deadlock.
func (s *Store) cancelWorkflowRun(ctx context.Context, tx pgx.Tx, tenant string, id int64) error {
	rows, err := tx.Query(ctx, sqlLockWorkflowJobs, id, nullString(tenant))
	locked, err := collectIDs(rows, err)
	if err != nil {
		return fmt.Errorf("lock workflow jobs: %w", err)
	}
	var state string
	if err := tx.QueryRow(ctx, sqlLockWorkflowRun, id, nullString(tenant)).Scan(&state); err != nil {
		return notFound(err)
	}
	if state != "running" {
		return ErrRunFinished
	}
	var unlocked int64
	if err := tx.QueryRow(ctx, sqlCountUnlockedJobs, id, locked).Scan(&unlocked); err != nil {
		return fmt.Errorf("check workflow jobs: %w", err)
	}
	if unlocked > 0 {
		return errRunMoved
	}
	var waiting, jobs, told int64
	return tx.QueryRow(ctx, sqlCancelWorkflowRun, id).Scan(&waiting, &jobs, &told)
}

// Errors of SignalWorkflowStep.
var (
	ErrNotSignalStep = errors.New("not a signal step")
	ErrNotWaiting    = errors.New("the step is not waiting for a signal")
)

// SignalWorkflowStep delivers payload to a waiting signal step: its timer
// job completes with payload as the result, in the statement that moves
// the run on. Errors: ErrNotFound, ErrNotSignalStep, ErrNotWaiting.
func (s *Store) SignalWorkflowStep(ctx context.Context, tenant string, run int64, step string, payload json.RawMessage) error {
	var id int64
	err := s.pool.QueryRow(ctx, sqlSignalWorkflowStep, run, step, nullString(tenant), []byte(payload)).Scan(&id)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("signal step %q: %w", step, err)
	}
	var typ, state string
	if err := s.pool.QueryRow(ctx, sqlWorkflowStepState, run, step, nullString(tenant)).Scan(&typ, &state); err != nil {
		return notFound(err)
	}
	if typ != "signal" {
		return ErrNotSignalStep
	}
	return fmt.Errorf("%w (it is %s)", ErrNotWaiting, state)
}

var sqlDeleteFinishedRuns = query("delete_finished_workflow_runs")

// DeleteFinishedWorkflowRuns deletes up to limit runs (with their steps)
// that finished more than age ago, oldest first, except those a step's
// unfinished job or a pending DLQ replay may still change; see the query.
// q is the leader's fenced transaction, or nil for the pool.
func (s *Store) DeleteFinishedWorkflowRuns(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteFinishedRuns, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete finished workflow runs: %w", err)
	}
	return tag.RowsAffected(), nil
}
