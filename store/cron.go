package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlInsertCronEntry       = query("insert_cron_entry")
	sqlUpdateCronEntry       = query("update_cron_entry")
	sqlDeleteCronEntry       = query("delete_cron_entry")
	sqlGetCronEntryForUpdate = query("get_cron_entry_for_update")
	sqlGetCronEntry          = query("get_cron_entry")
	sqlListCronEntries       = query("list_cron_entries")
	sqlDueCronEntries        = query("due_cron_entries")
	sqlNextCronDue           = query("next_cron_due")
	sqlDBNow                 = query("db_now")
	sqlCronLastUnfinished    = query("cron_last_job_unfinished")
	sqlInsertCronJobs        = query("insert_cron_jobs")
	sqlInsertCronOccurrence  = query("insert_cron_occurrences")
	sqlAdvanceCronCursor     = query("advance_cron_cursor")
	sqlCronHistory           = query("cron_history")
	sqlDeleteOldCronOcc      = query("delete_old_cron_occurrences")
	sqlRecordCronError       = query("record_cron_error")
	sqlRecordCronEditOcc     = query("record_cron_edit_occurrences")
	sqlJSONEqual             = query("json_equal")
	sqlLockCronQuota         = query("lock_cron_quota")
	sqlCronTenantLoad        = query("cron_tenant_load")
	sqlCronUnmeasured        = query("cron_unmeasured")
	sqlSetCronMinGap         = query("set_cron_min_gap")
)

// ErrExists is returned when creating something whose name is taken.
var ErrExists = errors.New("already exists")

// ErrCursorMoved means a cron entry's cursor changed under a firing (the
// entry was edited, paused or fired by someone else): nothing was written.
var ErrCursorMoved = errors.New("cron cursor moved")

// CronJob is the job template of a cron entry.
type CronJob struct {
	Kind        string `json:"kind"`
	Queue       string `json:"queue"`
	Priority    int    `json:"priority"`
	MaxAttempts int    `json:"max_attempts"`
	TimeoutMS   int64  `json:"timeout_ms"`
	// Args last: encode writes them as given.
	Args json.RawMessage `json:"args"`
}

// encode is the template as stored. json.Marshal would compact the args
// and escape <, > and & in them; they are written byte for byte instead,
// so that every job the entry fires gets the args as they were sent.
func (j CronJob) encode() []byte {
	args := j.Args
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	j.Args = nil
	b, _ := json.Marshal(j) // ends in "args":null}
	b = b[:len(b)-len("null}")]
	return append(append(b, args...), '}')
}

// CronEntry is one row of gaffer.cron_entries. Zero times are NULLs.
type CronEntry struct {
	Tenant    string
	Name      string
	Schedule  string
	Timezone  string
	Job       CronJob
	Missed    string
	MissedCap int
	Overlap   string
	Paused    bool
	// NextRunAt is the cursor; zero once a one-shot entry is done, at
	// DoneAt.
	NextRunAt time.Time
	DoneAt    time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	// MinGap is the schedule's shortest gap between two fires, as the
	// writer measured it (0: it fires at most once; negative: not
	// measured, an update keeps the one stored). Written, not read back:
	// the quotas sum it (CronTenantLoad).
	MinGap time.Duration

	// Status, written by the scheduler.
	LastJobID           int64
	LastJobState        string // "" when there is no last job, or retention deleted it
	LastFiredAt         time.Time
	LastOccurrenceAt    time.Time
	LastError           string
	LastErrorAt         time.Time
	ConsecutiveFailures int
	RetryAt             time.Time
	// The last of the entry's jobs that ended failed, its last error, and
	// when (zero: none yet).
	LastFailedJobID int64
	LastFailedError string
	LastFailedAt    time.Time
}

func scanCronEntry(row pgx.Row, extra ...any) (CronEntry, error) {
	var e CronEntry
	var job []byte
	var last, failedJob *int64
	var next, done, fired, occ, errAt, retry, failedAt *time.Time
	var lastErr, jobState, failedErr *string
	dest := []any{&e.Tenant, &e.Name, &e.Schedule, &e.Timezone, &job, &e.Missed, &e.MissedCap, &e.Overlap, &e.Paused,
		&next, &last, &e.CreatedAt, &e.UpdatedAt, &done, &fired, &occ, &lastErr, &errAt, &e.ConsecutiveFailures, &retry, &jobState,
		&failedJob, &failedErr, &failedAt}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return e, err
	}
	if err := json.Unmarshal(job, &e.Job); err != nil {
		return e, fmt.Errorf("cron entry %s/%s: bad job template: %w", e.Tenant, e.Name, err)
	}
	if last != nil {
		e.LastJobID = *last
	}
	for _, t := range []struct {
		from *time.Time
		to   *time.Time
	}{{next, &e.NextRunAt}, {done, &e.DoneAt}, {fired, &e.LastFiredAt}, {occ, &e.LastOccurrenceAt}, {errAt, &e.LastErrorAt}, {retry, &e.RetryAt}, {failedAt, &e.LastFailedAt}} {
		if t.from != nil {
			*t.to = *t.from
		}
	}
	if lastErr != nil {
		e.LastError = *lastErr
	}
	if jobState != nil {
		e.LastJobState = *jobState
	}
	if failedJob != nil {
		e.LastFailedJobID = *failedJob
	}
	if failedErr != nil {
		e.LastFailedError = *failedErr
	}
	return e, nil
}

