package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// CronOccurrence is one scheduled instant of an entry and what became of it.
type CronOccurrence struct {
	ScheduledAt time.Time
	// Status is "fired", "skipped" (overlap), "missed" (missed-fire
	// policy) or "triggered" (by hand).
	Status     string
	Reason     string
	Count      int // occurrences a "missed" row stands for
	RecordedAt time.Time
	Epoch      int64
	JobID      int64
}

// CronFiring is what the scheduler decided for one entry's due
// occurrences.
type CronFiring struct {
	Tenant    string
	Name      string
	OldCursor time.Time
	// NewCursor is the next instant to handle; zero when the entry is
	// done (a one-shot's one occurrence handled).
	NewCursor time.Time
	// Occurrences in scheduled order; those with Status "fired" get a job.
	Occurrences []CronOccurrence
	Job         CronJob
	// SkipIfBusy turns "fired" occurrences into "skipped" while the entry's
	// previous job is unfinished (overlap policy skip).
	SkipIfBusy bool
}

// FireCron records a firing through q (the leader's fenced transaction):
// jobs first — one per fired occurrence, a no-op for an occurrence that
// already has its job — then the history, then the cursor, compare-and-set
// on OldCursor. It returns the occurrences as recorded (with job ids).
// Errors: ErrCursorMoved, after which q must be rolled back.
func (s *Store) FireCron(ctx context.Context, q DB, f CronFiring) ([]CronOccurrence, error) {
	occ := append([]CronOccurrence(nil), f.Occurrences...)
	if f.SkipIfBusy {
		var busy bool
		if err := q.QueryRow(ctx, sqlCronLastUnfinished, f.Tenant, f.Name).Scan(&busy); err != nil {
			return nil, fmt.Errorf("fire cron %q: overlap check: %w", f.Name, err)
		}
		for i := range occ {
			if occ[i].Status != "fired" {
				continue
			}
			if busy {
				occ[i].Status, occ[i].Reason = "skipped", "overlap: the previous occurrence's job is unfinished"
			}
			busy = true // the job fired now is unfinished for the rest of this batch
		}
	}
	var instants []time.Time
	for _, o := range occ {
		if o.Status == "fired" || o.Status == "triggered" {
			instants = append(instants, o.ScheduledAt)
		}
	}
	jobIDs := map[int64]int64{}
	var lastJob *int64
	var lastAt *time.Time
	if len(instants) > 0 {
		j := f.Job
		rows, err := q.Query(ctx, sqlInsertCronJobs, f.Tenant, f.Name, instants, j.Kind, j.Queue, int16(j.Priority), j.MaxAttempts, j.TimeoutMS, []byte(j.Args))
		if err != nil {
			return nil, fmt.Errorf("fire cron %q: insert jobs: %w", f.Name, err)
		}
		for rows.Next() {
			var id, woke int64
			var at time.Time
			if err := rows.Scan(&id, &at, &woke); err != nil {
				rows.Close()
				return nil, err
			}
			jobIDs[at.UnixNano()] = id
			if lastJob == nil || id > *lastJob {
				lastJob, lastAt = &id, &at
			}
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("fire cron %q: insert jobs: %w", f.Name, err)
		}
	}
	n := len(occ)
	ats, statuses, reasons := make([]time.Time, n), make([]string, n), make([]*string, n)
	counts, ids := make([]int32, n), make([]*int64, n)
	for i := range occ {
		if id, ok := jobIDs[occ[i].ScheduledAt.UnixNano()]; ok {
			occ[i].JobID = id
			ids[i] = &id
		}
		ats[i], statuses[i], reasons[i] = occ[i].ScheduledAt, occ[i].Status, nullString(occ[i].Reason)
		counts[i] = int32(max(occ[i].Count, 1))
	}
	if n > 0 {
		if _, err := q.Exec(ctx, sqlInsertCronOccurrence, f.Tenant, f.Name, ats, statuses, reasons, counts, ids); err != nil {
			return nil, fmt.Errorf("fire cron %q: record occurrences: %w", f.Name, err)
		}
	}
	if f.OldCursor.IsZero() {
		return occ, nil // a manual trigger: no cursor to move
	}
	var got string
	err := q.QueryRow(ctx, sqlAdvanceCronCursor, f.Tenant, f.Name, f.OldCursor, nullTime(f.NewCursor), lastJob, lastAt).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrCursorMoved
	}
	if err != nil {
		return nil, fmt.Errorf("fire cron %q: advance cursor: %w", f.Name, err)
	}
	return occ, nil
}

// CronHistory returns an entry's occurrences, newest first, before the
// cursor instant when given.
func (s *Store) CronHistory(ctx context.Context, tenant, name string, before time.Time, limit int) ([]CronOccurrence, error) {
	rows, err := s.pool.Query(ctx, sqlCronHistory, tenant, name, nullTime(before), clampLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("cron history: %w", err)
	}
	defer rows.Close()
	var out []CronOccurrence
	for rows.Next() {
		var o CronOccurrence
		if err := rows.Scan(&o.ScheduledAt, &o.Status, &o.Reason, &o.Count, &o.RecordedAt, &o.Epoch, &o.JobID); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// DeleteOldCronOccurrences deletes up to limit history rows older than age
// through q (fenced), and returns how many.
func (s *Store) DeleteOldCronOccurrences(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteOldCronOcc, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete old cron occurrences: %w", err)
	}
	return tag.RowsAffected(), nil
}

// RecordCronEditOccurrences records occurrences an edit decided (no job,
// no leader epoch) through q, the edit's transaction. An instant already
// recorded keeps its first record.
func (s *Store) RecordCronEditOccurrences(ctx context.Context, q DB, tenant, name string, occ []CronOccurrence) error {
	if len(occ) == 0 {
		return nil
	}
	n := len(occ)
	ats, statuses, reasons, counts := make([]time.Time, n), make([]string, n), make([]*string, n), make([]int32, n)
	for i, o := range occ {
		ats[i], statuses[i], reasons[i], counts[i] = o.ScheduledAt, o.Status, nullString(o.Reason), int32(max(o.Count, 1))
	}
	if _, err := s.db(q).Exec(ctx, sqlRecordCronEditOcc, tenant, name, ats, statuses, reasons, counts); err != nil {
		return fmt.Errorf("record cron occurrences of %q: %w", name, err)
	}
	return nil
}
