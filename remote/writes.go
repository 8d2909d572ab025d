package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gafferhq/gaffer/internal/redact"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Outcome is what became of one job's part of a remote write.
type Outcome struct {
	JobID int64
	// Err is nil when the write was accepted; it wraps job.ErrLeaseLost when
	// the attempt no longer owns the job (the worker must stop working on
	// it and drop its result), and is job.ErrNotFound for a job that does not
	// exist or is another tenant's.
	Err error
	// CancelRequested (heartbeats): cancellation of the job was asked
	// for. The worker should stop and report the attempt (fail); the job
	// then ends cancelled.
	CancelRequested bool
}

// Completion is a remote attempt that succeeded, and its result.
type Completion struct {
	Lease
	// Result is the job's result as JSON text, kept byte for byte (see
	// job.Job.SetResult); nil for none.
	Result json.RawMessage
}

// Failure is a remote attempt that failed.
type Failure struct {
	Lease
	// Message is the error, stored (at most 8 KiB, URL passwords and
	// query values masked) and shown to the tenant's readers.
	Message string
	// Permanent fails the job into the DLQ whatever attempts remain.
	Permanent bool
	// RetryAfter, when set, makes the retry due that long after now
	// instead of after the default backoff.
	RetryAfter time.Duration
	// Stack is an optional trace (at most 16 KiB kept).
	Stack string
}

// checkBatch refuses an empty batch, one over MaxClaim, and one that
// names a job twice (one statement would write it once, and which
// lease won would be the database's choice).
func (r *Workers) checkBatch(ids []int64) error {
	if len(ids) == 0 || len(ids) > r.cfg.MaxClaim {
		return &job.ValidationError{Field: "jobs", Message: fmt.Sprintf("name 1 to %d jobs, got %d", r.cfg.MaxClaim, len(ids))}
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return &job.ValidationError{Field: "jobs", Message: fmt.Sprintf("job %d is named twice", id)}
		}
		seen[id] = true
	}
	return nil
}

// own returns, of the jobs ids, those of the caller's tenant ("": any),
// with their queue and kind (for metrics).
func (r *Workers) own(ctx context.Context, tenant string, ids []int64) (map[int64]store.JobLabel, error) {
	return r.store.JobsOfTenant(ctx, ids, tenant)
}

// stale counts and logs a write refused because the attempt no longer
// owns its job.
func (r *Workers) stale(l Lease, label store.JobLabel, op string) error {
	r.metrics.CountStale(label.Queue, label.Kind, op)
	r.log.Warn("remote write refused: the attempt no longer owns the job", "job_id", l.JobID, "attempt", l.Attempt, "op", op)
	return fmt.Errorf("job %d attempt %d: %w", l.JobID, l.Attempt, job.ErrLeaseLost)
}

// Heartbeat extends the leases to LeaseTTL from the database's now, for a
// remote worker that is still working on them, and records the call as
// the worker's. tenant is the caller's ("" for a spanning caller). Each
// lease has its outcome, in order. Errors (for the whole call):
// *job.ValidationError, ErrUnknownWorker.
func (r *Workers) Heartbeat(ctx context.Context, tenant, worker string, leases []Lease) ([]Outcome, error) {
	ids := make([]int64, len(leases))
	for i, l := range leases {
		ids[i] = l.JobID
	}
	if err := r.checkBatch(ids); err != nil {
		return nil, err
	}
	if _, err := r.store.TouchRemoteWorker(ctx, worker, tenant); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w %q", ErrUnknownWorker, worker)
		}
		return nil, err
	}
	labels, err := r.own(ctx, tenant, ids)
	if err != nil {
		return nil, err
	}
	var mine []store.Lease
	for _, l := range leases {
		if _, ok := labels[l.JobID]; ok {
			mine = append(mine, l.store())
		}
	}
	got := map[int64]bool{}
	if len(mine) > 0 {
		res, err := r.store.HeartbeatJobs(ctx, mine, r.cfg.LeaseTTL)
		if err != nil {
			return nil, err
		}
		for _, h := range res {
			got[h.ID] = h.CancelRequested
		}
	}
	out := make([]Outcome, len(leases))
	for i, l := range leases {
		out[i].JobID = l.JobID
		label, ok := labels[l.JobID]
		cancel, extended := got[l.JobID]
		switch {
		case !ok:
			out[i].Err = job.ErrNotFound
		case !extended:
			out[i].Err = r.stale(l, label, "heartbeat")
		default:
			out[i].CancelRequested = cancel
		}
	}
	return out, nil
}

// Complete records remote attempts as completed, with their results, in
// one statement. tenant is the caller's ("" for a spanning caller). Each
// completion has its outcome, in order. Errors (for the whole call):
// *job.ValidationError (a bad result refuses the whole batch).
func (r *Workers) Complete(ctx context.Context, tenant string, cs []Completion) ([]Outcome, error) {
	ids := make([]int64, len(cs))
	for i, c := range cs {
		ids[i] = c.JobID
	}
	if err := r.checkBatch(ids); err != nil {
		return nil, err
	}
	results := make([]json.RawMessage, len(cs))
	for i, c := range cs {
		if c.Result == nil {
			continue
		}
		b, err := job.CheckResult(c.Result)
		if err != nil {
			return nil, err
		}
		results[i] = b
	}
	labels, err := r.own(ctx, tenant, ids)
	if err != nil {
		return nil, err
	}
	var mine []store.Completion
	for i, c := range cs {
		if _, ok := labels[c.JobID]; ok {
			mine = append(mine, store.Completion{Lease: c.Lease.store(), Result: results[i]})
		}
	}
	accepted := map[int64]bool{}
	if len(mine) > 0 {
		// Not retried here: the worker retries the call, and a completion
		// that committed unseen is refused the second time, stale, which a
		// worker that lost the answer cannot tell from a lost lease. Both
		// mean: the job is no longer this attempt's to report.
		got, err := r.store.CompleteJobs(ctx, nil, mine)
		if err != nil {
			return nil, err
		}
		for _, id := range got {
			accepted[id] = true
		}
	}
	out := make([]Outcome, len(cs))
	woken := map[string]bool{}
	for i, c := range cs {
		out[i].JobID = c.JobID
		label, ok := labels[c.JobID]
		switch {
		case !ok:
			out[i].Err = job.ErrNotFound
		case !accepted[c.JobID]:
			out[i].Err = r.stale(c.Lease, label, "complete")
		default:
			r.metrics.CountOutcome(label.Queue, label.Kind, job.OutcomeCompleted)
			if !woken[label.Queue] {
				// The slots these attempts held under limits are free now.
				woken[label.Queue] = true
				r.WakeQueue(label.Queue)
			}
		}
	}
	return out, nil
}