// CreateCronEntry inserts an entry through q (nil: the pool). Errors:
// ErrExists.
func (s *Store) CreateCronEntry(ctx context.Context, q DB, e CronEntry) error {
	job := e.Job.encode()
	var told int64
	err := s.db(q).QueryRow(ctx, sqlInsertCronEntry, e.Tenant, e.Name, e.Schedule, e.Timezone, job, e.Missed,
		e.MissedCap, e.Overlap, e.Paused, e.NextRunAt, gapMS(e.MinGap)).Scan(&told)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("create cron entry %q: %w", e.Name, err)
	}
	return nil
}

// UpdateCronEntry replaces an entry's fields (its name and tenant stay):
// its definition, its cursor, and DoneAt (a done entry has no cursor).
// It clears a failing entry's backoff. Errors: ErrNotFound.
func (s *Store) UpdateCronEntry(ctx context.Context, q DB, e CronEntry) error {
	job := e.Job.encode()
	var told int64
	err := s.db(q).QueryRow(ctx, sqlUpdateCronEntry, e.Tenant, e.Name, e.Schedule, e.Timezone, job, e.Missed,
		e.MissedCap, e.Overlap, e.Paused, nullTime(e.NextRunAt), nullTime(e.DoneAt), gapMS(e.MinGap)).Scan(&told)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("update cron entry %q: %w", e.Name, err)
	}
	return nil
}

// DeleteCronEntry deletes an entry (its history stays until retention).
// Errors: ErrNotFound.
func (s *Store) DeleteCronEntry(ctx context.Context, tenant, name string) error {
	var told int64
	err := s.pool.QueryRow(ctx, sqlDeleteCronEntry, tenant, name).Scan(&told)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete cron entry %q: %w", name, err)
	}
	return nil
}

// GetCronEntry returns one entry. Errors: ErrNotFound.
func (s *Store) GetCronEntry(ctx context.Context, tenant, name string) (CronEntry, error) {
	e, err := scanCronEntry(s.pool.QueryRow(ctx, sqlGetCronEntry, tenant, name))
	if err != nil {
		return e, notFound(err)
	}
	return e, nil
}

// GetCronEntryForUpdate reads an entry in tx and locks it until tx ends.
func (s *Store) GetCronEntryForUpdate(ctx context.Context, tx DB, tenant, name string) (CronEntry, error) {
	e, err := scanCronEntry(tx.QueryRow(ctx, sqlGetCronEntryForUpdate, tenant, name))
	if err != nil {
		return e, notFound(err)
	}
	return e, nil
}

// ListCronEntries lists entries by (tenant, name), after the cursor name
// (within tenant) when given. An empty tenant lists every tenant's.
func (s *Store) ListCronEntries(ctx context.Context, tenant, afterTenant, afterName string, limit int) ([]CronEntry, error) {
	rows, err := s.pool.Query(ctx, sqlListCronEntries, nullString(tenant), afterTenant, nullString(afterName), clampLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("list cron entries: %w", err)
	}
	defer rows.Close()
	var out []CronEntry
	for rows.Next() {
		e, err := scanCronEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// CronDueWindow is how many of the earliest due entries DueCronEntries
// deals its turns among: a read costs the same however many are due.
const CronDueWindow = 2000

// DueCronEntries returns up to limit unpaused entries whose cursor has
// passed, and the database's now; none of the tenants in skip. The order
// is round-robin by tenant among the CronDueWindow earliest due entries:
// every tenant's earliest (earliest first), then every tenant's second,
// and so on.
func (s *Store) DueCronEntries(ctx context.Context, limit int, skip []string) ([]CronEntry, time.Time, error) {
	rows, err := s.pool.Query(ctx, sqlDueCronEntries, limit, nonNil(skip), CronDueWindow)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("due cron entries: %w", err)
	}
	defer rows.Close()
	var out []CronEntry
	var now time.Time
	for rows.Next() {
		e, err := scanCronEntry(rows, &now)
		if err != nil {
			return nil, now, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, now, err
	}
	if len(out) == 0 {
		now, err = s.Now(ctx)
	}
	return out, now, err
}

// NextCronDue returns how long until the earliest cursor of an unpaused
// entry of a tenant not in skip, by the database clock (negative when
// overdue), and false when there is none.
func (s *Store) NextCronDue(ctx context.Context, skip []string) (time.Duration, bool, error) {
	var ms *int64
	if err := s.pool.QueryRow(ctx, sqlNextCronDue, nonNil(skip)).Scan(&ms); err != nil {
		return 0, false, fmt.Errorf("next cron due: %w", err)
	}
	if ms == nil {
		return 0, false, nil
	}
	return time.Duration(*ms) * time.Millisecond, true, nil
}

// Now returns the database's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, sqlDBNow).Scan(&now); err != nil {
		return now, fmt.Errorf("read database clock: %w", err)
	}
	return now, nil
}

