package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Completion is a finished attempt's lease and its result (nil for none).
type Completion struct {
	Lease
	Result json.RawMessage
}

// CompleteJobs marks the attempts completed, through q (a caller's
// transaction) or the pool when q is nil, and returns the ids whose
// completion was accepted; an id missing from the answer was stale.
func (s *Store) CompleteJobs(ctx context.Context, q DB, cs []Completion) ([]int64, error) {
	leases := make([]Lease, len(cs))
	results := make([][]byte, len(cs))
	for i, c := range cs {
		leases[i], results[i] = c.Lease, c.Result
	}
	ids, attempts, tokens := leaseArrays(leases)
	rows, err := s.db(q).Query(ctx, sqlCompleteJobs, ids, attempts, tokens, results)
	accepted, err := collectIDs(rows, err)
	if err != nil {
		return nil, fmt.Errorf("complete jobs: %w", err)
	}
	return accepted, nil
}

// Bounds on what one attempt's error stores. The history itself keeps at
// most 20 entries (migration 0011).
const (
	MaxErrorBytes = 8 << 10
	MaxStackBytes = 16 << 10
)

// capText cuts s to at most max bytes (on a rune boundary), saying so.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := fmt.Sprintf(" … [truncated: %d bytes in all]", len(s))
	cut := max - len(note)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// Failure describes a failed attempt.
type Failure struct {
	Lease
	// RetryDelay is how long after the database's now() the retry is due.
	RetryDelay time.Duration
	// Permanent sends the job to the DLQ whatever attempts remain.
	Permanent bool
	Message   string
	Kind      string // "error", "panic", "timeout"…
	Stack     string
}

// ErrStale means the attempt named by a lease is no longer the job's
// current running attempt: its write was discarded.
var ErrStale = errors.New("stale attempt: the job's lease moved on")

// FailJob records a failed attempt. The job retries after RetryDelay, or
// — when permanent or out of attempts — becomes failed and gets its DLQ
// entry in the same statement, or is cancelled if that was requested. It
// returns the job's new state, or ErrStale.
func (s *Store) FailJob(ctx context.Context, f Failure) (state string, err error) {
	var runAt time.Time
	err = s.pool.QueryRow(ctx, sqlFailJob, f.ID, f.Attempt, f.Token, f.RetryDelay.Milliseconds(), f.Permanent,
		capText(f.Message, MaxErrorBytes), f.Kind, nullString(capText(f.Stack, MaxStackBytes))).Scan(&state, &runAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrStale
	}
	if err != nil {
		return "", fmt.Errorf("fail job %d: %w", f.ID, err)
	}
	return state, nil
}

// SnoozeJob puts the attempt's job back to pending, due after delay,
// without using up an attempt. It returns the new state, or ErrStale.
func (s *Store) SnoozeJob(ctx context.Context, l Lease, delay time.Duration) (string, error) {
	var state string
	var runAt time.Time
	err := s.pool.QueryRow(ctx, sqlSnoozeJob, l.ID, l.Attempt, l.Token, delay.Milliseconds()).Scan(&state, &runAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrStale
	}
	if err != nil {
		return "", fmt.Errorf("snooze job %d: %w", l.ID, err)
	}
	return state, nil
}

// CancelRunningJob ends the attempt's job cancelled, or returns ErrStale.
func (s *Store) CancelRunningJob(ctx context.Context, l Lease, reason string) error {
	var id int64
	err := s.pool.QueryRow(ctx, sqlCancelRunningJob, l.ID, l.Attempt, l.Token, capText(reason, MaxErrorBytes)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("cancel job %d: %w", l.ID, err)
	}
	return nil
}

// HeartbeatResult is one lease a heartbeat extended.
type HeartbeatResult struct {
	ID              int64
	CancelRequested bool
}

