package job

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/redact"
	"github.com/gafferhq/gaffer/store"
)

// record writes an attempt's outcome, compare-and-set on its lease, and
// ends its span. It reports whether it queued the outcome with the
// completer, which then forgets the attempt once it is written.
func (w *Worker) record(e *execution, err error, errKind, stack string, cause error, backoff Backoff) (queued bool) {
	j := e.job
	var (
		snooze *SnoozeError
		cancel *CancelError
		perm   *PermanentError
	)
	switch {
	case err == nil && j.completedInTx:
		e.km.completed.Inc() // committed by the handler's own transaction
		endAttempt(e.span, attemptEnd{outcome: OutcomeCompleted})
		return false
	case err == nil:
		// The completer ends the span once the completion is written.
		w.completer.add(completion{c: store.Completion{Lease: e.lease, Result: j.result}, queue: j.Queue, kind: j.Kind, km: e.km, span: e.span})
		return true
	case errors.As(err, &snooze):
		werr := w.write(e, "snooze", func(ctx context.Context) error {
			_, err := w.store.SnoozeJob(ctx, e.lease, snooze.Delay)
			return err
		}, w.metrics.snoozed)
		endAttempt(e.span, written(attemptEnd{outcome: OutcomeSnoozed}, werr))
		return false
	case errors.As(err, &cancel) || errors.Is(cause, ErrCancelled):
		reason := "cancelled"
		if cancel != nil {
			reason = redact.URLs(cancel.Error())
		}
		werr := w.write(e, "cancel", func(ctx context.Context) error {
			return w.store.CancelRunningJob(ctx, e.lease, reason)
		}, w.metrics.cancelled)
		endAttempt(e.span, written(attemptEnd{outcome: OutcomeCancelled}, werr))
		return false
	}
	// The message is stored and shown to the tenant's readers: no URL
	// passwords or query values (a failed call's error quotes its URL).
	f := store.Failure{Lease: e.lease, Message: redact.URLs(err.Error()), Kind: errKind, Stack: stack, Permanent: errors.As(err, &perm)}
	if f.Permanent && perm.kind != "" {
		f.Kind = perm.kind
	}
	var after *RetryAfterError
	switch {
	case f.Permanent:
	case errors.As(err, &after):
		f.RetryDelay = after.Delay
	default:
		f.RetryDelay = backoff.Delay(j.Attempt)
	}
	var state string
	werr := w.write(e, "fail", func(ctx context.Context) error {
		var err error
		state, err = w.store.FailJob(ctx, f)
		return err
	}, nil)
	end := attemptEnd{err: err, errKind: f.Kind, stack: stack}
	switch state {
	case string(Retrying):
		w.metrics.counter(w.metrics.retried, j.Queue, j.Kind).Inc()
		end.outcome = OutcomeRetry
	case string(Failed):
		w.metrics.counter(w.metrics.failed, j.Queue, j.Kind).Inc()
		end.outcome = OutcomeFailed
	case string(Cancelled):
		w.metrics.counter(w.metrics.cancelled, j.Queue, j.Kind).Inc()
		end.outcome = OutcomeCancelled
	}
	endAttempt(e.span, written(end, werr))
	return false
}

// written is end, unless the outcome's write was refused (the attempt no
// longer owned the job) or never got through: then the attempt was lost.
// The handler's error stays the one recorded, if it had one.
func written(end attemptEnd, werr error) attemptEnd {
	if werr == nil {
		return end
	}
	end.outcome = OutcomeLost
	if end.err == nil {
		end.err = werr
	}
	return end
}

// write runs one outcome write with retries, counting a refusal as stale.
// It returns the write's error: store.ErrStale for a refusal.
func (w *Worker) write(e *execution, op string, fn func(ctx context.Context) error, ok *prometheus.CounterVec) error {
	err := retryWrite(fn)
	j := e.job
	switch {
	case errors.Is(err, store.ErrStale):
		w.stale(j, op)
	case err != nil:
		w.log.Error("record outcome; the job will run again after its lease expires", "job_id", j.ID, "op", op, "error", err)
	default:
		if ok != nil {
			w.metrics.counter(ok, j.Queue, j.Kind).Inc()
		}
		w.wakeAfterWrite(map[string]bool{j.Queue: true})
	}
	return err
}

func (w *Worker) stale(j *Job, op string) {
	w.metrics.counter(w.metrics.stale, j.Queue, j.Kind, op).Inc()
	w.log.Warn("write refused: the attempt no longer owns the job", "job_id", j.ID, "attempt", j.Attempt, "op", op)
	if w.onStale != nil {
		w.onStale(j.ID, op)
	}
}
