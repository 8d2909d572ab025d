package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Job is one row of gaffer.jobs.
type Job struct {
	ID          int64
	Tenant      string
	Kind        string
	Queue       string
	State       string
	Priority    int
	Attempt     int
	MaxAttempts int
	// UncountedAttempts are the attempts that did not count against
	// MaxAttempts (snoozes, releases: each raised MaxAttempts by one).
	UncountedAttempts int
	Timeout           time.Duration
	RunAt             time.Time
	CreatedAt         time.Time
	AttemptedAt       *time.Time
	FinalizedAt       *time.Time
	LeaseToken        int64
	LeaseExpiresAt    *time.Time
	CancelRequested   bool
	Node              string
	UniqueKey         string
	ReplayOf          int64
	Args              json.RawMessage
	Result            json.RawMessage
	Errors            json.RawMessage
	// CronEntry and CronAt name the cron occurrence that made the job.
	CronEntry string
	CronAt    *time.Time
	// WorkflowRun and Step name the workflow step the job runs; Inputs are
	// its dependencies' results, {"step": result}. A step started since
	// migration 0034 carries them by reference (InputsFrom: the jobs its
	// dependencies followed when it started), and Claim and GetJob read
	// them from the run's steps into Inputs; ListJobs leaves Inputs out.
	WorkflowRun int64
	Step        string
	Inputs      json.RawMessage
	InputsFrom  []int64
	// FairnessKey and Tenant are the job's fairness unit; LimitKey is the
	// key limits with key_from "limit_key" count it under.
	FairnessKey string
	LimitKey    string
	// TraceParent and TraceState are the W3C trace context the job was
	// enqueued in ("" for none), in canonical form.
	TraceParent string
	TraceState  string
	// SequenceKey names the sequence the job runs in ("" for none);
	// SequenceHalt: its failure halts the sequence (on_failure halt).
	SequenceKey  string
	SequenceHalt bool
	// UniqueWindow: UniqueKey is held over a window (unique_window_key);
	// DebounceKey is a debounced job's key, DebounceUntil the latest its
	// run_at may move to (nil: no cap). Only GetJob reads these.
	UniqueWindow  bool
	DebounceKey   string
	DebounceUntil *time.Time
	// Tags are the job's tags (nil: none), in the order enqueued.
	Tags []string
	// Progress is the last progress an attempt reported; only GetJob
	// reads it.
	Progress *Progress
}

// Progress is what a running attempt last reported of how far it got.
type Progress struct {
	Percent float64
	Message string
	// Attempt is the attempt that reported it; At is when (database
	// clock).
	Attempt int
	At      time.Time
}

// Lease names one attempt of one job: the compare-and-set key of every
// write made on behalf of a running attempt.
type Lease struct {
	ID      int64
	Attempt int
	Token   int64
}

// InsertParams is a validated job to insert.
type InsertParams struct {
	Tenant      string
	Kind        string
	Queue       string
	Priority    int
	MaxAttempts int
	Timeout     time.Duration
	// RunAt, when non-zero, is when the job becomes due; zero means the
	// database's now(). Delay is added to it.
	RunAt     time.Time
	Delay     time.Duration
	UniqueKey string
	Args      json.RawMessage
	// FairnessKey divides a tenant's jobs of a queue into units that
	// claims serve in turn ("" for one unit per tenant).
	FairnessKey string
	// LimitKey is counted by limits keyed on it ("" for none).
	LimitKey string
	// TraceParent and TraceState are the W3C trace context the job was
	// enqueued in, already validated and bounded ("" for none).
	TraceParent string
	TraceState  string
	// UniqueStates and UniqueFor make UniqueKey a uniqueness window
	// (InsertJob says how); both empty: the key holds while an unfinished
	// job holds it, as ever.
	UniqueStates []string
	UniqueFor    time.Duration
	// DebounceKey, when set, makes the enqueue a trailing debounce
	// (InsertJob says how): due DebounceWindow after the last enqueue of
	// the key, but no later than DebounceMaxWait (0: no cap) after the
	// first.
	DebounceKey     string
	DebounceWindow  time.Duration
	DebounceMaxWait time.Duration
	// SequenceKey, when set, enqueues the job into that sequence of its
	// tenant (store/schema/sequences.sql): it runs after every job
	// enqueued into the sequence before it has ended. SequenceHalt: its
	// failure halts the sequence.
	SequenceKey  string
	SequenceHalt bool
	// Tags label the job for search (nil: none; never empty when set).
	// Validated by the caller; jobs_tags_check bounds them all the same.
	Tags []string
	// Batch, when not 0, enqueues the job into that open batch of the
	// tenant (store/batches.go).
	Batch int64
}