// validText: PostgreSQL text holds valid UTF-8 without NUL characters.
func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// ownOne checks that one job is the caller's and returns its labels.
func (r *Workers) ownOne(ctx context.Context, tenant string, id int64) (store.JobLabel, error) {
	labels, err := r.own(ctx, tenant, []int64{id})
	if err != nil {
		return store.JobLabel{}, err
	}
	label, ok := labels[id]
	if !ok {
		return label, job.ErrNotFound
	}
	return label, nil
}

// Fail records a remote attempt as failed: the job retries after the
// default backoff (or f.RetryAfter), or fails into the DLQ when it was
// permanent or the last attempt, or ends cancelled when that was asked
// for. It returns the job's new state. tenant is the caller's ("" for a
// spanning caller). Errors: *job.ValidationError, job.ErrNotFound, job.ErrLeaseLost.
func (r *Workers) Fail(ctx context.Context, tenant string, f Failure) (job.State, error) {
	if f.RetryAfter < 0 || f.RetryAfter > job.MaxDelay {
		return "", &job.ValidationError{Field: "retry_after", Message: fmt.Sprintf("must be between 0 and %s, got %s", job.MaxDelay, f.RetryAfter)}
	}
	if !validText(f.Message) || !validText(f.Stack) {
		return "", &job.ValidationError{Field: "error", Message: "the error and stack must be UTF-8 without NUL characters"}
	}
	if f.Message == "" {
		f.Message = "failed"
	}
	label, err := r.ownOne(ctx, tenant, f.JobID)
	if err != nil {
		return "", err
	}
	delay := f.RetryAfter
	if delay == 0 {
		delay = job.DefaultBackoff.Delay(f.Attempt)
	}
	// Stored and shown to the tenant's readers: no URL passwords or query
	// values, as for a node's failed attempt.
	state, err := r.store.FailJob(ctx, store.Failure{Lease: f.Lease.store(), RetryDelay: delay, Permanent: f.Permanent,
		Message: redact.URLs(f.Message), Kind: "error", Stack: redact.URLs(f.Stack)})
	if errors.Is(err, store.ErrStale) {
		return "", r.stale(f.Lease, label, "fail")
	}
	if err != nil {
		return "", err
	}
	switch job.State(state) {
	case job.Retrying:
		r.metrics.CountOutcome(label.Queue, label.Kind, job.OutcomeRetry)
	case job.Failed:
		r.metrics.CountOutcome(label.Queue, label.Kind, job.OutcomeFailed)
	case job.Cancelled:
		r.metrics.CountOutcome(label.Queue, label.Kind, job.OutcomeCancelled)
	}
	r.WakeQueue(label.Queue)
	return job.State(state), nil
}

// Snooze puts a remote attempt's job back to pending, due after delay,
// without using up an attempt (or ends it cancelled, when that was asked
// for). It returns the job's new state. Errors: *job.ValidationError,
// job.ErrNotFound, job.ErrLeaseLost.
func (r *Workers) Snooze(ctx context.Context, tenant string, l Lease, delay time.Duration) (job.State, error) {
	if delay < 0 || delay > job.MaxDelay {
		return "", &job.ValidationError{Field: "delay", Message: fmt.Sprintf("must be between 0 and %s, got %s", job.MaxDelay, delay)}
	}
	label, err := r.ownOne(ctx, tenant, l.JobID)
	if err != nil {
		return "", err
	}
	state, err := r.store.SnoozeJob(ctx, l.store(), delay)
	if errors.Is(err, store.ErrStale) {
		return "", r.stale(l, label, "snooze")
	}
	if err != nil {
		return "", err
	}
	if job.State(state) == job.Cancelled {
		r.metrics.CountOutcome(label.Queue, label.Kind, job.OutcomeCancelled)
	} else {
		r.metrics.CountOutcome(label.Queue, label.Kind, job.OutcomeSnoozed)
	}
	r.WakeQueue(label.Queue)
	return job.State(state), nil
}

// Progress records how far a remote attempt got (see job.Job.SetProgress and
// job.CheckProgress). Errors: *job.ValidationError, job.ErrNotFound, job.ErrLeaseLost.
func (r *Workers) Progress(ctx context.Context, tenant string, l Lease, percent float64, message string) error {
	if err := job.CheckProgress(percent, message); err != nil {
		return err
	}
	label, err := r.ownOne(ctx, tenant, l.JobID)
	if err != nil {
		return err
	}
	err = r.store.SetProgress(ctx, l.store(), percent, message)
	if errors.Is(err, store.ErrStale) {
		return r.stale(l, label, "progress")
	}
	return err
}
