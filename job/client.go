package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/store"
)

// Client enqueues, inspects and cancels jobs. It needs only PostgreSQL and
// is safe for concurrent use.
type Client struct {
	store   *store.Store
	metrics *Metrics
	kinds   *Registry // nil: no kind-specific checks
}

// NewClient returns a client of the jobs in pool's database. m may be
// nil.
func NewClient(pool *pgxpool.Pool, m *Metrics) *Client {
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Client{store: store.New(pool), metrics: m}
}

// WithKinds returns a client that also runs, on every request, the Check
// its kind has in r (see KindOptions.Check). A node's Client has the
// node's registry.
func (c *Client) WithKinds(r *Registry) *Client {
	cp := *c
	cp.kinds = r
	return &cp
}

// Handles reports whether the registry given to WithKinds has a handler
// for kind (false without one).
func (c *Client) Handles(kind string) bool {
	if c.kinds == nil {
		return false
	}
	_, ok := c.kinds.lookup(kind)
	return ok
}

// prepare validates r, runs its kind's check, and returns what the store
// inserts.
func (c *Client) prepare(r Request) (store.InsertParams, error) {
	p, err := r.params()
	if err != nil || c.kinds == nil {
		return p, err
	}
	checked := requestOf(p)
	if err := c.kinds.CheckRequest(&checked); err != nil {
		return p, err
	}
	p.FairnessKey, p.LimitKey = checked.FairnessKey, checked.LimitKey
	return p, nil
}

// Result is the outcome of an enqueue.
type Result struct {
	Job *Job
	// Existing is true when the request's unique key was held by an
	// unfinished job (or, with a window, by a job the window holds it
	// for): nothing was inserted and Job is that job.
	Existing bool
	// Debounced is true when the request's debounce key named a job that
	// had not started: that job (Job) took the request's args and its new
	// run_at; nothing was inserted.
	Debounced bool
}

// Enqueue validates r and inserts it. When it returns without error the
// job is committed. Errors: *ValidationError for bad input.
//
// The span context in ctx, if any (an OpenTelemetry span, or a remote
// context a propagator extracted), is stored with the job as its W3C
// trace context (Job.TraceParent and TraceState): every attempt's span
// links to it. The same holds for EnqueueTx, EnqueueMany and
// EnqueueManyTx, where every job of the batch gets ctx's.
func (c *Client) Enqueue(ctx context.Context, r Request) (Result, error) {
	return c.enqueue(ctx, nil, r)
}

// EnqueueTx inserts r within the caller's transaction: the job exists if
// and only if tx commits, and workers are woken on commit. A request with
// a uniqueness window holds its key's lock until tx ends (other enqueues
// of the key wait for it), and needs tx to be READ COMMITTED
// (ErrWindowIsolation otherwise).
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, r Request) (Result, error) {
	if tx == nil {
		return Result{}, errors.New("enqueue: nil transaction")
	}
	return c.enqueue(ctx, tx, r)
}

func (c *Client) enqueue(ctx context.Context, tx pgx.Tx, r Request) (Result, error) {
	p, err := c.prepare(r)
	if err != nil {
		return Result{}, err
	}
	p.TraceParent, p.TraceState = traceContextOf(ctx)
	var db store.DB
	if tx != nil {
		db = tx
	}
	res, err := c.store.InsertJob(ctx, db, p)
	if err != nil && p.Batch != 0 {
		err = enqueueErr(err)
	}
	if err != nil {
		return Result{}, fmt.Errorf("enqueue %s: %w", r.Kind, err)
	}
	if !res.Existing && !res.Debounced {
		c.metrics.forKind(p.Queue, p.Kind).enqueued.Inc()
	}
	return Result{Job: FromRow(res.Job), Existing: res.Existing, Debounced: res.Debounced}, nil
}

// EnqueueMany validates every request, then inserts them all in one
// transaction (COPY when none has a unique key) and returns their ids in
// order; a request whose unique key is held gets the holder's id. Nothing
// is inserted if any request is invalid: the error names its index. A
// request with a uniqueness window (UniqueStates, UniqueFor) is refused
// (*ValidationError): enqueue it on its own.
func (c *Client) EnqueueMany(ctx context.Context, rs []Request) ([]int64, error) {
	return c.enqueueMany(ctx, nil, rs)
}

// EnqueueManyTx is EnqueueMany within the caller's transaction.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, rs []Request) ([]int64, error) {
	if tx == nil {
		return nil, errors.New("enqueue: nil transaction")
	}
	return c.enqueueMany(ctx, tx, rs)
}