// Windowed reports whether p's unique key has a window.
func (p InsertParams) Windowed() bool { return len(p.UniqueStates) > 0 || p.UniqueFor > 0 }

// ErrWindowIsolation: an enqueue with a uniqueness window was asked of a
// transaction above READ COMMITTED, whose snapshot could miss the job a
// concurrent enqueue of the key just committed.
var ErrWindowIsolation = errors.New("an enqueue with a uniqueness window needs a READ COMMITTED transaction")

// ErrWindowInBatch: InsertJobs does not take uniqueness windows or
// debounce keys (each needs its key's own statements: InsertJob, one by
// one).
var ErrWindowInBatch = errors.New("a batch enqueue takes no uniqueness window or debounce: enqueue such jobs one at a time")

// ErrSequenceWithKey: a job entering a sequence takes no unique key or
// debounce key (an enqueue that answers another job must not take the
// sequence's turn first).
var ErrSequenceWithKey = errors.New("a job in a sequence takes no unique key or debounce")

// InsertResult is the job an insert made, or the unfinished job that
// already held its unique key (Existing true), or the not-yet-started job
// of its debounce key that it updated (Debounced true).
type InsertResult struct {
	Job       Job
	Existing  bool
	Debounced bool
}

var (
	sqlInsertJob            = query("insert_job")
	sqlInsertJobTagged      = query("insert_job_tagged")
	sqlGetByUniqueKey       = query("get_unfinished_by_unique_key")
	sqlLockUniqueWindow     = query("lock_unique_window")
	sqlInsertJobWindowed    = query("insert_job_windowed")
	sqlInsertJobDebounced   = query("insert_job_debounced")
	sqlNotifyQueues         = query("notify_queues")
	sqlInsertJobsUnnest     = query("insert_jobs_unnest")
	sqlInsertJobsUnnestTag  = query("insert_jobs_unnest_tagged")
	sqlCompleteJobs         = query("complete_jobs")
	sqlFailJob              = query("fail_job")
	sqlSnoozeJob            = query("snooze_job")
	sqlCancelRunningJob     = query("cancel_running_job")
	sqlHeartbeatJobs        = query("heartbeat_jobs")
	sqlReleaseJobs          = query("release_jobs")
	sqlLostClaims           = query("lost_claims")
	sqlCancelRequestedAmong = query("cancel_requested_among")
	sqlRescueJobs           = query("rescue_jobs")
	sqlRequestCancel        = query("request_cancel")
	sqlGetJob               = query("get_job")
	sqlDeleteFinishedJobs   = query("delete_finished_jobs")
)

func scanJob(row pgx.Row, extra ...any) (Job, error) {
	return newJobScanner(extra...).scan(row)
}

// jobScanner reads job rows (jobColumns, then any extra destinations)
// into destinations it reuses from row to row: a claim decodes a claim
// batch of rows at once, and fresh destinations per row, pgx's
// reflection over pointers to pointers, and a JSON parse of every JSON
// column (pgx unmarshals into a json.RawMessage) were a quarter of the
// node's CPU in bench backlog. JSON columns are copied as they come.
type jobScanner struct {
	j         Job
	priority  int16
	timeoutMS int64
	args      []byte
	result    []byte
	errors    []byte
	inputs    []byte
	from      []int64
	tags      []string

	attemptedAt, finalizedAt, leaseExpiresAt, cronAt                    pgtype.Timestamptz
	token, replayOf, run                                                pgtype.Int8
	node, uniqueKey, cronEntry, step, limitKey, traceParent, traceState pgtype.Text
	sequenceKey                                                         pgtype.Text

	dest []any
}