// HeartbeatJobs extends the leases to ttl after the database's now() and
// returns those it extended; a lease missing from the answer is stale.
func (s *Store) HeartbeatJobs(ctx context.Context, leases []Lease, ttl time.Duration) ([]HeartbeatResult, error) {
	ids, attempts, tokens := leaseArrays(leases)
	rows, err := s.pool.Query(ctx, sqlHeartbeatJobs, ids, attempts, tokens, ttl.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	defer rows.Close()
	var out []HeartbeatResult
	for rows.Next() {
		var h HeartbeatResult
		if err := rows.Scan(&h.ID, &h.CancelRequested); err != nil {
			return nil, fmt.Errorf("heartbeat: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return out, nil
}

// ReleaseJobs gives running attempts back without using them up, so that
// any node can claim the jobs at once. It returns the ids released.
func (s *Store) ReleaseJobs(ctx context.Context, leases []Lease, reason string) ([]int64, error) {
	ids, attempts, tokens := leaseArrays(leases)
	rows, err := s.pool.Query(ctx, sqlReleaseJobs, ids, attempts, tokens, reason)
	if err != nil {
		return nil, fmt.Errorf("release jobs: %w", err)
	}
	released, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (int64, error) {
		var id, woke int64
		err := row.Scan(&id, &woke)
		return id, err
	})
	if err != nil {
		return nil, fmt.Errorf("release jobs: %w", err)
	}
	return released, nil
}

// ReleaseLostClaims gives back, as ReleaseJobs does, the attempts that
// node's claims with the lease tokens started: claims whose answers it
// never got (the connection broke after the claim was sent, and the
// claim may have committed). It returns the ids released.
func (s *Store) ReleaseLostClaims(ctx context.Context, node string, tokens []int64, reason string) ([]int64, error) {
	rows, err := s.pool.Query(ctx, sqlLostClaims, node, tokens)
	if err != nil {
		return nil, fmt.Errorf("release lost claims: %w", err)
	}
	leases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Lease, error) {
		var l Lease
		err := row.Scan(&l.ID, &l.Attempt, &l.Token)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("release lost claims: %w", err)
	}
	if len(leases) == 0 {
		return nil, nil
	}
	return s.ReleaseJobs(ctx, leases, reason)
}

// CancelRequestedAmong returns the ids, of those given, whose cancellation
// has been requested.
func (s *Store) CancelRequestedAmong(ctx context.Context, ids []int64) ([]int64, error) {
	rows, err := s.pool.Query(ctx, sqlCancelRequestedAmong, ids)
	out, err := collectIDs(rows, err)
	if err != nil {
		return nil, fmt.Errorf("check cancellations: %w", err)
	}
	return out, nil
}

// Rescued is a running attempt that was ended as lost.
type Rescued struct {
	ID       int64
	Queue    string
	Kind     string
	NewState string
	Node     string
}

// RescueJobs ends up to limit lost attempts: those whose lease expired by
// the database clock and, when node is not empty, every running attempt of
// that node. Each job retries at once, or goes to the DLQ if that was its
// last attempt, or is cancelled if that was requested.
//
// q is the leader's fenced transaction, or nil for the pool.
func (s *Store) RescueJobs(ctx context.Context, q DB, node string, limit int, reason string) ([]Rescued, error) {
	rows, err := s.db(q).Query(ctx, sqlRescueJobs, limit, nullString(node), reason)
	if err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	defer rows.Close()
	var out []Rescued
	for rows.Next() {
		var r Rescued
		var n *string
		var woke int64
		if err := rows.Scan(&r.ID, &r.Queue, &r.Kind, &r.NewState, &n, &woke); err != nil {
			return nil, fmt.Errorf("rescue jobs: %w", err)
		}
		if n != nil {
			r.Node = *n
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rescue jobs: %w", err)
	}
	return out, nil
}

// ErrFinished is returned when cancelling a job that already finished.
var ErrFinished = errors.New("job already finished")

// RequestCancel cancels a pending or retrying job at once, or marks a
// running one and tells its node; it returns the state after the request.
// tenant, when not empty, scopes the lookup. Errors: ErrNotFound,
// ErrFinished.
func (s *Store) RequestCancel(ctx context.Context, tenant string, id int64) (string, error) {
	var state string
	var told int64
	err := s.pool.QueryRow(ctx, sqlRequestCancel, id, nullString(tenant)).Scan(&state, &told)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.GetJob(ctx, tenant, id); err != nil {
			return "", err
		}
		return "", ErrFinished
	}
	if err != nil {
		return "", fmt.Errorf("cancel job %d: %w", id, err)
	}
	return state, nil
}

// GetJob returns one job; tenant, when not empty, scopes the lookup.
// Its Progress is set when an attempt reported any.
func (s *Store) GetJob(ctx context.Context, tenant string, id int64) (Job, error) {
	var (
		percent *float32
		message *string
		attempt *int32
		at      *time.Time
	)
	var windowKey, debounceKey *string
	var debounceUntil *time.Time
	j, err := scanJob(s.pool.QueryRow(ctx, sqlGetJob, id, nullString(tenant)), &percent, &message, &attempt, &at, &windowKey,
		&debounceKey, &debounceUntil)
	if err != nil {
		return Job{}, notFound(err)
	}
	if windowKey != nil {
		j.UniqueKey, j.UniqueWindow = *windowKey, true
	}
	if debounceKey != nil {
		j.DebounceKey, j.DebounceUntil = *debounceKey, debounceUntil
	}
	one := []Job{j}
	if _, err := s.readStepInputs(ctx, nil, one, MaxClaimInputBytes); err != nil {
		return Job{}, err
	}
	j = one[0]
	if percent != nil && attempt != nil && at != nil {
		j.Progress = &Progress{Percent: percentOf(*percent), Attempt: int(*attempt), At: *at}
		if message != nil {
			j.Progress.Message = *message
		}
	}
	return j, nil
}

// percentOf reads a stored percent (a real) as the float64 a person
// wrote: 18.333334, not 18.33333396911621, the float32's exact value.
func percentOf(p float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(p), 'g', -1, 32), 64)
	if err != nil {
		return float64(p)
	}
	return v
}

// DeleteFinishedJobs deletes up to limit jobs that finished more than age
// ago, oldest first, and returns how many it deleted. q is the leader's
// fenced transaction, or nil for the pool.
func (s *Store) DeleteFinishedJobs(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteFinishedJobs, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return tag.RowsAffected(), nil
}

func leaseArrays(leases []Lease) ([]int64, []int32, []int64) {
	ids := make([]int64, len(leases))
	attempts := make([]int32, len(leases))
	tokens := make([]int64, len(leases))
	for i, l := range leases {
		ids[i], attempts[i], tokens[i] = l.ID, int32(l.Attempt), l.Token
	}
	return ids, attempts, tokens
}

func collectIDs(rows pgx.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

var sqlRetryNow = query("retry_now")

// RetryNow makes a retrying job due at once; tenant, when not empty,
// scopes the lookup. Errors: ErrNotFound, or ErrNotRetrying when the job
// is in another state.
func (s *Store) RetryNow(ctx context.Context, tenant string, id int64) error {
	tag, err := s.pool.Exec(ctx, sqlRetryNow, id, nullString(tenant))
	if err != nil {
		return fmt.Errorf("retry job %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		if _, err := s.GetJob(ctx, tenant, id); err != nil {
			return err
		}
		return ErrNotRetrying
	}
	return nil
}

// ErrNotRetrying is returned by RetryNow for a job not waiting to retry.
var ErrNotRetrying = errors.New("job is not waiting to retry")
