package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Missed-fire policies: what to do with occurrences that could not be
// fired on time (no leader could be proven — etcd down, the cluster
// stopped — for longer than the misfire grace).
const (
	// MissedSkip records them as missed and fires none. The default.
	MissedSkip = "skip"
	// MissedOnce fires one job standing for all of them.
	MissedOnce = "once"
	// MissedAll fires each of them, up to MissedCap (the most recent).
	MissedAll = "all"
)

// Overlap policies.
const (
	// OverlapAllow fires whatever state the previous occurrence's job is
	// in. The default.
	OverlapAllow = "allow"
	// OverlapSkip records an occurrence as skipped while the previous
	// occurrence's job is unfinished.
	OverlapSkip = "skip"
)

// DefaultMissedCap bounds catch-up under MissedAll.
const DefaultMissedCap = 100

// JobTemplate is the job each occurrence enqueues: the same fields as an
// enqueue request.
type JobTemplate struct {
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue,omitempty"`
	Args        json.RawMessage `json:"args,omitempty"`
	Priority    int             `json:"priority,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Timeout     time.Duration   `json:"-"`
}

// Cursor is where a listing resumes: the tenant and name of the previous
// page's last entry. The zero Cursor starts from the beginning.
type Cursor struct{ Tenant, Name string }

// Entry is a cron entry: its definition (what Create and Put take) and
// its status (what the scheduler wrote; Create and Put ignore it).
type Entry struct {
	Tenant    string      `json:"tenant"`
	Name      string      `json:"name"`
	Schedule  string      `json:"schedule"`
	Timezone  string      `json:"timezone"`
	Job       JobTemplate `json:"job"`
	Missed    string      `json:"missed"`
	MissedCap int         `json:"missed_cap"`
	Overlap   string      `json:"overlap"`
	Paused    bool        `json:"paused"`
	// NextRunAt is the next scheduled instant not yet handled; zero once
	// the entry is done.
	NextRunAt time.Time `json:"next_run_at"`
	// Done: a one-shot ("@at") entry whose one occurrence was handled —
	// fired, or missed under its policy — at DoneAt. It never fires
	// again unless its schedule changes.
	Done      bool       `json:"done"`
	DoneAt    *time.Time `json:"done_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	Status
}