func newJobScanner(extra ...any) *jobScanner {
	s := &jobScanner{}
	j := &s.j
	s.dest = append([]any{&j.ID, &j.Tenant, &j.Kind, &j.Queue, &j.State, &s.priority, &j.Attempt, &j.MaxAttempts,
		&s.timeoutMS, &j.RunAt, &j.CreatedAt, &s.attemptedAt, &s.finalizedAt, &s.token,
		&s.leaseExpiresAt, &j.CancelRequested, &s.node, &s.uniqueKey, &s.replayOf, &s.args, &s.result, &s.errors,
		&s.cronEntry, &s.cronAt, &s.run, &s.step, &s.inputs, &j.FairnessKey, &s.limitKey,
		&s.traceParent, &s.traceState, &s.from, &j.UncountedAttempts, &s.sequenceKey, &j.SequenceHalt, &s.tags}, extra...)
	return s
}

func (s *jobScanner) scan(row pgx.Row) (Job, error) {
	s.j, s.from, s.tags = Job{}, nil, nil
	if err := row.Scan(s.dest...); err != nil {
		return Job{}, err
	}
	j := s.j
	j.Priority = int(s.priority)
	j.Timeout = time.Duration(s.timeoutMS) * time.Millisecond
	j.AttemptedAt, j.FinalizedAt = timePtr(s.attemptedAt), timePtr(s.finalizedAt)
	j.LeaseExpiresAt, j.CronAt = timePtr(s.leaseExpiresAt), timePtr(s.cronAt)
	j.LeaseToken, j.ReplayOf, j.WorkflowRun = s.token.Int64, s.replayOf.Int64, s.run.Int64
	j.Node, j.UniqueKey, j.CronEntry, j.Step = s.node.String, s.uniqueKey.String, s.cronEntry.String, s.step.String
	j.LimitKey, j.TraceParent, j.TraceState = s.limitKey.String, s.traceParent.String, s.traceState.String
	j.SequenceKey = s.sequenceKey.String
	j.Args, j.Result, j.Errors, j.Inputs = jsonValue(s.args), jsonValue(s.result), jsonValue(s.errors), jsonValue(s.inputs)
	if s.from != nil {
		// pgx reuses the slice's array for the next row.
		j.InputsFrom = append([]int64{}, s.from...)
	}
	if len(s.tags) > 0 {
		j.Tags = append([]string{}, s.tags...)
	}
	return j, nil
}

