package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Bulk actions on jobs (queries/bulk.sql): cancel, retry or delete the
// jobs a selection names, at most a bound per call.

// BulkAction names a bulk action.
type BulkAction string

const (
	BulkCancel BulkAction = "cancel"
	BulkRetry  BulkAction = "retry"
	BulkDelete BulkAction = "delete"
)

var (
	bulkEligible = map[BulkAction]string{
		BulkCancel: query("bulk_eligible_cancel"),
		BulkRetry:  query("bulk_eligible_retry"),
		BulkDelete: query("bulk_eligible_delete"),
	}
	bulkStatement = map[BulkAction]string{
		BulkCancel: query("bulk_cancel"),
		BulkRetry:  query("bulk_retry"),
		BulkDelete: query("bulk_delete"),
	}
	sqlBulkCount  = query("bulk_count")
	sqlBulkMore   = query("bulk_more")
	sqlBulkStates = query("bulk_states")
)

// BulkSelection is the jobs a bulk action considers: those matching
// Filter (BeforeID, Limit and MaxBytes are ignored) and, when IDs is not
// empty, only those ids. A windowed filter (Search, Args) selects, as a
// list does, the matches among the SearchWindow newest jobs its other
// conditions select.
type BulkSelection struct {
	Filter JobFilter
	IDs    []int64
}

func (sel BulkSelection) where(action BulkAction) (string, []any, error) {
	if _, ok := bulkEligible[action]; !ok {
		return "", nil, fmt.Errorf("bulk: unknown action %q", action)
	}
	w, err := jobWhere(sel.Filter)
	if err != nil {
		return "", nil, err
	}
	if len(sel.IDs) > 0 {
		w.add("id = ANY(?::bigint[])", sel.IDs)
	}
	if sel.Filter.windowed() {
		// The window's subquery takes the same parameters as the
		// conditions before it.
		window := "id IN (SELECT id FROM gaffer.jobs WHERE " + w.sql() + " ORDER BY id DESC LIMIT " + w.next(SearchWindow) + ")"
		match := windowMatch(&w, sel.Filter)
		w.addLiteral(window)
		w.addLiteral(match)
	}
	return w.sql(), w.args, nil
}

func bulkSQL(text, where, eligible string, limit int) string {
	return strings.NewReplacer("{{where}}", where, "{{eligible}}", eligible, "{{limit}}", strconv.Itoa(limit)).Replace(text)
}

// CountBulk counts, up to limit, the jobs of sel that action would act
// on.
func (s *Store) CountBulk(ctx context.Context, action BulkAction, sel BulkSelection, limit int) (int, error) {
	sql, args, err := countBulkSQL(action, sel, limit)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("bulk %s: count: %w", action, err)
	}
	return n, nil
}

// countBulkSQL is CountBulk's query and its arguments.
func countBulkSQL(action BulkAction, sel BulkSelection, limit int) (string, []any, error) {
	w, args, err := sel.where(action)
	if err != nil {
		return "", nil, err
	}
	return bulkSQL(sqlBulkCount, w, bulkEligible[action], limit), args, nil
}

// BulkActed is one job a bulk action acted on: its state after (cancel,
// delete: the state it had), and for a retry the job that will run (the
// job itself, or a failed job's replay).
type BulkActed struct {
	ID    int64
	State string
	RunID int64
}

// BulkJobs acts on at most limit jobs of sel in one statement, in id
// order, skipping those another transaction holds, and reports them and
// whether jobs the action applies to remain in sel.
func (s *Store) BulkJobs(ctx context.Context, action BulkAction, sel BulkSelection, limit int) (acted []BulkActed, more bool, _ error) {
	w, args, err := sel.where(action)
	if err != nil {
		return nil, false, err
	}
	rows, err := s.pool.Query(ctx, bulkSQL(bulkStatement[action], w, bulkEligible[action], limit), args...)
	if err != nil {
		return nil, false, fmt.Errorf("bulk %s: %w", action, err)
	}
	defer rows.Close()
	for rows.Next() {
		var a BulkActed
		var woke int64
		switch action {
		case BulkCancel:
			err = rows.Scan(&a.ID, &a.State, &woke)
		case BulkRetry:
			err = rows.Scan(&a.ID, &a.RunID, &woke)
		case BulkDelete:
			err = rows.Scan(&a.ID, &a.State)
		}
		if err != nil {
			return nil, false, fmt.Errorf("bulk %s: %w", action, err)
		}
		acted = append(acted, a)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("bulk %s: %w", action, err)
	}
	if err := s.pool.QueryRow(ctx, bulkSQL(sqlBulkMore, w, bulkEligible[action], limit), args...).Scan(&more); err != nil {
		return acted, false, fmt.Errorf("bulk %s: %w", action, err)
	}
	return acted, more, nil
}

// BulkJobState is where a job a bulk call named stands, for saying why it
// was not acted on.
type BulkJobState struct {
	ID              int64
	State           string
	CancelRequested bool
	Due             bool
	// Replayable: a failed job whose DLQ entry is unreplayed.
	Replayable bool
	// RunRunning: the job is a step of a workflow run still running.
	RunRunning bool
}

// BulkStates returns where the ids stand; an id missing from the answer
// is not found (or, for a tenant, another tenant's).
func (s *Store) BulkStates(ctx context.Context, tenant string, ids []int64) ([]BulkJobState, error) {
	rows, err := s.pool.Query(ctx, sqlBulkStates, ids, nullString(tenant))
	if err != nil {
		return nil, fmt.Errorf("bulk: states: %w", err)
	}
	defer rows.Close()
	var out []BulkJobState
	for rows.Next() {
		var b BulkJobState
		if err := rows.Scan(&b.ID, &b.State, &b.CancelRequested, &b.Due, &b.Replayable, &b.RunRunning); err != nil {
			return nil, fmt.Errorf("bulk: states: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
