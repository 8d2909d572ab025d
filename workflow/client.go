package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Run states.
const (
	Running   = "running"
	Completed = "completed"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// RunStates are every run state, running first.
var RunStates = []string{Running, Completed, Failed, Cancelled}

// Run is a workflow run and its steps.
type Run struct {
	ID     int64           `json:"id"`
	Tenant string          `json:"tenant"`
	Name   string          `json:"name"`
	State  string          `json:"state"`
	Output json.RawMessage `json:"output,omitempty"`
	// OutputOmitted: the output (the results of the steps nothing
	// depends on) was left out of this answer to keep it within its byte
	// budget (GetBounded); OutputBytes is its size. Each step's job
	// carries its result.
	OutputOmitted bool        `json:"output_omitted,omitempty"`
	OutputBytes   int         `json:"output_bytes,omitempty"`
	Error         string      `json:"error,omitempty"`
	CreatedAt     time.Time   `json:"created_at"`
	FinishedAt    *time.Time  `json:"finished_at,omitempty"`
	Steps         []StepState `json:"steps,omitempty"`
}

// StepState is a step as it stands: waiting, active (its job exists),
// completed, failed or cancelled.
type StepState struct {
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Kind         string          `json:"kind"`
	Queue        string          `json:"queue"`
	DependsOn    []string        `json:"depends_on"`
	AllowFailure bool            `json:"allow_failure"`
	State        string          `json:"state"`
	JobID        int64           `json:"job_id,omitempty"`
	Attempt      int             `json:"attempt"`
	Result       json.RawMessage `json:"result,omitempty"`
	// ResultOmitted: the step's result was left out of this answer to
	// keep it within its byte budget (GetBounded); ResultBytes is its
	// size. The step's job (GET /v1/jobs/{job_id}) carries it.
	ResultOmitted bool       `json:"result_omitted,omitempty"`
	ResultBytes   int        `json:"result_bytes,omitempty"`
	Error         string     `json:"error,omitempty"`
	CancelReason  string     `json:"cancel_reason,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
}

// Errors.
var (
	ErrNotFound      = errors.New("workflow run not found")
	ErrFinished      = errors.New("workflow run already finished")
	ErrNotSignalStep = errors.New("not a signal step")
	ErrNotWaiting    = errors.New("the step is not waiting for a signal")
)

// Client submits and manages workflow runs. It needs only PostgreSQL.
type Client struct {
	store *store.Store
	kinds *job.Registry // nil: no kind-specific checks
}

// WithKinds returns a client that also checks each step's job with the
// Check its kind has in r (see job.KindOptions.Check).
func (c *Client) WithKinds(r *job.Registry) *Client {
	cp := *c
	cp.kinds = r
	return &cp
}

// NewClient returns a client on st.
func NewClient(pool *pgxpool.Pool) *Client { return &Client{store: store.New(pool)} }

// Submit validates def and starts a run: its steps without dependencies
// are enqueued in the same transaction. Errors: *job.ValidationError
// naming the field.
func (c *Client) Submit(ctx context.Context, def Definition) (Run, error) {
	return c.submit(ctx, nil, def)
}

// SubmitTx submits def within the caller's transaction: the run exists,
// and its first steps are enqueued, if and only if tx commits. The Run
// returned is read in tx.
func (c *Client) SubmitTx(ctx context.Context, tx pgx.Tx, def Definition) (Run, error) {
	if tx == nil {
		return Run{}, errors.New("submit: nil transaction")
	}
	return c.submit(ctx, tx, def)
}

func (c *Client) submit(ctx context.Context, tx pgx.Tx, def Definition) (Run, error) {
	var q store.DB
	if tx != nil {
		q = tx
	}
	steps, err := def.steps(c.kinds)
	if err != nil {
		return Run{}, err
	}
	tenant := def.Tenant
	if tenant == "" {
		tenant = job.DefaultTenant
	}
	if err := job.ValidateName("tenant", tenant); err != nil {
		return Run{}, err
	}
	id, err := c.store.CreateWorkflowRun(ctx, q, tenant, def.Name, steps)
	if err != nil {
		return Run{}, err
	}
	return c.get(ctx, q, tenant, id, 0)
}

// Get returns a run with its steps; tenant, when not empty, must own it.
func (c *Client) Get(ctx context.Context, tenant string, id int64) (Run, error) {
	return c.get(ctx, nil, tenant, id, 0)
}

// GetBounded is Get holding at most maxResultBytes of the run's output
// and the steps' results: an output past it comes out, marked
// OutputOmitted with its size, and so do the results of the steps past
// it (in the run's step order), marked ResultOmitted.
func (c *Client) GetBounded(ctx context.Context, tenant string, id int64, maxResultBytes int) (Run, error) {
	return c.get(ctx, nil, tenant, id, maxResultBytes)
}

func (c *Client) get(ctx context.Context, q store.DB, tenant string, id int64, maxResultBytes int) (Run, error) {
	r, steps, err := c.store.GetWorkflowRun(ctx, q, tenant, id, maxResultBytes)
	if errors.Is(err, store.ErrNotFound) {
		return Run{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Run{}, err
	}
	run := fromRow(r)
	run.Steps = make([]StepState, len(steps))
	for i, s := range steps {
		run.Steps[i] = StepState{Name: s.Name, Type: s.Type, Kind: s.Kind, Queue: s.Queue, DependsOn: s.DependsOn,
			AllowFailure: s.AllowFailure, State: s.State, JobID: s.JobID, Attempt: s.Attempt, Result: s.Result,
			ResultOmitted: s.ResultBytes > 0, ResultBytes: s.ResultBytes, Error: s.Error, CancelReason: s.CancelReason, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt}
		if run.Steps[i].DependsOn == nil {
			run.Steps[i].DependsOn = []string{}
		}
	}
	return run, nil
}

// List returns runs newest first, without their steps.
func (c *Client) List(ctx context.Context, tenant, state string, beforeID int64, limit int) ([]Run, error) {
	runs, _, err := c.ListPage(ctx, tenant, state, beforeID, limit, 0)
	return runs, err
}

// ListPage is List reading no further once the runs read take about
// maxBytes (0: no bound; the run that crosses it is the last), saying
// also whether runs may follow: the next page is the runs before the
// last one returned.
func (c *Client) ListPage(ctx context.Context, tenant, state string, beforeID int64, limit, maxBytes int) (runs []Run, more bool, _ error) {
	if state != "" && !slices.Contains(RunStates, state) {
		return nil, false, &job.ValidationError{Field: "state", Message: fmt.Sprintf("must be one of %s; got %q", strings.Join(RunStates, ", "), state)}
	}
	rows, more, err := c.store.ListWorkflowRunsPage(ctx, tenant, state, beforeID, limit, maxBytes)
	if err != nil {
		return nil, false, err
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, more, nil
}

// Cancel cancels a running run: steps not started are cancelled, running
// steps' handlers have their contexts cancelled. Errors: ErrNotFound,
// ErrFinished.
func (c *Client) Cancel(ctx context.Context, tenant string, id int64) (Run, error) {
	err := c.store.CancelWorkflowRun(ctx, tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Run{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	case errors.Is(err, store.ErrRunFinished):
		return Run{}, ErrFinished
	case err != nil:
		return Run{}, err
	}
	return c.Get(ctx, tenant, id)
}

// Signal delivers payload (JSON; nil means null) to a signal step that is
// waiting: it completes with payload as its result, and the run goes on.
// Errors: ErrNotFound, ErrNotSignalStep, ErrNotWaiting (not started yet,
// already signalled, or timed out).
func (c *Client) Signal(ctx context.Context, tenant string, id int64, step string, payload json.RawMessage) error {
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	if err := job.CheckPayload("payload", payload); err != nil {
		return err
	}
	err := c.store.SignalWorkflowStep(ctx, tenant, id, step, payload)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: run %d has no step %q", ErrNotFound, id, step)
	case errors.Is(err, store.ErrNotSignalStep):
		return fmt.Errorf("%w: %q", ErrNotSignalStep, step)
	case errors.Is(err, store.ErrNotWaiting):
		return fmt.Errorf("%w: %v", ErrNotWaiting, err)
	}
	return err
}

func fromRow(r store.WorkflowRun) Run {
	return Run{ID: r.ID, Tenant: r.Tenant, Name: r.Name, State: r.State, Output: r.Output, OutputOmitted: r.OutputBytes > 0, OutputBytes: r.OutputBytes, Error: r.Error,
		CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt}
}

// RegisterBuiltins adds the kinds behind sleep and signal steps to r.
// Every node that works the queues of such steps needs them; gaffer.Node
// registers them itself.
func RegisterBuiltins(r *job.Registry) {
	r.HandleFunc(KindSleep, func(ctx context.Context, j *job.Job) error { return nil })
	r.HandleFunc(KindSignal, func(ctx context.Context, j *job.Job) error {
		return job.Permanent(errors.New("no signal arrived before the step's timeout"))
	})
}