// TxNow is the database's clock as q's transaction sees it: the instant
// the transaction began, the now() of every statement in it.
func (s *Store) TxNow(ctx context.Context, q DB) (time.Time, error) {
	var now time.Time
	if err := s.db(q).QueryRow(ctx, sqlDBNow).Scan(&now); err != nil {
		return now, fmt.Errorf("read database clock: %w", err)
	}
	return now, nil
}

// MaxCronErrorLen bounds the scheduler error kept on an entry (bytes).
const MaxCronErrorLen = 2048

// RecordCronError keeps err as the entry's last scheduler error, counts a
// failure, and holds the entry back for a backoff, through q (the
// leader's fenced transaction). It is a no-op, returning 0, when the
// entry was changed (updated_at moved) or deleted since it was read. It
// returns the entry's consecutive failures.
func (s *Store) RecordCronError(ctx context.Context, q DB, tenant, name string, updatedAt time.Time, msg string) (int, error) {
	var n int
	err := s.db(q).QueryRow(ctx, sqlRecordCronError, tenant, name, updatedAt, capText(strings.ToValidUTF8(strings.ReplaceAll(msg, "\x00", ""), "\uFFFD"), MaxCronErrorLen)).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("record cron error for %q: %w", name, err)
	}
	return n, nil
}

// JSONEqual reports whether a and b hold the same JSON value, as jsonb
// compares them (key order, spacing and number spelling aside).
func (s *Store) JSONEqual(ctx context.Context, q DB, a, b []byte) (bool, error) {
	var eq bool
	if err := s.db(q).QueryRow(ctx, sqlJSONEqual, string(a), string(b)).Scan(&eq); err != nil {
		return false, fmt.Errorf("compare JSON: %w", err)
	}
	return eq, nil
}

// gapMS is a measured gap in ms, or NULL when not measured.
func gapMS(d time.Duration) *int64 {
	if d < 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// LockCronQuota locks tenant's cron quota until tx ends (as
// CronTenantLoad does; the lock is re-entrant), for an edit that must
// take it before an entry's row lock.
func (s *Store) LockCronQuota(ctx context.Context, tx DB, tenant string) error {
	if _, err := tx.Exec(ctx, sqlLockCronQuota, tenant); err != nil {
		return fmt.Errorf("lock the cron quota of %q: %w", tenant, err)
	}
	return nil
}

// nonNil makes a nil list an empty array: "x <> ALL (NULL)" is NULL.
func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// CronLoad is what a tenant's cron entries may cost.
type CronLoad struct {
	Entries int
	// FiresPerMinute sums each entry's fastest rate (one fire per its
	// shortest gap), leaving out Unmeasured.
	FiresPerMinute float64
	// Unmeasured are entries written before their gap was recorded: the
	// caller measures them (and may record it, SetCronMinGap).
	Unmeasured []CronEntry // Name, Schedule and Timezone only
}

// CronTenantLoad locks tenant's quota until tx ends — so that the edits
// a quota checks are serialized, per tenant — and returns the load of
// its entries other than except. Call it before locking any entry's row
// in tx.
func (s *Store) CronTenantLoad(ctx context.Context, tx DB, tenant, except string) (CronLoad, error) {
	var l CronLoad
	if _, err := tx.Exec(ctx, sqlLockCronQuota, tenant); err != nil {
		return l, fmt.Errorf("lock the cron quota of %q: %w", tenant, err)
	}
	if err := tx.QueryRow(ctx, sqlCronTenantLoad, tenant, except).Scan(&l.Entries, &l.FiresPerMinute); err != nil {
		return l, fmt.Errorf("cron load of %q: %w", tenant, err)
	}
	rows, err := tx.Query(ctx, sqlCronUnmeasured, tenant, except)
	if err != nil {
		return l, fmt.Errorf("cron load of %q: %w", tenant, err)
	}
	defer rows.Close()
	for rows.Next() {
		e := CronEntry{Tenant: tenant}
		if err := rows.Scan(&e.Name, &e.Schedule, &e.Timezone); err != nil {
			return l, err
		}
		l.Unmeasured = append(l.Unmeasured, e)
	}
	return l, rows.Err()
}

// SetCronMinGap records the gap measured for an entry that had none,
// unless its schedule or zone changed meanwhile.
func (s *Store) SetCronMinGap(ctx context.Context, tx DB, e CronEntry, gap time.Duration) error {
	if _, err := tx.Exec(ctx, sqlSetCronMinGap, e.Tenant, e.Name, e.Schedule, e.Timezone, gap.Milliseconds()); err != nil {
		return fmt.Errorf("record the gap of cron entry %q: %w", e.Name, err)
	}
	return nil
}