func (c *Client) enqueueMany(ctx context.Context, tx pgx.Tx, rs []Request) ([]int64, error) {
	ps := make([]store.InsertParams, len(rs))
	parent, state := traceContextOf(ctx)
	for i, r := range rs {
		p, err := c.prepare(r)
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return nil, &ValidationError{Field: fmt.Sprintf("jobs[%d].%s", i, ve.Field), Message: ve.Message, Code: ve.Code}
			}
			return nil, err
		}
		if p.Windowed() || p.DebounceKey != "" {
			field := "unique_states"
			switch {
			case p.DebounceKey != "":
				field = "debounce"
			case p.UniqueFor > 0:
				field = "unique_for"
			}
			return nil, &ValidationError{Field: fmt.Sprintf("jobs[%d].%s", i, field),
				Message: "a batch takes no uniqueness window or debounce (each needs its key's own statements): enqueue this job on its own with Enqueue or EnqueueTx"}
		}
		p.TraceParent, p.TraceState = parent, state
		ps[i] = p
	}
	var db store.DB
	if tx != nil {
		db = tx
	}
	ids, err := c.store.InsertJobs(ctx, db, ps)
	if err != nil {
		err = enqueueErr(err)
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue %d jobs: %w", len(rs), err)
	}
	counts := map[kindKey]int{}
	for _, p := range ps {
		counts[kindKey{p.Queue, p.Kind}]++
	}
	for k, n := range counts {
		c.metrics.forKind(k.queue, k.kind).enqueued.Add(float64(n))
	}
	return ids, nil
}

