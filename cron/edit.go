package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// MaxAhead bounds how far ahead a one-shot "@at" may be: as far as a
// job's run_at.
const MaxAhead = job.MaxDelay

// Update holds the fields to change; nil fields stay.
type Update struct {
	Schedule  *string
	Timezone  *string
	Job       *JobTemplate
	Missed    *string
	MissedCap *int
	Overlap   *string
	Paused    *bool
}

// Update changes an entry, by the rules of Put (see there for how a new
// schedule, a new zone or a resume moves the entry's next occurrence). A
// change that changes nothing writes nothing. Errors: validation errors
// naming the field, a *QuotaError (a client WithQuota, when the schedule
// or zone changes), ErrNotFound.
func (c *Client) Update(ctx context.Context, tenant, name string, u Update) (Entry, error) {
	// Read, change and write under the row's lock: a pause, another edit
	// or a firing that lands between the read and the write is neither
	// undone nor has its cursor written back stale.
	tx, err := c.store.Begin(ctx)
	if err != nil {
		return Entry{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := c.lockQuota(ctx, tx, tenantOrDefault(tenant)); err != nil {
		return Entry{}, err
	}
	row, err := c.store.GetCronEntryForUpdate(ctx, tx, tenantOrDefault(tenant), name)
	if errors.Is(err, store.ErrNotFound) {
		return Entry{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Entry{}, err
	}
	next := fromRow(row)
	if u.Schedule != nil {
		next.Schedule = *u.Schedule
	}
	if u.Timezone != nil {
		next.Timezone = *u.Timezone
	}
	if u.Job != nil {
		next.Job = *u.Job
	}
	if u.Missed != nil {
		next.Missed = *u.Missed
	}
	if u.MissedCap != nil {
		next.MissedCap = *u.MissedCap
	}
	if u.Overlap != nil {
		next.Overlap = *u.Overlap
	}
	if u.Paused != nil {
		next.Paused = *u.Paused
	}
	sched, tmpl, err := next.validate(c.kinds)
	if err != nil {
		return Entry{}, err
	}
	_, changes, err := c.change(ctx, tx, row, next, sched, tmpl, false)
	if err != nil {
		return Entry{}, err
	}
	if len(changes) == 0 {
		return fromRow(row), nil
	}
	if err := tx.Commit(ctx); err != nil {
		return Entry{}, err
	}
	return c.Get(ctx, next.Tenant, name)
}

// Pause stops an entry firing until Resume.
func (c *Client) Pause(ctx context.Context, tenant, name string) (Entry, error) {
	t := true
	return c.Update(ctx, tenant, name, Update{Paused: &t})
}

// Resume restarts a paused entry: a recurring one from the first fire
// time after now (what fell while it was paused is not caught up); a
// one-shot whose time passed meanwhile by its missed-fire policy (skip:
// done without firing; once or all: it fires once).
func (c *Client) Resume(ctx context.Context, tenant, name string) (Entry, error) {
	f := false
	return c.Update(ctx, tenant, name, Update{Paused: &f})
}

// PutOptions adjusts Put.
type PutOptions struct {
	// KeepPaused leaves an existing entry paused or active as it is,
	// whatever e.Paused says: a declarative file need not know about an
	// operator's pause. A new entry takes e.Paused.
	KeepPaused bool
	// DryRun checks e and reports what Put would do, writing nothing.
	DryRun bool
}

// PutResult says what Put did, or with DryRun would do.
type PutResult struct {
	Created bool
	// Changes names the fields of an existing entry that differ: schedule,
	// timezone, job.kind, job.queue, job.args, job.priority,
	// job.max_attempts, job.timeout, missed, missed_cap, overlap, paused.
	// Empty: the entry already was as asked, and nothing was written.
	Changes []string
}

// Changed reports whether Put created or changed the entry.
func (r PutResult) Changed() bool { return r.Created || len(r.Changes) > 0 }

// Put creates the entry e names, or replaces its definition: every field
// of e, defaults for those left zero (Paused aside, with KeepPaused). The
// same e twice changes nothing the second time, and says so. Status
// fields of e are ignored.
//
// When the schedule or time zone changes, the entry's next occurrence is
// the new schedule's first instant after the later of now (the database
// clock) and the last occurrence that made a job — so no instant that
// has its job is fired again. An occurrence of the old schedule that was
// due but not yet handled when the change committed (the leader fires
// within milliseconds, so only during a failover or in that window) is
// not fired: it is recorded in the history as missed, "the schedule
// changed before the leader handled it". A one-shot's instant must then
// be after that floor, unless it is the instant the entry already fired.
//
// Errors: a *job.ValidationError or *ScheduleError naming the field, a
// *QuotaError (a client WithQuota).
func (c *Client) Put(ctx context.Context, e Entry, opt PutOptions) (Entry, PutResult, error) {
	sched, tmpl, err := e.validate(c.kinds)
	if err != nil {
		return Entry{}, PutResult{}, err
	}
	tx, err := c.store.Begin(ctx)
	if err != nil {
		return Entry{}, PutResult{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := c.lockQuota(ctx, tx, e.Tenant); err != nil {
		return Entry{}, PutResult{}, err
	}
	for range 2 {
		row, err := c.store.GetCronEntryForUpdate(ctx, tx, e.Tenant, e.Name)
		if errors.Is(err, store.ErrNotFound) {
			created, err := c.putNew(ctx, tx, e, sched, tmpl, opt.DryRun)
			if errors.Is(err, store.ErrExists) {
				continue // created meanwhile by another Put: now there is a row to lock
			}
			if err != nil {
				return Entry{}, PutResult{}, err
			}
			if opt.DryRun {
				return created, PutResult{Created: true}, nil
			}
			if err := tx.Commit(ctx); err != nil {
				return Entry{}, PutResult{}, err
			}
			got, err := c.Get(ctx, e.Tenant, e.Name)
			return got, PutResult{Created: true}, err
		}
		if err != nil {
			return Entry{}, PutResult{}, err
		}
		next := e
		if opt.KeepPaused {
			next.Paused = row.Paused
		}
		next.NextRunAt, next.DoneAt = row.NextRunAt, timePtr(row.DoneAt)
		after, changes, err := c.change(ctx, tx, row, next, sched, tmpl, opt.DryRun)
		if err != nil {
			return Entry{}, PutResult{}, err
		}
		if len(changes) == 0 || opt.DryRun {
			return fromRow(after), PutResult{Changes: changes}, nil
		}
		if err := tx.Commit(ctx); err != nil {
			return Entry{}, PutResult{}, err
		}
		got, err := c.Get(ctx, e.Tenant, e.Name)
		return got, PutResult{Changes: changes}, err
	}
	return Entry{}, PutResult{}, fmt.Errorf("put cron entry %q: it was created and deleted concurrently; retry", e.Name)
}

// putNew inserts e through tx; with dry, it only says what it would be.
func (c *Client) putNew(ctx context.Context, tx pgx.Tx, e Entry, sched Schedule, tmpl store.CronJob, dry bool) (Entry, error) {
	now, err := c.store.Now(ctx)
	if err != nil {
		return Entry{}, err
	}
	if e.NextRunAt, err = firstRun(sched, e.Schedule, now); err != nil {
		return Entry{}, err
	}
	e.Done, e.DoneAt, e.Status = false, nil, Status{}
	row := e.row(tmpl)
	row.MinGap = minGap(sched, now)
	if err := c.admit(ctx, tx, row, true, now); err != nil {
		return Entry{}, err
	}
	if dry {
		e.Job = JobTemplate{Kind: tmpl.Kind, Queue: tmpl.Queue, Args: tmpl.Args, Priority: tmpl.Priority,
			MaxAttempts: tmpl.MaxAttempts, Timeout: time.Duration(tmpl.TimeoutMS) * time.Millisecond}
		e.CreatedAt, e.UpdatedAt = now, now
		return e, nil
	}
	return e, c.store.CreateCronEntry(ctx, tx, row)
}

// change writes next (validated: sched, tmpl) over row, which tx holds
// locked, and returns the row as it becomes and the fields that differ;
// none: nothing is written. It moves the cursor when the schedule or
// zone changes or the entry resumes, and records what the edit decided
// about occurrences. With dry it computes all that but writes nothing.
func (c *Client) change(ctx context.Context, tx pgx.Tx, row store.CronEntry, next Entry, sched Schedule, tmpl store.CronJob, dry bool) (store.CronEntry, []string, error) {
	changes, err := c.diff(ctx, tx, row, next, tmpl)
	if err != nil || len(changes) == 0 {
		return row, nil, err
	}
	reschedule := next.Schedule != row.Schedule || next.Timezone != row.Timezone
	resume := row.Paused && !next.Paused
	gap := time.Duration(-1) // unchanged
	if reschedule || resume {
		now, err := c.store.Now(ctx)
		if err != nil {
			return row, nil, err
		}
		r, err := rearm(row, next, sched, reschedule, now)
		if err != nil {
			return row, nil, err
		}
		next.NextRunAt, next.DoneAt = r.cursor, nil
		if r.done {
			next.NextRunAt = time.Time{}
			next.DoneAt = timePtr(row.DoneAt)
			if next.DoneAt == nil {
				next.DoneAt = &now
			}
		}
		if reschedule {
			// A new schedule or zone is held to the quota as a new entry
			// is; other edits are not (see WithQuota).
			gap = minGap(sched, now)
			checked := next.row(tmpl)
			checked.MinGap = gap
			if err := c.admit(ctx, tx, checked, false, now); err != nil {
				return row, nil, err
			}
		}
		if !dry {
			if err := c.store.RecordCronEditOccurrences(ctx, tx, row.Tenant, row.Name, r.occurrences); err != nil {
				return row, nil, err
			}
		}
	}
	after := next.row(tmpl)
	after.MinGap = gap
	after.CreatedAt, after.UpdatedAt = row.CreatedAt, row.UpdatedAt
	after.LastJobID, after.LastJobState, after.LastFiredAt, after.LastOccurrenceAt = row.LastJobID, row.LastJobState, row.LastFiredAt, row.LastOccurrenceAt
	after.LastError, after.LastErrorAt, after.ConsecutiveFailures = row.LastError, row.LastErrorAt, row.ConsecutiveFailures
	after.LastFailedJobID, after.LastFailedError, after.LastFailedAt = row.LastFailedJobID, row.LastFailedError, row.LastFailedAt
	if dry {
		after.RetryAt = time.Time{} // the edit would clear it
		return after, changes, nil
	}
	if err := c.store.UpdateCronEntry(ctx, tx, after); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return row, nil, fmt.Errorf("%w: %q", ErrNotFound, row.Name)
		}
		return row, nil, err
	}
	return after, changes, nil
}

// diff names the definition fields in which next differs from row. Args
// are compared as jsonb compares them: the stored text is jsonb's.
func (c *Client) diff(ctx context.Context, q store.DB, row store.CronEntry, next Entry, tmpl store.CronJob) ([]string, error) {
	var out []string
	add := func(differ bool, field string) {
		if differ {
			out = append(out, field)
		}
	}
	add(next.Schedule != row.Schedule, "schedule")
	add(next.Timezone != row.Timezone, "timezone")
	add(tmpl.Kind != row.Job.Kind, "job.kind")
	add(tmpl.Queue != row.Job.Queue, "job.queue")
	same, err := c.store.JSONEqual(ctx, q, tmpl.Args, orEmptyObject(row.Job.Args))
	if err != nil {
		return nil, err
	}
	add(!same, "job.args")
	add(tmpl.Priority != row.Job.Priority, "job.priority")
	add(tmpl.MaxAttempts != row.Job.MaxAttempts, "job.max_attempts")
	add(tmpl.TimeoutMS != row.Job.TimeoutMS, "job.timeout")
	add(next.Missed != row.Missed, "missed")
	add(next.MissedCap != row.MissedCap, "missed_cap")
	add(next.Overlap != row.Overlap, "overlap")
	add(next.Paused != row.Paused, "paused")
	return out, nil
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`{}`)
	}
	return b
}

// firstRun is a new entry's first occurrence: the first fire time after
// now; for a one-shot its instant, which must be after now and within
// MaxAhead.
func firstRun(sched Schedule, spec string, now time.Time) (time.Time, error) {
	if at, ok := oneShotAt(sched); ok {
		return at, checkAhead(at, spec, now)
	}
	next := sched.Next(now)
	if next.IsZero() {
		return next, &ScheduleError{"schedule", fmt.Sprintf("%q does not fire within five years", spec)}
	}
	return next, nil
}

func checkAhead(at time.Time, spec string, now time.Time) error {
	switch {
	case !at.After(now):
		return &ScheduleError{"schedule", fmt.Sprintf("%q is %s, not in the future (now is %s by the database clock); a one-shot entry must be due after it is created",
			spec, at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
	case at.Sub(now) > MaxAhead:
		return &ScheduleError{"schedule", fmt.Sprintf("%q is more than 10 years ahead", spec)}
	}
	return nil
}

// rearmed is where an edit leaves an entry's cursor.
type rearmed struct {
	cursor time.Time
	done   bool
	// occurrences the edit itself decided, to record in the history.
	occurrences []store.CronOccurrence
}

// rearm moves the cursor of row, edited into next, at now: on a new
// schedule or zone (reschedule), or a resume. See Put for the rule.
func rearm(row store.CronEntry, next Entry, sched Schedule, reschedule bool, now time.Time) (rearmed, error) {
	var r rearmed
	floor := now
	if row.LastOccurrenceAt.After(floor) {
		floor = row.LastOccurrenceAt // never again an instant that has its job, even if the clock stepped back
	}
	at, oneShot := oneShotAt(sched)
	done := !row.DoneAt.IsZero()
	if !reschedule {
		// A resume.
		switch {
		case done:
			r.done = true
		case !oneShot:
			r.cursor = sched.Next(floor)
		case at.After(now):
			r.cursor = at
		case next.Missed == MissedSkip:
			// Its time passed while it was paused: under skip it is done
			// without firing; under once or all the scheduler fires it.
			r.done = true
			r.occurrences = []store.CronOccurrence{{ScheduledAt: at, Status: "missed", Count: 1,
				Reason: "missed-fire policy skip: its time passed while the entry was paused"}}
		default:
			r.cursor = at
		}
		return r, nil
	}
	if !row.Paused && !done && !row.NextRunAt.After(now) {
		r.occurrences = replacedOccurrences(row, now)
	}
	switch {
	case !oneShot:
		if r.cursor = sched.Next(floor); r.cursor.IsZero() {
			return r, &ScheduleError{"schedule", fmt.Sprintf("%q does not fire within five years", next.Schedule)}
		}
	case at.After(floor):
		return rearmed{cursor: at, occurrences: r.occurrences}, checkAhead(at, next.Schedule, now)
	case at.Equal(row.LastOccurrenceAt):
		r.done = true // the instant it already fired: done, as it was
	case at.After(now):
		return r, &ScheduleError{"schedule", fmt.Sprintf("%q is %s, not after the entry's last fired occurrence (%s)",
			next.Schedule, at.UTC().Format(time.RFC3339), row.LastOccurrenceAt.UTC().Format(time.RFC3339))}
	default:
		return r, checkAhead(at, next.Schedule, now)
	}
	return r, nil
}

// replacedOccurrences records the old schedule's occurrences that were
// due at now but not yet handled, which a new schedule replaces: one
// "missed" row standing for all of them.
func replacedOccurrences(row store.CronEntry, now time.Time) []store.CronOccurrence {
	first, last, n := row.NextRunAt, row.NextRunAt, 1
	if old, err := Parse(row.Schedule, row.Timezone); err == nil {
		for t := old.Next(first); !t.IsZero() && !t.After(now) && n < maxEnumerate; t = old.Next(t) {
			last, n = t, n+1
		}
	}
	reason := "the schedule changed before the leader handled it"
	if n > 1 {
		reason += fmt.Sprintf(" (%d occurrences, %s to %s)", n, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
	}
	return []store.CronOccurrence{{ScheduledAt: first, Status: "missed", Reason: reason, Count: n}}
}

// lockQuota takes tenant's quota lock for an edit c's quota checks,
// before the edit locks the entry's row: a check (admit) takes it again,
// and edits of one tenant always lock in that order.
func (c *Client) lockQuota(ctx context.Context, tx pgx.Tx, tenant string) error {
	if c.quota == nil {
		return nil
	}
	return c.store.LockCronQuota(ctx, tx, tenant)
}