func timePtr(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// jsonValue is a JSON column's text as a json.RawMessage (nil for NULL):
// the value without the white space a json column keeps around it, as
// decoding into a json.RawMessage gave. pgx gives each row its own copy.
func jsonValue(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return bytes.TrimSpace(b)
}

func collectJobs(rows pgx.Rows, err error) ([]Job, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Job
	s := newJobScanner()
	for rows.Next() {
		j, err := s.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullTags is tags as a text[] parameter: NULL when there are none, so
// that the job stays out of jobs_tags_idx.
func nullTags(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	return tags
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// InsertJob inserts one job through q (the caller's transaction, or the
// pool when q is nil) and wakes the queue's workers when the job is due.
// With a unique key held by an unfinished job, nothing is inserted and
// that job is returned with Existing set.
//
// With a window (p.Windowed) the key is held by the newest job of the
// tenant enqueued with a window under that key which is in one of
// p.UniqueStates (if any) and was enqueued less than p.UniqueFor ago (if
// set); jobs enqueued without a window are not looked at, nor do they
// look at these. See insertJobWindowed.
func (s *Store) InsertJob(ctx context.Context, q DB, p InsertParams) (InsertResult, error) {
	if p.SequenceKey != "" && (p.UniqueKey != "" || p.DebounceKey != "") {
		return InsertResult{}, ErrSequenceWithKey
	}
	if p.Batch != 0 {
		return s.insertJobInBatch(ctx, q, p)
	}
	if p.Windowed() {
		return s.insertJobWindowed(ctx, q, p)
	}
	if p.DebounceKey != "" {
		return s.insertJobDebounced(ctx, q, p)
	}
	db := s.db(q)
	// A job without tags runs insert_job as it was; one with tags its
	// twin with the tags column.
	sql, args := sqlInsertJob, []any{p.Tenant, p.Kind, p.Queue, int16(p.Priority),
		p.MaxAttempts, p.Timeout.Milliseconds(), nullTime(p.RunAt), p.Delay.Milliseconds(),
		nullString(p.UniqueKey), p.Args, p.FairnessKey, nullString(p.LimitKey),
		nullString(p.TraceParent), nullString(p.TraceState), nullString(p.SequenceKey), p.SequenceHalt}
	if len(p.Tags) > 0 {
		sql, args = sqlInsertJobTagged, append(args, p.Tags)
	}
	for range 10 {
		var woke int64
		j, err := scanJob(db.QueryRow(ctx, sql, args...), &woke)
		if err == nil {
			return InsertResult{Job: j}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return InsertResult{}, fmt.Errorf("insert job: %w", err)
		}
		// The unique key is taken. Find the holder; if it finished in the
		// meantime, the key is free again and the insert is retried.
		j, err = scanJob(db.QueryRow(ctx, sqlGetByUniqueKey, p.Tenant, p.UniqueKey))
		if err == nil {
			return InsertResult{Job: j, Existing: true}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return InsertResult{}, fmt.Errorf("find job holding unique key: %w", err)
		}
	}
	return InsertResult{}, fmt.Errorf("insert job: unique key %q kept changing hands", p.UniqueKey)
}

// insertJobWindowed is InsertJob for a key with a window. No unique
// index can say it (a window lets a new job in beside a holder whose
// period passed, or whose state it leaves out), so a transaction-scoped
// advisory lock per (tenant, key) serialises the enqueues of a key, and
// the holder is looked for in the statement after the lock, whose
// snapshot sees every job an enqueue of the key committed before. Two
// statements in a transaction (a savepoint in the caller's), only for
// enqueues with a window: an enqueue without one is not touched.
func (s *Store) insertJobWindowed(ctx context.Context, q DB, p InsertParams) (InsertResult, error) {
	tx, err := s.begin(ctx, q)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert job: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var isolation, locked string
	if err := tx.QueryRow(ctx, sqlLockUniqueWindow, p.Tenant, p.UniqueKey).Scan(&isolation, &locked); err != nil {
		return InsertResult{}, fmt.Errorf("insert job: lock unique key: %w", err)
	}
	if isolation != "read committed" {
		return InsertResult{}, fmt.Errorf("insert job: %w (this one is %s)", ErrWindowIsolation, isolation)
	}
	var states []string
	if len(p.UniqueStates) > 0 {
		states = p.UniqueStates
	}
	var period *int64
	if p.UniqueFor > 0 {
		ms := p.UniqueFor.Milliseconds()
		period = &ms
	}
	var existing bool
	var woke int64
	j, err := scanJob(tx.QueryRow(ctx, sqlInsertJobWindowed, p.Tenant, p.Kind, p.Queue, int16(p.Priority),
		p.MaxAttempts, p.Timeout.Milliseconds(), nullTime(p.RunAt), p.Delay.Milliseconds(),
		p.UniqueKey, p.Args, p.FairnessKey, nullString(p.LimitKey),
		nullString(p.TraceParent), nullString(p.TraceState), states, period, nullTags(p.Tags)), &existing, &woke)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert job: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return InsertResult{}, fmt.Errorf("insert job: commit: %w", err)
	}
	j.UniqueKey = p.UniqueKey
	return InsertResult{Job: j, Existing: existing}, nil
}

// insertJobDebounced is InsertJob for an enqueue with a debounce key: while
// a job of the tenant with the key has not started, it is updated (its
// args replaced, its run_at moved to now + window, capped at its first
// enqueue + max wait) and returned with Debounced set; else a new job is
// inserted, due in window. One statement, atomic under concurrent
// enqueues: jobs_debounce_idx is its ON CONFLICT arbiter.
func (s *Store) insertJobDebounced(ctx context.Context, q DB, p InsertParams) (InsertResult, error) {
	var maxWait *int64
	if p.DebounceMaxWait > 0 {
		ms := p.DebounceMaxWait.Milliseconds()
		maxWait = &ms
	}
	var debounced bool
	var woke int64
	j, err := scanJob(s.db(q).QueryRow(ctx, sqlInsertJobDebounced, p.Tenant, p.Kind, p.Queue, int16(p.Priority),
		p.MaxAttempts, p.Timeout.Milliseconds(), p.Args, p.FairnessKey, nullString(p.LimitKey),
		nullString(p.TraceParent), nullString(p.TraceState), p.DebounceKey, p.DebounceWindow.Milliseconds(), maxWait, nullTags(p.Tags)), &debounced, &woke)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert job: %w", err)
	}
	return InsertResult{Job: j, Debounced: debounced}, nil
}

// InsertJobs inserts many jobs through q (or the pool) and returns their
// ids in order. Without unique keys it uses COPY; with any, a single
// multi-row insert in which a job whose key is held gets the holder's id.
// Workers of every queue with a due job are woken on commit.
func (s *Store) InsertJobs(ctx context.Context, q DB, ps []InsertParams) ([]int64, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	for i, p := range ps {
		if p.Batch != 0 || ps[0].Batch != 0 {
			return s.insertJobsInBatch(ctx, q, ps)
		}
		if p.Windowed() || p.DebounceKey != "" {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, ErrWindowInBatch)
		}
		if p.SequenceKey != "" && p.UniqueKey != "" {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, ErrSequenceWithKey)
		}
	}
	// COPY and the notify must commit together; a pool gives us neither, so
	// open a transaction (a savepoint when q is the caller's).
	tx, err := s.begin(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// The database's clock decides what is due (G7), both for the rows
	// and for whom to wake.
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	hasUnique := false
	for _, p := range ps {
		if p.UniqueKey != "" {
			hasUnique = true
		}
	}
	var ids []int64
	if hasUnique {
		ids, err = s.insertJobsUnnest(ctx, tx, ps)
	} else {
		ids, err = s.insertJobsCopy(ctx, tx, ps, now)
	}
	if err != nil {
		return nil, err
	}
	queues, units := dueQueues(ps, now)
	if _, err := tx.Exec(ctx, sqlNotifyQueues, queues, units.queues, units.tenants, units.fkeys); err != nil {
		return nil, fmt.Errorf("insert jobs: notify: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("insert jobs: commit: %w", err)
	}
	return ids, nil
}

// copyColumns are the columns COPY fills. A batch whose jobs are all due
// (most, and every bulk load of work to do now) leaves out due, whose
// default is true; one enqueued outside any trace leaves out the trace
// context: fewer columns to send and parse a row.
var copyColumns = []string{"id", "tenant", "kind", "queue", "priority", "max_attempts", "timeout_ms", "run_at", "args", "fairness_key", "limit_key"}

// dueQueues lists the queues of the jobs in ps that are due at now, the
// database's time of the inserting transaction, and the fairness units
// of those jobs (for side claims), unless there are more than
// MaxNotifiedUnits of them: a batch of many units is work for the claims
// of the queue, which share their slots among its units anyway.
func dueQueues(ps []InsertParams, now time.Time) ([]string, notifiedUnits) {
	seen := map[string]bool{}
	seenUnit := map[[3]string]bool{}
	var names []string
	var units notifiedUnits
	for _, p := range ps {
		runAt := p.RunAt
		if runAt.IsZero() {
			runAt = now
		}
		if runAt.Add(p.Delay).After(now) {
			continue
		}
		if !seen[p.Queue] {
			seen[p.Queue] = true
			names = append(names, p.Queue)
		}
		u := [3]string{p.Queue, p.Tenant, p.FairnessKey}
		if !seenUnit[u] && len(seenUnit) <= MaxNotifiedUnits {
			seenUnit[u] = true
			units.queues = append(units.queues, p.Queue)
			units.tenants = append(units.tenants, p.Tenant)
			units.fkeys = append(units.fkeys, p.FairnessKey)
		}
	}
	if len(seenUnit) > MaxNotifiedUnits {
		units = notifiedUnits{}
	}
	return names, units
}

// MaxNotifiedUnits bounds the fairness units one insert names on
// ChannelUnits.
const MaxNotifiedUnits = 16

// notifiedUnits are fairness units as notify_queues takes them.
type notifiedUnits struct {
	queues, tenants, fkeys []string
}

func (s *Store) insertJobsCopy(ctx context.Context, tx pgx.Tx, ps []InsertParams, now time.Time) ([]int64, error) {
	// COPY returns no ids, so take them from the identity sequence first
	// and copy them in with the rows.
	runAts := make([]time.Time, len(ps))
	withDue, withTrace, withSequence, withTags := false, false, false, false
	for i, p := range ps {
		runAt := p.RunAt
		if runAt.IsZero() {
			runAt = now
		}
		// A run_at in the past is clamped to now: nobody jumps the line.
		runAt = runAt.Add(p.Delay)
		if runAt.Before(now) {
			runAt = now
		}
		runAts[i] = runAt
		withDue = withDue || runAt.After(now)
		withTrace = withTrace || p.TraceParent != ""
		withSequence = withSequence || p.SequenceKey != ""
		withTags = withTags || len(p.Tags) > 0
	}
	cols := copyColumns
	if withDue {
		cols = append(cols[:len(cols):len(cols)], "due")
	}
	if withTrace {
		cols = append(cols[:len(cols):len(cols)], "traceparent", "tracestate")
	}
	if withSequence {
		cols = append(cols[:len(cols):len(cols)], "sequence_key", "sequence_halt")
	}
	if withTags {
		cols = append(cols[:len(cols):len(cols)], "tags")
	}
	rows := make([][]any, len(ps))
	for i, p := range ps {
		row := make([]any, 0, len(cols))
		row = append(row, nil, p.Tenant, p.Kind, p.Queue, int16(p.Priority), p.MaxAttempts,
			p.Timeout.Milliseconds(), runAts[i], []byte(p.Args), p.FairnessKey, nullString(p.LimitKey))
		if withDue {
			// Due at the database's now(): the time the claim compares with.
			row = append(row, !runAts[i].After(now))
		}
		if withTrace {
			row = append(row, nullString(p.TraceParent), nullString(p.TraceState))
		}
		if withSequence {
			row = append(row, nullString(p.SequenceKey), p.SequenceHalt)
		}
		if withTags {
			row = append(row, nullTags(p.Tags))
		}
		rows[i] = row
	}
	ids, err := reserveJobIDs(ctx, tx, len(ps))
	if err != nil {
		return nil, err
	}
	for i := range rows {
		rows[i][0] = ids[i]
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"gaffer", "jobs"}, cols, pgx.CopyFromRows(rows))
	if err != nil {
		return nil, fmt.Errorf("insert jobs: copy: %w", err)
	}
	if int(n) != len(ps) {
		return nil, fmt.Errorf("insert jobs: copied %d of %d rows", n, len(ps))
	}
	return ids, nil
}

func (s *Store) insertJobsUnnest(ctx context.Context, tx pgx.Tx, ps []InsertParams) ([]int64, error) {
	n := len(ps)
	var (
		tenants, kinds, queues, keys = make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
		fkeys, lkeys                 = make([]string, n), make([]*string, n)
		parents, states              = make([]*string, n), make([]*string, n)
		seqKeys, seqHalts            = make([]*string, n), make([]bool, n)
		priorities                   = make([]int16, n)
		maxAttempts                  = make([]int32, n)
		timeouts, delays             = make([]int64, n), make([]int64, n)
		runAts                       = make([]*time.Time, n)
		args                         = make([][]byte, n)
	)
	for i, p := range ps {
		tenants[i], kinds[i], queues[i], keys[i] = p.Tenant, p.Kind, p.Queue, nullString(p.UniqueKey)
		priorities[i], maxAttempts[i] = int16(p.Priority), int32(p.MaxAttempts)
		timeouts[i], delays[i] = p.Timeout.Milliseconds(), p.Delay.Milliseconds()
		runAts[i], args[i] = nullTime(p.RunAt), p.Args
		fkeys[i], lkeys[i] = p.FairnessKey, nullString(p.LimitKey)
		parents[i], states[i] = nullString(p.TraceParent), nullString(p.TraceState)
		seqKeys[i], seqHalts[i] = nullString(p.SequenceKey), p.SequenceHalt
	}
	sql, params := sqlInsertJobsUnnest, []any{tenants, kinds, queues, priorities, maxAttempts, timeouts, runAts, delays, keys, args, fkeys, lkeys, parents, states,
		seqKeys, seqHalts}
	if tags, any := joinedTags(ps); any {
		sql, params = sqlInsertJobsUnnestTag, append(params, tags)
	}
	rows, err := tx.Query(ctx, sql, params...)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	inserted := map[[2]string]int64{}
	var order []int64
	for rows.Next() {
		var id int64
		var tenant string
		var key *string
		if err := rows.Scan(&id, &tenant, &key); err != nil {
			rows.Close()
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
		order = append(order, id)
		if key != nil {
			inserted[[2]string{tenant, *key}] = id
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	slices.Sort(order)
	// Identity values are drawn in insertion order, which is ordinal order,
	// so sorted ids line up with the inserted requests. Rows skipped for a held
	// key get the holder's id, which may be a job inserted by this batch.
	ids := make([]int64, n)
	next := 0
	for i, p := range ps {
		if p.UniqueKey != "" {
			if id, ok := inserted[[2]string{p.Tenant, p.UniqueKey}]; ok {
				ids[i] = id
				if next < len(order) && order[next] == id {
					next++
				}
				continue
			}
			j, err := scanJob(tx.QueryRow(ctx, sqlGetByUniqueKey, p.Tenant, p.UniqueKey))
			if err != nil {
				return nil, fmt.Errorf("insert jobs: find job holding unique key %q: %w", p.UniqueKey, err)
			}
			ids[i] = j.ID
			inserted[[2]string{p.Tenant, p.UniqueKey}] = j.ID
			continue
		}
		if next >= len(order) {
			return nil, errors.New("insert jobs: fewer rows inserted than expected")
		}
		ids[i] = order[next]
		next++
	}
	return ids, nil
}

// joinedTags is each job's tags joined by ',' (nil: none) for
// insert_jobs_unnest_tagged, and whether any job has tags.
func joinedTags(ps []InsertParams) ([]*string, bool) {
	out, any := make([]*string, len(ps)), false
	for i, p := range ps {
		if len(p.Tags) > 0 {
			out[i], any = nullString(strings.Join(p.Tags, ",")), true
		}
	}
	return out, any
}

func reserveJobIDs(ctx context.Context, tx pgx.Tx, n int) ([]int64, error) {
	var ids []int64
	err := tx.QueryRow(ctx, `SELECT array_agg(nextval(pg_get_serial_sequence('gaffer.jobs', 'id'))) FROM generate_series(1, $1)`, n).Scan(&ids)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: take ids: %w", err)
	}
	return ids, nil
}