// Get returns a job. tenant, when not empty, must own it. Errors:
// ErrNotFound.
func (c *Client) Get(ctx context.Context, tenant string, id int64) (*Job, error) {
	row, err := c.store.GetJob(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return FromRow(row), nil
}

// Filter selects jobs to list; zero fields do not filter.
type Filter struct {
	Tenant string
	States []State
	Queue  string
	Kind   string
	// CronEntry keeps the jobs a cron entry of that name made (on its
	// schedule or triggered); WorkflowRun the jobs of a workflow run's
	// steps, replays included.
	CronEntry   string
	WorkflowRun int64
	// Sequence keeps the jobs of one sequence.
	Sequence string
	// Batch keeps the jobs enqueued into one batch.
	Batch int64
	// NoTimers leaves out Gaffer's own workflow timer jobs (kinds
	// gaffer.sleep and gaffer.signal).
	NoTimers bool
	// Search keeps the jobs whose kind or args contain this text (case
	// folded), looked for among the newest SearchWindow jobs the other
	// fields select (and older than BeforeID): bounded, never a scan of
	// the table. At most MaxSearch bytes.
	Search string
	// Tags keeps the jobs carrying every one of these tags (at most
	// MaxTags), or with TagsAny at least one of them: an indexed search
	// over all jobs.
	Tags    []string
	TagsAny bool
	// Args keeps the jobs whose args contain every one of these JSON
	// objects (jsonb @>; ArgsMatch makes one from a path and a value),
	// looked for like Search among the newest SearchWindow jobs the other
	// fields select. At most MaxArgsFilters.
	Args     []json.RawMessage
	BeforeID int64 // pagination cursor: jobs with smaller ids
	Limit    int   // default 100, at most 1000
	// MaxBytes ends the list early, once the jobs read take about this
	// many bytes as JSON (the job that crosses it is the last); 0: no
	// bound. List holds what it returns in memory: a caller serving
	// tenants bounds it (the API does, by its response budget).
	MaxBytes int
}

// SearchWindow is how many of the newest jobs a Filter's Search looks
// through; MaxSearch bounds its text.
const (
	SearchWindow = store.SearchWindow
	MaxSearch    = 200
)

// maxCronEntryName is the longest cron entry name (the cron package's
// rule).
const maxCronEntryName = 128

// Validate checks a filter's states, queue, kind, cron entry and
// workflow run, naming the field that is wrong. List calls it.
func (f Filter) Validate() error {
	if len(f.CronEntry) > maxCronEntryName || !validText(f.CronEntry) {
		return &ValidationError{Field: "cron_entry", Message: fmt.Sprintf("must be a cron entry name: at most %d bytes of UTF-8 text", maxCronEntryName)}
	}
	if len(f.Search) > MaxSearch || !validText(f.Search) {
		return &ValidationError{Field: "search", Message: fmt.Sprintf("must be at most %d bytes of UTF-8 text", MaxSearch)}
	}
	if err := ValidateTags("tag", f.Tags); err != nil {
		return err
	}
	if err := validateArgsFilters(f.Args); err != nil {
		return err
	}
	if f.WorkflowRun < 0 {
		return &ValidationError{Field: "workflow_run", Message: fmt.Sprintf("must be a workflow run id, got %d", f.WorkflowRun)}
	}
	for _, s := range f.States {
		if !s.Valid() {
			return &ValidationError{Field: "state", Message: fmt.Sprintf("must be one or more of %s; got %q", stateNames(), s)}
		}
	}
	if f.Queue != "" {
		if err := ValidateName("queue", f.Queue); err != nil {
			return err
		}
	}
	if f.Kind != "" {
		return ValidateKind(f.Kind)
	}
	return nil
}

// List returns jobs matching f, newest first. A filter that fails
// Validate returns its *ValidationError.
func (c *Client) List(ctx context.Context, f Filter) ([]*Job, error) {
	jobs, _, err := c.ListPage(ctx, f)
	return jobs, err
}

// ListPage is List saying also whether jobs may follow those it returns
// (it stopped at f.Limit or f.MaxBytes): the next page is the jobs
// before the last one returned (Filter.BeforeID).
func (c *Client) ListPage(ctx context.Context, f Filter) (jobs []*Job, more bool, _ error) {
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	rows, more, err := c.store.ListJobsPage(ctx, f.store())
	if err != nil {
		return nil, false, err
	}
	out := make([]*Job, len(rows))
	for i, r := range rows {
		out[i] = FromRow(r)
	}
	return out, more, nil
}

func (f Filter) store() store.JobFilter {
	states := make([]string, len(f.States))
	for i, s := range f.States {
		states[i] = string(s)
	}
	sf := store.JobFilter{Tenant: f.Tenant, States: states, Queue: f.Queue, Kind: f.Kind, CronEntry: f.CronEntry,
		WorkflowRun: f.WorkflowRun, Sequence: f.Sequence, Batch: f.Batch, NoTimers: f.NoTimers, Search: f.Search, BeforeID: f.BeforeID, Limit: f.Limit, MaxBytes: f.MaxBytes}
	f.storeTags(&sf)
	return sf
}

// CountByState counts the jobs f selects in each state (its States,
// BeforeID, Limit and MaxBytes ignored), each count stopping at limit: a
// count equal to it means at least that many. With f.Search the counts
// are exact among the newest SearchWindow jobs the other fields select.
func (c *Client) CountByState(ctx context.Context, f Filter, limit int) (map[State]int, error) {
	f.States = nil
	if err := f.Validate(); err != nil {
		return nil, err
	}
	counts, err := c.store.CountJobsByState(ctx, f.store(), limit)
	if err != nil {
		return nil, err
	}
	out := make(map[State]int, len(counts))
	for s, n := range counts {
		out[State(s)] = n
	}
	return out, nil
}

// Cancel cancels a job: at once if it is pending or retrying; if it is
// running, its node cancels the handler's context (within a second) and
// the job ends cancelled. It returns the job's state after the request.
// Errors: ErrNotFound, ErrFinished.
func (c *Client) Cancel(ctx context.Context, tenant string, id int64) (State, error) {
	state, err := c.store.RequestCancel(ctx, tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", ErrNotFound
	case errors.Is(err, store.ErrFinished):
		return "", ErrFinished
	case err != nil:
		return "", err
	}
	return State(state), nil
}

// PauseQueue stops every node claiming from queue until ResumeQueue.
// Running jobs finish.
func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	if err := ValidateName("queue", queue); err != nil {
		return err
	}
	return c.store.SetQueuePaused(ctx, queue, true)
}

// ResumeQueue lets nodes claim from queue again.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	if err := ValidateName("queue", queue); err != nil {
		return err
	}
	return c.store.SetQueuePaused(ctx, queue, false)
}

// Queue is a queue and its unfinished jobs.
type Queue struct {
	Name     string
	Paused   bool
	Pending  int64
	Retrying int64
	Running  int64
	// OldestDueAge is how long the oldest due, unclaimed job has waited.
	OldestDueAge time.Duration
	// Workers is how many live nodes and remote workers work the queue
	// (for a tenant: nodes, its own remote workers and spanning ones);
	// draining ones are not counted.
	Workers int64
}

// Unworked is a warning, or "": jobs wait in the queue and no live node
// or remote worker works it (nothing will run them until one does), or
// the queue is paused.
func (q Queue) Unworked() string {
	switch {
	case q.Pending+q.Retrying == 0:
		return ""
	case q.Paused:
		return "paused: its jobs wait until it is resumed"
	case q.Workers == 0:
		return "no live node or remote worker works this queue: its jobs wait until one does"
	}
	return ""
}

