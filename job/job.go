package job

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// State is where a job is in its life. See the package documentation for
// the transitions.
type State string

// Job states.
const (
	// Pending: waiting for its run_at or for a worker.
	Pending State = "pending"
	// Held: a sequence's job waiting for the jobs enqueued into the
	// sequence before it to end; then it becomes pending.
	Held State = "held"
	// Running: claimed by an attempt that holds a lease.
	Running State = "running"
	// Retrying: an attempt failed; waiting out the backoff.
	Retrying State = "retrying"
	// Completed: an attempt succeeded. Final.
	Completed State = "completed"
	// Failed: attempts exhausted or a permanent error; the job has a DLQ
	// entry. Final.
	Failed State = "failed"
	// Cancelled: cancelled before or while running. Final.
	Cancelled State = "cancelled"
)

// Finished reports whether s is final.
func (s State) Finished() bool { return s == Completed || s == Failed || s == Cancelled }

// States are every job state, in life-cycle order.
var States = []State{Pending, Held, Running, Retrying, Completed, Failed, Cancelled}

// Valid reports whether s is one of the job states.
func (s State) Valid() bool { return slices.Contains(States, s) }

// stateNames is "pending, running, …", for error messages.
func stateNames() string {
	names := make([]string, len(States))
	for i, s := range States {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// AttemptError records why one attempt did not succeed.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
	// Kind is "error", "panic", "timeout", "unknown_kind", "lost" (the
	// lease expired or the node died), "released" (the node stopped),
	// "cancelled", "destination_blocked" (the handler refused to call a
	// destination the operator has not allowed; see DestinationBlocked),
	// or "omitted": the history keeps the first 3 and the latest attempts
	// (20 entries in all) and this entry counts the attempts dropped
	// between them (Omitted).
	Kind  string `json:"kind"`
	Node  string `json:"node,omitempty"`
	Stack string `json:"stack,omitempty"`
	// Omitted is how many attempts' errors an "omitted" entry stands for;
	// its Attempt and At are those of the last one omitted.
	Omitted int `json:"omitted,omitempty"`
}

// Job is a job as stored. Handlers receive the running attempt's job.
type Job struct {
	ID          int64  `json:"id"`
	Tenant      string `json:"tenant"`
	Kind        string `json:"kind"`
	Queue       string `json:"queue"`
	State       State  `json:"state"`
	Priority    int    `json:"priority"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	// UncountedAttempts are the attempts that did not count against
	// MaxAttempts: snoozes and releases, each of which raised MaxAttempts
	// by one. CountedAttempt and AttemptBudget are what people are shown.
	UncountedAttempts int           `json:"uncounted_attempts,omitempty"`
	Timeout           time.Duration `json:"-"`
	RunAt             time.Time     `json:"run_at"`
	CreatedAt         time.Time     `json:"created_at"`
	AttemptedAt       *time.Time    `json:"attempted_at,omitempty"`
	FinalizedAt       *time.Time    `json:"finalized_at,omitempty"`
	// Node is the node or remote worker running the job, or that ran
	// its final attempt; none while it waits (pending, retrying: an
	// earlier attempt's node is in its errors).
	Node      string          `json:"node,omitempty"`
	UniqueKey string          `json:"unique_key,omitempty"`
	ReplayOf  int64           `json:"replay_of,omitempty"`
	Args      json.RawMessage `json:"args"`
	Result    json.RawMessage `json:"result,omitempty"`
	Errors    []AttemptError  `json:"errors"`
	// CancelRequested is set once cancellation was asked for.
	CancelRequested bool `json:"cancel_requested"`
	// CronEntry and CronAt name the cron occurrence that made the job.
	CronEntry string     `json:"cron_entry,omitempty"`
	CronAt    *time.Time `json:"cron_at,omitempty"`
	// WorkflowRun and Step name the workflow step the job runs.
	WorkflowRun int64  `json:"workflow_run,omitempty"`
	Step        string `json:"step,omitempty"`
	// Inputs are a workflow step's dependencies' results, {"step": result}.
	Inputs json.RawMessage `json:"inputs,omitempty"`
	// FairnessKey and LimitKey are as enqueued (see Request).
	FairnessKey string `json:"fairness_key,omitempty"`
	LimitKey    string `json:"limit_key,omitempty"`
	// TraceParent and TraceState are the W3C trace context the job was
	// enqueued in (see Client.Enqueue), "" when it was enqueued outside a
	// trace: every attempt's span links to it, and a worker running the
	// job elsewhere can link its own spans to it. TraceParent is always a
	// version-00 traceparent; TraceState is at most MaxTraceStateBytes.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
	// Sequence is the sequence the job runs in ("" for none), and
	// SequenceOnFailure what its failure does to it (halt or continue).
	Sequence          string `json:"sequence,omitempty"`
	SequenceOnFailure string `json:"sequence_on_failure,omitempty"`
	// UniqueWindow says UniqueKey is held over a window (unique_states,
	// unique_for); DebounceKey is a debounced job's key and DebounceUntil
	// the latest a later enqueue of the key may move it to (none: no
	// cap). Set by Client.Get.
	UniqueWindow  bool       `json:"unique_window,omitempty"`
	DebounceKey   string     `json:"debounce_key,omitempty"`
	DebounceUntil *time.Time `json:"debounce_until,omitempty"`
	// Tags are the job's tags, in the order enqueued.
	Tags []string `json:"tags,omitempty"`
	// Progress is the last progress an attempt reported (SetProgress, or
	// a remote worker's progress call); set by Client.Get.
	Progress *Progress `json:"progress,omitempty"`

	result json.RawMessage
	// st writes the attempt's progress; set for the attempts this process
	// runs.
	st *store.Store
	// lease is the running attempt's, for CompleteTx; completedInTx is set
	// once CompleteTx succeeded.
	lease         store.Lease
	completedInTx bool
}

// UnmarshalArgs decodes the job's JSON args into v.
func (j *Job) UnmarshalArgs(v any) error {
	if err := json.Unmarshal(j.Args, v); err != nil {
		return fmt.Errorf("job %d: decode args: %w", j.ID, err)
	}
	return nil
}

// Input decodes the result of dependency step into v (workflow steps
// only). A dependency that failed with allow_failure has a null result.
func (j *Job) Input(step string, v any) error {
	var inputs map[string]json.RawMessage
	if len(j.Inputs) > 0 {
		if err := json.Unmarshal(j.Inputs, &inputs); err != nil {
			return fmt.Errorf("job %d: decode inputs: %w", j.ID, err)
		}
	}
	raw, ok := inputs[step]
	if !ok {
		return fmt.Errorf("job %d: step %q is not a dependency of step %q", j.ID, step, j.Step)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("job %d: decode the result of %q: %w", j.ID, step, err)
	}
	return nil
}

// SetResult records v as the job's result. It is saved when the attempt
// completes; a later call replaces an earlier one. JSON text
// (json.RawMessage or []byte) is kept byte for byte, and must be valid
// JSON that CheckJSONText accepts; other values are encoded with
// EncodeJSON. A result is at most MaxResultBytes.
func (j *Job) SetResult(v any) error {
	var b []byte
	switch r := v.(type) {
	case json.RawMessage:
		b = r
	case []byte:
		b = r
	default:
		var err error
		if b, err = EncodeJSON(v); err != nil {
			return fmt.Errorf("job %d: encode result: %w", j.ID, err)
		}
	}
	b, err := CheckResult(b)
	if err != nil {
		return fmt.Errorf("job %d: %w", j.ID, err)
	}
	j.result = b
	return nil
}

// CheckResult returns a job's result JSON text as it is stored: without
// the whitespace around it, and "null" for an empty one. It refuses, with
// a *ValidationError on the field "result", what SetResult refuses: text
// that is not valid JSON, is over MaxResultBytes, or that CheckJSONText
// does not accept.
func CheckResult(b []byte) (json.RawMessage, error) {
	if b = trimSpace(b); len(b) == 0 {
		b = []byte("null")
	}
	if err := checkPayload("result", b, MaxResultBytes); err != nil {
		return nil, err
	}
	return b, nil
}

// CountedAttempt is the job's attempt counted as max_attempts counts:
// snoozes and releases left out (the second run after a snooze is its
// first counted attempt).
func (j *Job) CountedAttempt() int { return max(j.Attempt-j.UncountedAttempts, 0) }

// AttemptBudget is the attempts the job may use, as it was enqueued with
// (MaxAttempts less the snoozes and releases that raised it).
func (j *Job) AttemptBudget() int { return max(j.MaxAttempts-j.UncountedAttempts, 1) }

// FromRow returns the Job a row of the store describes, as Client.Get
// returns it, for packages that claim jobs through the store themselves
// (remote workers). A claimed row's Job carries its attempt's lease, so
// CompleteTx completes it like a handler's; SetProgress does not work
// on it (the attempt does not run in this process).
func FromRow(r store.Job) *Job {
	j := &Job{
		ID: r.ID, Tenant: r.Tenant, Kind: r.Kind, Queue: r.Queue, State: State(r.State),
		Priority: r.Priority, Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, UncountedAttempts: r.UncountedAttempts, Timeout: r.Timeout,
		RunAt: r.RunAt, CreatedAt: r.CreatedAt, AttemptedAt: r.AttemptedAt, FinalizedAt: r.FinalizedAt,
		Node: r.Node, UniqueKey: r.UniqueKey, ReplayOf: r.ReplayOf, Args: r.Args, Result: r.Result,
		CancelRequested: r.CancelRequested, CronEntry: r.CronEntry, CronAt: r.CronAt,
		WorkflowRun: r.WorkflowRun, Step: r.Step, Inputs: r.Inputs, FairnessKey: r.FairnessKey, LimitKey: r.LimitKey,
		TraceParent: r.TraceParent, TraceState: r.TraceState, Tags: r.Tags, Sequence: r.SequenceKey,
		UniqueWindow: r.UniqueWindow, DebounceKey: r.DebounceKey, DebounceUntil: r.DebounceUntil,
		lease:    store.Lease{ID: r.ID, Attempt: r.Attempt, Token: r.LeaseToken},
		Progress: progressOf(r.Progress),
	}
	if len(r.Errors) > 2 { // "[]" is by far the most common
		// Written only by the store, so always a JSON array.
		_ = json.Unmarshal(r.Errors, &j.Errors)
	}
	if j.Errors == nil {
		j.Errors = []AttemptError{}
	}
	if r.SequenceKey != "" {
		j.SequenceOnFailure = SequenceContinue
		if r.SequenceHalt {
			j.SequenceOnFailure = SequenceHalt
		}
	}
	return j
}
