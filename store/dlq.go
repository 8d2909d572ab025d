package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DLQEntry is a job that failed for good, with its full error history.
type DLQEntry struct {
	ID          int64
	Tenant      string
	JobID       int64
	Kind        string
	Queue       string
	Priority    int
	MaxAttempts int
	Attempts    int
	Timeout     time.Duration
	Args        json.RawMessage
	Errors      json.RawMessage
	// Reason is "exhausted" (attempts ran out), "permanent" (the handler
	// said so) or "lost" (the last attempt's lease expired).
	Reason      string
	FailedAt    time.Time
	ReplayedAt  *time.Time
	ReplayJobID int64
	// WorkflowRun and Step, for a workflow step's job.
	WorkflowRun int64
	Step        string
}

// Replay is one DLQ entry replayed into one new job.
type Replay struct {
	EntryID int64
	JobID   int64
}

var (
	sqlReplayDLQ    = query("replay_dlq")
	sqlListDLQ      = query("list_dlq")
	sqlDeleteDLQ    = query("delete_dlq")
	sqlDeleteOldDLQ = query("delete_old_dlq")
)

// ErrAlreadyReplayed is returned when replaying an entry replayed before.
var ErrAlreadyReplayed = fmt.Errorf("DLQ entry already replayed")

// ReplayDLQEntry replays one entry into a new job, in the transaction
// that marks the entry replayed. It waits for a concurrent replay of the
// same entry, and then refuses. tenant, when not empty, scopes the lookup.
// Errors: ErrNotFound, ErrAlreadyReplayed.
func (s *Store) ReplayDLQEntry(ctx context.Context, tenant string, id int64) (Replay, error) {
	rs, err := s.replay(ctx, DLQFilter{Tenant: tenant}, id, 1, "FOR UPDATE")
	if err != nil {
		return Replay{}, err
	}
	if len(rs) == 1 {
		return rs[0], nil
	}
	entry, err := s.GetDLQEntry(ctx, tenant, id)
	if err != nil {
		return Replay{}, err
	}
	if entry.ReplayedAt != nil {
		return Replay{}, fmt.Errorf("%w (into job %d)", ErrAlreadyReplayed, entry.ReplayJobID)
	}
	return Replay{}, fmt.Errorf("replay DLQ entry %d: nothing replayed", id)
}

// ReplayDLQ replays up to limit unreplayed entries matching f, each into
// exactly one new job, and returns what it replayed. Entries a concurrent
// replay holds are skipped.
func (s *Store) ReplayDLQ(ctx context.Context, f DLQFilter, limit int) ([]Replay, error) {
	return s.replay(ctx, f, 0, limit, "FOR UPDATE SKIP LOCKED")
}