// Status is what the scheduler last did with an entry. Triggers (by hand)
// do not change it.
type Status struct {
	// LastJobID is the job of the last occurrence that made one,
	// LastOccurrenceAt the instant it was scheduled for and LastFiredAt
	// when the leader made it (the database clock).
	LastJobID        int64      `json:"last_job_id,omitempty"`
	LastOccurrenceAt *time.Time `json:"last_occurrence_at,omitempty"`
	LastFiredAt      *time.Time `json:"last_fired_at,omitempty"`
	// LastJobState is that job's state now; empty once retention deleted
	// the job.
	LastJobState string `json:"last_job_state,omitempty"`
	// LastError is the last error the scheduler met firing the entry (a
	// template the job insert refuses, a schedule that no longer parses),
	// at LastErrorAt. It stays after the entry recovers;
	// ConsecutiveFailures, the firings that failed since the last one that
	// worked, says whether it still fails.
	LastError           string     `json:"last_error,omitempty"`
	LastErrorAt         *time.Time `json:"last_error_at,omitempty"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	// RetryAt: a failing entry is tried again no sooner than this (a
	// backoff from 1s to 5m); an edit clears it.
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// LastFailedJobID is the last of the entry's jobs that ended failed
	// (its attempts spent, a permanent error, lost on its last attempt),
	// LastFailedError that job's last error and LastFailedAt when: why
	// the entry's work fails, kept after later jobs succeed.
	LastFailedJobID int64      `json:"last_failed_job_id,omitempty"`
	LastFailedError string     `json:"last_failed_error,omitempty"`
	LastFailedAt    *time.Time `json:"last_failed_at,omitempty"`
}

// Errors.
var (
	ErrNotFound = errors.New("cron entry not found")
	ErrExists   = errors.New("a cron entry with that name already exists")
)

// NamePattern is what an entry's name matches (at most 128 bytes); the
// API checks {name} in its paths against the same text.
const NamePattern = `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`

var entryName = regexp.MustCompile(NamePattern)

// validate fills defaults and checks every field; the error names the
// field. It returns the parsed schedule.
func (e *Entry) validate(kinds *job.Registry) (Schedule, store.CronJob, error) {
	if e.Tenant == "" {
		e.Tenant = job.DefaultTenant
	}
	if e.Missed == "" {
		e.Missed = MissedSkip
	}
	if e.MissedCap == 0 {
		e.MissedCap = DefaultMissedCap
	}
	if e.Overlap == "" {
		e.Overlap = OverlapAllow
	}
	if e.Timezone == "" {
		e.Timezone = "UTC"
	}
	if err := job.ValidateName("tenant", e.Tenant); err != nil {
		return nil, store.CronJob{}, err
	}
	if !entryName.MatchString(e.Name) {
		return nil, store.CronJob{}, &job.ValidationError{Field: "name", Message: fmt.Sprintf("%q is not a valid name: use 1-128 letters, digits, '_', '.', ':' or '-'", e.Name)}
	}
	switch e.Missed {
	case MissedSkip, MissedOnce, MissedAll:
	default:
		return nil, store.CronJob{}, &job.ValidationError{Field: "missed", Message: fmt.Sprintf("must be skip, once or all, got %q", e.Missed)}
	}
	if e.MissedCap < 1 || e.MissedCap > 10000 {
		return nil, store.CronJob{}, &job.ValidationError{Field: "missed_cap", Message: fmt.Sprintf("must be between 1 and 10000, got %d", e.MissedCap)}
	}
	switch e.Overlap {
	case OverlapAllow, OverlapSkip:
	default:
		return nil, store.CronJob{}, &job.ValidationError{Field: "overlap", Message: fmt.Sprintf("must be allow or skip, got %q", e.Overlap)}
	}
	sched, err := Parse(e.Schedule, e.Timezone)
	if err != nil {
		return nil, store.CronJob{}, err
	}
	p, err := job.Request{Kind: e.Job.Kind, Args: e.Job.Args, Tenant: e.Tenant, Queue: e.Job.Queue, Priority: e.Job.Priority,
		MaxAttempts: e.Job.MaxAttempts, Timeout: e.Job.Timeout}.Check()
	if err == nil {
		err = kinds.CheckRequest(&p)
	}
	if err != nil {
		var ve *job.ValidationError
		if errors.As(err, &ve) {
			return nil, store.CronJob{}, &job.ValidationError{Field: "job." + ve.Field, Message: ve.Message, Code: ve.Code}
		}
		return nil, store.CronJob{}, err
	}
	args := p.Args.(json.RawMessage) // Check encodes them
	e.Job.Queue, e.Job.Args, e.Job.MaxAttempts = p.Queue, args, p.MaxAttempts
	return sched, store.CronJob{Kind: p.Kind, Queue: p.Queue, Args: args, Priority: p.Priority,
		MaxAttempts: p.MaxAttempts, TimeoutMS: p.Timeout.Milliseconds()}, nil
}

func (e Entry) row(tmpl store.CronJob) store.CronEntry {
	r := store.CronEntry{Tenant: e.Tenant, Name: e.Name, Schedule: e.Schedule, Timezone: e.Timezone, Job: tmpl,
		Missed: e.Missed, MissedCap: e.MissedCap, Overlap: e.Overlap, Paused: e.Paused, NextRunAt: e.NextRunAt, MinGap: -1}
	if e.DoneAt != nil {
		r.DoneAt = *e.DoneAt
	}
	return r
}

func fromRow(r store.CronEntry) Entry {
	return Entry{Tenant: r.Tenant, Name: r.Name, Schedule: r.Schedule, Timezone: r.Timezone,
		Job: JobTemplate{Kind: r.Job.Kind, Queue: r.Job.Queue, Args: r.Job.Args, Priority: r.Job.Priority,
			MaxAttempts: r.Job.MaxAttempts, Timeout: time.Duration(r.Job.TimeoutMS) * time.Millisecond},
		Missed: r.Missed, MissedCap: r.MissedCap, Overlap: r.Overlap, Paused: r.Paused, NextRunAt: r.NextRunAt,
		Done: !r.DoneAt.IsZero(), DoneAt: timePtr(r.DoneAt), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Status: Status{LastJobID: r.LastJobID, LastOccurrenceAt: timePtr(r.LastOccurrenceAt), LastFiredAt: timePtr(r.LastFiredAt),
			LastJobState: r.LastJobState, LastError: r.LastError, LastErrorAt: timePtr(r.LastErrorAt),
			ConsecutiveFailures: r.ConsecutiveFailures, RetryAt: timePtr(r.RetryAt),
			LastFailedJobID: r.LastFailedJobID, LastFailedError: r.LastFailedError, LastFailedAt: timePtr(r.LastFailedAt)}}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Client creates, changes and inspects cron entries. It needs only
// PostgreSQL; the leader's Scheduler is woken by every change.
type Client struct {
	store *store.Store
	kinds *job.Registry // nil: no kind-specific checks
	quota *Quota        // nil: an operator's client, no quota
}

// WithKinds returns a client that also checks each entry's job template
// with the Check its kind has in r (see job.KindOptions.Check).
func (c *Client) WithKinds(r *job.Registry) *Client {
	cp := *c
	cp.kinds = r
	return &cp
}

// NewClient returns a client on st.
func NewClient(pool *pgxpool.Pool) *Client { return &Client{store: store.New(pool)} }

// Create validates e and stores it; its first occurrence is the first
// fire time after now (by the database clock) — for a one-shot, its
// instant, which must be in the future and within MaxAhead. Errors: a
// *job.ValidationError or *ScheduleError naming the field, a *QuotaError
// (a client WithQuota), ErrExists.
func (c *Client) Create(ctx context.Context, e Entry) (Entry, error) {
	sched, tmpl, err := e.validate(c.kinds)
	if err != nil {
		return Entry{}, err
	}
	now, err := c.store.Now(ctx)
	if err != nil {
		return Entry{}, err
	}
	if e.NextRunAt, err = firstRun(sched, e.Schedule, now); err != nil {
		return Entry{}, err
	}
	e.DoneAt = nil
	row := e.row(tmpl)
	row.MinGap = minGap(sched, now)
	tx, err := c.store.Begin(ctx)
	if err != nil {
		return Entry{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := c.admit(ctx, tx, row, true, now); err != nil {
		return Entry{}, err
	}
	if err := c.store.CreateCronEntry(ctx, tx, row); err != nil {
		if errors.Is(err, store.ErrExists) {
			return Entry{}, fmt.Errorf("%w: %q", ErrExists, e.Name)
		}
		return Entry{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Entry{}, err
	}
	return c.Get(ctx, e.Tenant, e.Name)
}

// Get returns an entry. Errors: ErrNotFound.
func (c *Client) Get(ctx context.Context, tenant, name string) (Entry, error) {
	r, err := c.store.GetCronEntry(ctx, tenantOrDefault(tenant), name)
	if errors.Is(err, store.ErrNotFound) {
		return Entry{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Entry{}, err
	}
	return fromRow(r), nil
}

// List returns entries by name, after the cursor name when given. An
// empty tenant lists all tenants'.
func (c *Client) List(ctx context.Context, tenant string, after Cursor, limit int) ([]Entry, error) {
	rows, err := c.store.ListCronEntries(ctx, tenant, after.Tenant, after.Name, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Delete removes an entry; its history stays until retention. Errors:
// ErrNotFound.
func (c *Client) Delete(ctx context.Context, tenant, name string) error {
	err := c.store.DeleteCronEntry(ctx, tenantOrDefault(tenant), name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return err
}

// Trigger enqueues the entry's job now, outside its schedule (recorded in
// its history as "triggered"; overlap does not apply), and returns the
// job's id. It works on a paused entry too.
func (c *Client) Trigger(ctx context.Context, tenant, name string) (int64, error) {
	tx, err := c.store.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	id, err := c.TriggerTx(ctx, tx, tenant, name)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return id, nil
}

// TriggerTx is Trigger within the caller's transaction: the job and the
// occurrence exist if and only if tx commits.
func (c *Client) TriggerTx(ctx context.Context, tx pgx.Tx, tenant, name string) (int64, error) {
	if tx == nil {
		return 0, errors.New("trigger: nil transaction")
	}
	e, err := c.store.GetCronEntryForUpdate(ctx, tx, tenantOrDefault(tenant), name)
	if errors.Is(err, store.ErrNotFound) {
		return 0, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return 0, err
	}
	now, err := c.store.TxNow(ctx, tx)
	if err != nil {
		return 0, err
	}
	occ, err := c.store.FireCron(ctx, tx, store.CronFiring{Tenant: e.Tenant, Name: e.Name, Job: e.Job,
		Occurrences: []store.CronOccurrence{{ScheduledAt: now, Status: "triggered", Reason: "triggered by hand"}}})
	if err != nil {
		return 0, err
	}
	if len(occ) != 1 || occ[0].JobID == 0 {
		return 0, errors.New("trigger: no job was made")
	}
	return occ[0].JobID, nil
}

// NextTimes returns the entry's next n fire times: from its cursor, or
// from now if it is paused (as it would resume). A one-shot has one, its
// instant, until it is done; a done entry none.
func (c *Client) NextTimes(ctx context.Context, tenant, name string, n int) ([]time.Time, error) {
	if n < 1 || n > 1000 {
		return nil, &job.ValidationError{Field: "n", Message: fmt.Sprintf("must be between 1 and 1000, got %d", n)}
	}
	e, err := c.Get(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	if e.Done {
		return []time.Time{}, nil
	}
	sched, err := Parse(e.Schedule, e.Timezone)
	if err != nil {
		return nil, err
	}
	if at, ok := oneShotAt(sched); ok {
		return []time.Time{at}, nil
	}
	if e.Paused {
		now, err := c.store.Now(ctx)
		if err != nil {
			return nil, err
		}
		return NextN(sched, now, n), nil
	}
	return append([]time.Time{e.NextRunAt}, NextN(sched, e.NextRunAt, n-1)...), nil
}

// Occurrence is one scheduled instant and what became of it.
type Occurrence struct {
	ScheduledAt time.Time
	// Status is "fired", "skipped" (overlap), "missed" (missed-fire
	// policy) or "triggered" (by hand).
	Status     string
	Reason     string
	Count      int // occurrences a "missed" row stands for
	RecordedAt time.Time
	// Epoch is the leader epoch that recorded it.
	Epoch int64
	JobID int64
}

// History returns an entry's occurrences, newest first, before the
// instant given (zero: the newest).
func (c *Client) History(ctx context.Context, tenant, name string, before time.Time, limit int) ([]Occurrence, error) {
	rows, err := c.store.CronHistory(ctx, tenantOrDefault(tenant), name, before, limit)
	out := make([]Occurrence, len(rows))
	for i, r := range rows {
		out[i] = Occurrence(r)
	}
	return out, err
}

func tenantOrDefault(t string) string {
	if t == "" {
		return job.DefaultTenant
	}
	return t
}
