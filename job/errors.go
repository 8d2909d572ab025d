package job

import (
	"errors"
	"fmt"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// Causes set on a running handler's context (read them with
// context.Cause) when Gaffer ends the attempt.
var (
	// ErrCancelled: someone asked for the job to be cancelled.
	ErrCancelled = errors.New("job cancelled")
	// ErrLeaseLost: the attempt's lease was refused (it expired and the job
	// moved on, or the node was declared dead). Nothing the handler does
	// from now on is recorded.
	ErrLeaseLost = errors.New("lease lost: another attempt owns the job")
	// ErrTimeout: the job ran past its timeout.
	ErrTimeout = errors.New("job timed out")
	// ErrStopping: the node stopped and its drain deadline passed; the job
	// is released for another node.
	ErrStopping = errors.New("node stopping: job released")
)

// SnoozeError asks for the job to run again after Delay without counting
// a failed attempt. Return Snooze(d) from a handler.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snooze for %s", e.Delay) }

// Snooze returns an error that, returned by a handler, puts the job back
// to pending for d. The attempt does not count against max_attempts.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// PermanentError fails the job at once, whatever attempts remain: it goes
// straight to the DLQ.
type PermanentError struct {
	Err error
	// kind, when set, replaces "error" as the attempt's AttemptError.Kind.
	// Only this package's constructors set it, so kinds stay a closed set.
	kind string
}

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that, returned by a handler, the job fails for
// good without further retries.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &PermanentError{Err: err}
}

// KindDestinationBlocked is the AttemptError.Kind of an attempt that
// refused to call a destination the operator has not allowed.
const KindDestinationBlocked = "destination_blocked"

// DestinationBlocked wraps err so that, returned by a handler, the job
// fails for good (no retries, straight to the DLQ) and the attempt's error
// kind is "destination_blocked": the handler refused to call a destination
// the operator has not allowed, and retrying cannot change that.
func DestinationBlocked(err error) error {
	if err == nil {
		err = errors.New("destination not allowed")
	}
	return &PermanentError{Err: err, kind: KindDestinationBlocked}
}

// RetryAfterError is a failed attempt whose retry is due after Delay
// rather than after the kind's backoff (e.g. a server's Retry-After).
type RetryAfterError struct {
	Err   error
	Delay time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err so that, returned by a handler, the attempt counts
// as failed and the retry is due after d instead of the backoff.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &RetryAfterError{Err: err, Delay: max(d, 0)}
}

// CancelError ends the job cancelled, from inside its handler.
type CancelError struct{ Err error }

func (e *CancelError) Error() string { return "cancelled: " + e.Err.Error() }
func (e *CancelError) Unwrap() error { return e.Err }

// Cancel wraps err so that, returned by a handler, the job ends cancelled
// and is not retried.
func Cancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by handler")
	}
	return &CancelError{Err: err}
}

// ValidationError says which field of a request is wrong and why.
type ValidationError struct {
	Field   string
	Message string
	// Code, when set, names the refusal more precisely than "invalid
	// field", for callers that branch on it: the API answers with it as
	// the problem code (e.g. destination_not_allowed).
	Code string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Errors for operations on existing jobs.
var (
	// ErrNotFound: no such job (or it belongs to another tenant).
	ErrNotFound = errors.New("job not found")
	// ErrFinished: the job is already completed, failed or cancelled.
	ErrFinished = errors.New("job already finished")
	// ErrNotRetryable: Retry was asked of a job that is neither waiting to
	// retry nor failed with its DLQ entry still unreplayed.
	ErrNotRetryable = errors.New("job cannot be retried")
	// ErrWindowIsolation: EnqueueTx of a request with a uniqueness window
	// in a transaction above READ COMMITTED, whose snapshot could miss a
	// job of the key another enqueue just committed. Nothing was
	// inserted.
	ErrWindowIsolation = store.ErrWindowIsolation
)