func (s *Store) replay(ctx context.Context, f DLQFilter, id int64, limit int, lock string) ([]Replay, error) {
	f.BeforeID = 0
	w := f.where()
	if id > 0 {
		w.add("id = ?", id)
	}
	sql := strings.NewReplacer("{{where}}", w.sql(), "{{limit}}", strconv.Itoa(limit), "{{lock}}", lock).Replace(sqlReplayDLQ)
	rows, err := s.pool.Query(ctx, sql, w.args...)
	if err != nil {
		return nil, fmt.Errorf("replay DLQ: %w", err)
	}
	defer rows.Close()
	var out []Replay
	for rows.Next() {
		var r Replay
		var woke int64
		if err := rows.Scan(&r.EntryID, &r.JobID, &woke); err != nil {
			return nil, fmt.Errorf("replay DLQ: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("replay DLQ: %w", err)
	}
	return out, nil
}

// ListDLQ returns entries matching f, newest first.
func (s *Store) ListDLQ(ctx context.Context, f DLQFilter) ([]DLQEntry, error) {
	entries, _, err := s.ListDLQPage(ctx, f)
	return entries, err
}

// ListDLQPage is ListDLQ saying also whether entries may follow those it
// returns: it stopped at f.Limit or at f.MaxBytes.
func (s *Store) ListDLQPage(ctx context.Context, f DLQFilter) (entries []DLQEntry, more bool, _ error) {
	w := f.where()
	limit := clampLimit(f.Limit)
	sql := strings.NewReplacer("{{where}}", w.sql(), "{{limit}}", w.next(limit)).Replace(sqlListDLQ)
	var (
		cut bool
		row extraRow
	)
	if f.MaxBytes > 0 {
		// As in ListJobsPage: the entries past the budget stay in the
		// database; the last column says the page was cut.
		budget := w.next(f.MaxBytes)
		sql = "SELECT id, tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, " +
			"reason, failed_at, replayed_at, replay_job_id, workflow_run, step, gaffer_upto >= " + budget + " FROM (" +
			"SELECT *, sum(" + dlqRowBytes + ") OVER (ORDER BY id DESC) AS gaffer_upto, " + dlqRowBytes + " AS gaffer_size FROM (" +
			strings.TrimSuffix(strings.TrimSpace(sql), ";") + ") l) w WHERE gaffer_upto - gaffer_size < " + budget + " ORDER BY id DESC"
		row.extra = []any{&cut}
	}
	rows, err := s.pool.Query(ctx, sql, w.args...)
	if err != nil {
		return nil, false, fmt.Errorf("list DLQ: %w", err)
	}
	defer rows.Close()
	row.Row = rows
	b := budget{max: f.MaxBytes}
	for rows.Next() {
		e, err := scanDLQEntry(row)
		if err != nil {
			return nil, false, fmt.Errorf("list DLQ: %w", err)
		}
		entries = append(entries, e)
		if b.spent(e.WireBytes()) {
			return entries, true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list DLQ: %w", err)
	}
	return entries, cut || len(entries) == limit, nil
}

// dlqRowBytes is a DLQ entry's size as a list pages it, in SQL (see
// listRowBytes).
const dlqRowBytes = "(pg_column_size(args) + pg_column_size(errors) + " + rowOverheadText + ")"

// extraRow is a row whose scan fills extra after the caller's
// destinations: a column a query adds after the usual ones.
type extraRow struct {
	pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// GetDLQEntry returns one entry; tenant, when not empty, scopes it.
func (s *Store) GetDLQEntry(ctx context.Context, tenant string, id int64) (DLQEntry, error) {
	w := DLQFilter{Tenant: tenant}.where()
	w.add("id = ?", id)
	sql := strings.NewReplacer("{{where}}", w.sql(), "{{limit}}", "1").Replace(sqlListDLQ)
	e, err := scanDLQEntry(s.pool.QueryRow(ctx, sql, w.args...))
	if err != nil {
		return DLQEntry{}, notFound(err)
	}
	return e, nil
}

// DeleteDLQEntry deletes one entry. Errors: ErrNotFound.
func (s *Store) DeleteDLQEntry(ctx context.Context, tenant string, id int64) error {
	w := DLQFilter{Tenant: tenant}.where()
	w.add("id = ?", id)
	tag, err := s.pool.Exec(ctx, strings.Replace(sqlDeleteDLQ, "{{where}}", w.sql(), 1), w.args...)
	if err != nil {
		return fmt.Errorf("delete DLQ entry: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// PurgeDLQ deletes every entry matching f and returns how many.
func (s *Store) PurgeDLQ(ctx context.Context, f DLQFilter) (int64, error) {
	f.BeforeID = 0
	w := f.where()
	tag, err := s.pool.Exec(ctx, strings.Replace(sqlDeleteDLQ, "{{where}}", w.sql(), 1), w.args...)
	if err != nil {
		return 0, fmt.Errorf("purge DLQ: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteOldDLQEntries deletes up to limit entries older than age. q is the
// leader's fenced transaction, or nil for the pool.
func (s *Store) DeleteOldDLQEntries(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteOldDLQ, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete old DLQ entries: %w", err)
	}
	return tag.RowsAffected(), nil
}

func scanDLQEntry(row pgx.Row) (DLQEntry, error) {
	var e DLQEntry
	var priority int16
	var timeoutMS int64
	var replayJob, run *int64
	var step *string
	err := row.Scan(&e.ID, &e.Tenant, &e.JobID, &e.Kind, &e.Queue, &priority, &e.MaxAttempts, &e.Attempts,
		&timeoutMS, &e.Args, &e.Errors, &e.Reason, &e.FailedAt, &e.ReplayedAt, &replayJob, &run, &step)
	if err != nil {
		return DLQEntry{}, err
	}
	e.Priority = int(priority)
	e.Timeout = time.Duration(timeoutMS) * time.Millisecond
	if replayJob != nil {
		e.ReplayJobID = *replayJob
	}
	if run != nil {
		e.WorkflowRun = *run
	}
	if step != nil {
		e.Step = *step
	}
	return e, nil
}

var sqlCountDLQCapped = query("count_dlq_capped")

// CountDLQCapped counts unreplayed entries (of tenant, when not empty),
// stopping at limit: a count equal to limit means at least that many.
func (s *Store) CountDLQCapped(ctx context.Context, tenant string, limit int) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, sqlCountDLQCapped, limit, nullString(tenant)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count DLQ: %w", err)
	}
	return n, nil
}