func queuesOf(rows []store.Queue, err error) ([]Queue, error) {
	out := make([]Queue, len(rows))
	for i, r := range rows {
		out[i] = Queue(r)
	}
	return out, err
}

// Queues lists known queues with their counts. For a tenant (not "") it
// lists only the queues where that tenant has unfinished jobs, with that
// tenant's counts: a tenant sees nothing of another's queues.
func (c *Client) Queues(ctx context.Context, tenant string) ([]Queue, error) {
	return queuesOf(c.store.ListQueues(ctx, tenant))
}

// QueueDepths is Queues for huge tables: across tenants, pending and
// retrying counts stop at limit (a count equal to it means at least that
// many); a tenant's counts are exact.
func (c *Client) QueueDepths(ctx context.Context, tenant string, limit int) ([]Queue, error) {
	return queuesOf(c.store.QueueDepthsCapped(ctx, tenant, limit))
}

// EstimateJobs is the planner's estimate of how many jobs the table holds
// (as of the last autovacuum or analyze): instant on any size, unlike a
// count.
func (c *Client) EstimateJobs(ctx context.Context) (int64, error) { return c.store.EstimateJobs(ctx) }

// ThroughputPoint is one minute's average rates of finished jobs.
type ThroughputPoint struct {
	Minute          time.Time
	CompletedPerSec float64
	FailedPerSec    float64
}

// Throughput returns per-minute rates over the last window (at most an
// hour for one tenant), of one tenant or, for "", of all. The leader's
// queue monitor records a sample every interval.
func (c *Client) Throughput(ctx context.Context, tenant string, window time.Duration) ([]ThroughputPoint, error) {
	rows, err := c.store.ThroughputSeries(ctx, tenant, window)
	out := make([]ThroughputPoint, len(rows))
	for i, r := range rows {
		out[i] = ThroughputPoint(r)
	}
	return out, err
}

// QueueBucket is what finished in one bucket of a queue's history.
type QueueBucket struct {
	At                time.Time
	Completed, Failed int64
}

// QueueHistory returns the jobs of queue that finished per bucket over
// the last window (at most a week: the leader's samples keep a week, per
// minute), of one tenant or, for "", of all, oldest first; buckets where
// nothing finished are left out.
func (c *Client) QueueHistory(ctx context.Context, tenant, queue string, window, bucket time.Duration) ([]QueueBucket, error) {
	if bucket < time.Minute || window < bucket {
		return nil, fmt.Errorf("queue history: a bucket is at least a minute and at most the window, got %s of %s", bucket, window)
	}
	rows, err := c.store.QueueHistory(ctx, queue, tenant, window, bucket)
	out := make([]QueueBucket, len(rows))
	for i, r := range rows {
		out[i] = QueueBucket(r)
	}
	return out, err
}

// Retry runs a job again now. A retrying job waiting out its backoff
// becomes due at once (the same job, its next attempt). A failed job's DLQ
// entry is replayed into exactly one new job, whose id is returned; a
// second Retry of it finds the entry replayed and refuses. Errors:
// ErrNotFound, ErrNotRetryable (pending, running, completed and cancelled
// jobs, and failed jobs whose entry was replayed or purged).
func (c *Client) Retry(ctx context.Context, tenant string, id int64) (int64, error) {
	j, err := c.Get(ctx, tenant, id)
	if err != nil {
		return 0, err
	}
	switch j.State {
	case Retrying:
		err := c.store.RetryNow(ctx, tenant, id)
		if errors.Is(err, store.ErrNotRetrying) {
			return 0, fmt.Errorf("%w: it is no longer waiting to retry", ErrNotRetryable)
		}
		return id, err
	case Failed:
		entries, err := c.store.ListDLQ(ctx, store.DLQFilter{Tenant: tenant, JobID: id, Limit: 1})
		if err != nil {
			return 0, err
		}
		if len(entries) == 0 {
			return 0, fmt.Errorf("%w: its DLQ entry was purged", ErrNotRetryable)
		}
		r, err := c.store.ReplayDLQEntry(ctx, tenant, entries[0].ID)
		if errors.Is(err, store.ErrAlreadyReplayed) {
			return 0, fmt.Errorf("%w: %v", ErrNotRetryable, err)
		}
		if err != nil {
			return 0, err
		}
		return r.JobID, nil
	default:
		return 0, fmt.Errorf("%w: it is %s", ErrNotRetryable, j.State)
	}
}
