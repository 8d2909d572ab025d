package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/redact"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/internal/store"
)

// WorkerConfig configures a Worker. Zero values take the defaults shown.
type WorkerConfig struct {
	Pool     *pgxpool.Pool // required
	Registry *Registry     // required
	NodeID   string        // required: recorded on every job this node runs
	Metrics  *Metrics
	Logger   hclog.Logger
	// Queues maps each queue this node works to the most jobs of it the
	// node runs at once. Default {"default": 10}.
	Queues map[string]int
	// LeaseTTL is how long a claim holds a job without a heartbeat.
	// Running jobs are heartbeated every LeaseTTL/3. Default 30s.
	LeaseTTL time.Duration
	// PollInterval is the fallback claim poll, jittered ±10%; inserts wake
	// workers at once through LISTEN/NOTIFY. Default 1s.
	PollInterval time.Duration
	// FetchCooldown is the least time between two claims of one queue, so
	// that slots freed together are filled by one claim. Default 2ms.
	FetchCooldown time.Duration
	// ClaimBatch caps the jobs one claim takes. Default 500.
	ClaimBatch int
	// CheckInterval is how often running jobs are checked for cancellation
	// requests (a fallback to notifications) and heartbeated when due.
	// Default 1s, and at most LeaseTTL/4.
	CheckInterval time.Duration
	// CursorReset bounds how long claims continue from where the last full
	// claim ended before they scan the queue from its start again. Deep
	// backlogs claim without walking the dead index entries earlier claims
	// left; a job queued before the cursor (a more urgent priority, or an
	// earlier run_at) waits at most this long. Default 1s.
	CursorReset time.Duration
}

func (c *WorkerConfig) setDefaults() error {
	switch {
	case c.Pool == nil:
		return errors.New("WorkerConfig.Pool is required")
	case c.Registry == nil:
		return errors.New("WorkerConfig.Registry is required")
	case c.NodeID == "":
		return errors.New("WorkerConfig.NodeID is required")
	case c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < 500*time.Millisecond):
		return fmt.Errorf("WorkerConfig.LeaseTTL must be at least 500ms, got %s", c.LeaseTTL)
	case c.PollInterval < 0 || c.FetchCooldown < 0 || c.ClaimBatch < 0 || c.CheckInterval < 0:
		return errors.New("WorkerConfig: intervals and batch sizes must not be negative")
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{DefaultQueue: 10}
	}
	for q, n := range c.Queues {
		if err := ValidateName("queue", q); err != nil {
			return fmt.Errorf("WorkerConfig.Queues: %w", err)
		}
		if n < 1 {
			return fmt.Errorf("WorkerConfig.Queues[%q]: concurrency must be at least 1, got %d", q, n)
		}
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.FetchCooldown == 0 {
		c.FetchCooldown = 2 * time.Millisecond
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = 500
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = time.Second
	}
	if c.CursorReset < 0 {
		return errors.New("WorkerConfig.CursorReset must not be negative")
	}
	if c.CursorReset == 0 {
		c.CursorReset = time.Second
	}
	c.CheckInterval = min(c.CheckInterval, c.LeaseTTL/4)
	return nil
}

// Worker claims jobs of its queues and runs their handlers. See the
// package documentation for the attempt life cycle.
type Worker struct {
	cfg     WorkerConfig
	store   *store.Store
	log     hclog.Logger
	metrics *Metrics

	producers map[string]*producer
	claiming  atomic.Bool
	watcher   service.Runner
	handlers  sync.WaitGroup

	mu        sync.Mutex
	started   bool
	stopped   bool
	executing map[store.Lease]*execution
	completer *completer
	// OnStale, when set, is called for every write refused because the
	// attempt no longer owned its job. Tests use it.
	onStale func(id int64, op string)
}

// execution is one running attempt on this node.
type execution struct {
	job      *Job
	lease    store.Lease
	ctx      context.Context
	cancel   context.CancelCauseFunc
	started  time.Time
	producer *producer

	mu        sync.Mutex
	renewedAt time.Time // monotonic: when the lease was last set
	finished  bool      // the handler returned; its outcome is being written
	released  bool      // the node gave the lease back; drop the outcome
	lost      bool      // a heartbeat was refused: another attempt owns the job
}

// NewWorker validates cfg and returns a stopped worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	w := &Worker{
		cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("worker"), metrics: cfg.Metrics,
		producers: map[string]*producer{}, executing: map[store.Lease]*execution{},
	}
	for q, n := range cfg.Queues {
		w.producers[q] = &producer{w: w, queue: q, limit: n, wakeCh: make(chan struct{}, 1),
			work: make(chan *execution), quit: make(chan struct{})}
	}
	w.claiming.Store(true)
	return w, nil
}

// Start begins claiming and running jobs. It does not block; it is
// idempotent. ctx bounds the claim loops (cancelling it stops claiming),
// not the running handlers: use Stop to end those.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	if w.stopped {
		return errors.New("worker: cannot restart a stopped worker")
	}
	w.started = true
	w.completer = newCompleter(w.store, w.metrics, w.log, w.cfg.ClaimBatch, w.wakeAfterWrite)
	for _, p := range w.producers {
		p.runner.Start(ctx, p.loop)
	}
	w.watcher.Start(ctx, w.watch)
	return nil
}

// SetClaiming turns claiming on or off without stopping running jobs:
// drain turns it off, undrain back on. Effective before the next claim.
func (w *Worker) SetClaiming(on bool) {
	w.claiming.Store(on)
	if on {
		w.WakeAll()
	}
}

// Claiming reports whether the worker claims new jobs.
func (w *Worker) Claiming() bool { return w.claiming.Load() }

// InFlight returns how many attempts are running on this node.
func (w *Worker) InFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.executing)
}

// Wake makes queue's claim loop look for work now.
func (w *Worker) Wake(queue string) {
	if p := w.producers[queue]; p != nil {
		p.wake()
	}
}

// wakeAfterWrite wakes the claim loops of queues whose last claim came
// back short once attempts of theirs are recorded over: the slots those
// attempts held under limits are free only now, not when their handlers
// returned.
func (w *Worker) wakeAfterWrite(queues map[string]bool) {
	for q := range queues {
		if p := w.producers[q]; p != nil && p.capped.Load() {
			p.wake()
		}
	}
}

// WakeAll wakes every queue's claim loop, e.g. after notifications may
// have been missed.
func (w *Worker) WakeAll() {
	for _, p := range w.producers {
		p.wake()
	}
}

// CancelLocal cancels the handler of job id if it runs here, with cause
// ErrCancelled. It reports whether it did. (One node can briefly run two
// attempts of a job: one that lost its lease and the one that took over.)
func (w *Worker) CancelLocal(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	found := false
	for l, e := range w.executing {
		if l.ID == id {
			e.cancel(ErrCancelled)
			found = true
		}
	}
	return found
}

type controlMessage struct {
	Op    string `json:"op"`
	ID    int64  `json:"id"`
	Queue string `json:"queue"`
}

// HandleNotification reacts to a NOTIFY on the jobs channel or
// store.ChannelControl. It does not block.
func (w *Worker) HandleNotification(channel, payload string) {
	switch channel {
	case store.ChannelJobs:
		w.Wake(payload)
	case store.ChannelControl:
		var m controlMessage
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			w.log.Warn("ignoring malformed control message", "payload", payload, "error", err)
			return
		}
		switch m.Op {
		case "cancel":
			w.CancelLocal(m.ID)
		case "resume":
			w.Wake(m.Queue)
		}
	}
}

// Stop stops claiming, waits for running handlers until ctx ends, then
// cancels the handlers still running (cause ErrStopping) and releases
// their leases so that another node can claim those jobs at once, without
// using up an attempt. Completions are flushed before Stop returns.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.stopped {
		w.stopped = true
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	w.mu.Unlock()

	w.claiming.Store(false)
	for _, p := range w.producers {
		p.runner.Stop()
	}
	drained := waitGroupDone(&w.handlers)
	var releaseErr error
	select {
	case <-drained:
	case <-ctx.Done():
		releaseErr = w.ReleaseRunning()
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			w.log.Warn("handlers still running after their jobs were released; not waiting for them")
		}
	}
	w.watcher.Stop()
	w.completer.close()
	for _, p := range w.producers {
		close(p.quit)
	}
	return releaseErr
}

// ReleaseRunning cancels every handler still running (cause ErrStopping)
// and gives its lease back, so that another node claims the job at once
// without it using up an attempt. Drain calls it at the deadline.
func (w *Worker) ReleaseRunning() error {
	w.mu.Lock()
	var leases []store.Lease
	for _, e := range w.executing {
		e.mu.Lock()
		if !e.finished {
			e.released = true
			leases = append(leases, e.lease)
			e.cancel(ErrStopping)
		}
		e.mu.Unlock()
	}
	w.mu.Unlock()
	if len(leases) == 0 {
		return nil
	}
	var released []int64
	err := retryWrite(func(ctx context.Context) error {
		var err error
		released, err = w.store.ReleaseJobs(ctx, leases, "released: node "+w.cfg.NodeID+" stopped before the job finished")
		return err
	})
	if err != nil {
		return fmt.Errorf("release %d running jobs: %w", len(leases), err)
	}
	w.log.Info("released running jobs at the drain deadline", "released", len(released), "running", len(leases))
	return nil
}

func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

// producer is one queue's claim loop.
type producer struct {
	w      *Worker
	queue  string
	limit  int
	wakeCh chan struct{}
	runner service.Runner
	// work hands attempts to idle handler goroutines; quit ends them.
	work chan *execution
	quit chan struct{}

	active atomic.Int64
	more   atomic.Bool // the last claim took jobs: there may be more work
	// claimCap bounds the next claim (0: ClaimBatch) after short claims:
	// when limits let only a few of a claim's candidates start, asking
	// for a whole batch locks and weighs many jobs for nothing.
	claimCap  int
	capped    atomic.Bool // claimCap > 0, for other goroutines
	lastClaim time.Time
	// cursors are where the last claims of each fairness unit ended, kept
	// since cursorSince; a unit without one is scanned from its start.
	cursors     map[store.Unit]store.ClaimPosition
	cursorSince time.Time
	// below is where the next claim starts among the units, when the last
	// one served as many units as it could (there may be more).
	below *store.Unit
}

func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

func (p *producer) loop(ctx context.Context) {
	poll := p.w.cfg.PollInterval
	timer := time.NewTimer(0) // look for work at once
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wakeCh:
		case <-timer.C:
		}
		timer.Reset(jitter(poll, 0.1))
		p.fill(ctx)
	}
}

// fill claims until the queue's slots are full or it runs dry.
func (p *producer) fill(ctx context.Context) {
	w := p.w
	for ctx.Err() == nil && w.claiming.Load() {
		free := p.limit - int(p.active.Load())
		if free <= 0 {
			return // a finishing job wakes the loop
		}
		if wait := w.cfg.FetchCooldown - time.Since(p.lastClaim); wait > 0 {
			if !sleepCtx(ctx, wait) {
				return
			}
			free = p.limit - int(p.active.Load())
		}
		n := min(free, w.cfg.ClaimBatch)
		if p.claimCap > 0 {
			n = min(n, p.claimCap)
		}
		p.lastClaim = time.Now()
		if len(p.cursors) > 0 && p.lastClaim.Sub(p.cursorSince) > w.cfg.CursorReset {
			clear(p.cursors)
		}
		rows, err := p.claim(ctx, n)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Error("claim jobs", "queue", p.queue, "error", err)
				sleepCtx(ctx, jitter(time.Second, 0.5))
			}
			return
		}
		if ctx.Err() != nil {
			// The worker stopped while the claim was in flight: give the
			// jobs back rather than start them.
			p.release(rows)
			return
		}
		// A full claim may have left work behind; so may a short one that
		// limits cut (a slot freeing here may let the next one in). Only an
		// empty claim says the queue has nothing for this node now.
		p.more.Store(len(rows) > 0)
		p.adaptCap(len(rows), n)
		p.advanceCursors(rows, n)
		for _, row := range rows {
			p.active.Add(1)
			w.launch(p, row, p.lastClaim)
		}
		if len(rows) < n {
			return
		}
	}
}

// claim takes up to n due jobs. The statement is not cancelled with ctx:
// pgx answers a cancelled context by closing the connection, and a claim
// the server commits after that would leave jobs running on a node that
// never heard of them, until their lease ran out (an attempt burnt, or a
// last attempt dead-lettered without running). The claim instead finishes,
// bounded by the lease TTL, and the caller releases what it got if the
// worker stopped meanwhile.
func (p *producer) claim(ctx context.Context, n int) ([]store.Job, error) {
	w := p.w
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.LeaseTTL)
	defer cancel()
	cursors := make([]store.UnitCursor, 0, len(p.cursors))
	for u, pos := range p.cursors {
		cursors = append(cursors, store.UnitCursor{Unit: u, ClaimPosition: pos})
	}
	return w.store.ClaimJobs(claimCtx, store.ClaimParams{
		Queue: p.queue, Limit: n, Token: rand.Int64(), LeaseTTL: w.cfg.LeaseTTL, Node: w.cfg.NodeID,
		Cursors: cursors, Below: p.below,
	})
}

// release gives back jobs claimed after the worker began to stop, without
// using up their attempt.
func (p *producer) release(rows []store.Job) {
	if len(rows) == 0 {
		return
	}
	leases := make([]store.Lease, len(rows))
	for i, r := range rows {
		leases[i] = store.Lease{ID: r.ID, Attempt: r.Attempt, Token: r.LeaseToken}
	}
	err := retryWrite(func(ctx context.Context) error {
		_, err := p.w.store.ReleaseJobs(ctx, leases, "released: node "+p.w.cfg.NodeID+" stopped while claiming")
		return err
	})
	if err != nil {
		// Their leases expire and the lease rescuer retries them.
		p.w.log.Error("release jobs claimed while stopping", "queue", p.queue, "jobs", len(rows), "error", err)
	}
}

// adaptCap sizes the next claim from this one: a claim that got what it
// asked for lets the next ask for twice as many (up to the batch); a
// short one caps the next at twice what it got (at least minClaim). A
// queue that ran dry pays nothing for it: the next claim, woken by an
// insert, still asks for at least minClaim, and grows from there.
func (p *producer) adaptCap(got, asked int) {
	switch {
	case got >= asked:
		if p.claimCap > 0 {
			p.claimCap *= 2
			if p.claimCap >= p.w.cfg.ClaimBatch {
				p.claimCap = 0
			}
		}
	default:
		p.claimCap = max(2*got, minClaim)
	}
	p.capped.Store(p.claimCap > 0)
}

// minClaim is the least a capped claim asks for.
const minClaim = 16

// advanceCursors moves each unit's cursor to the end of what this claim
// took of it. A short claim saw everything due past the cursors, so the
// next one starts over. A claim that served as many units as it took jobs
// may have left units out: the next one starts below the last it served.
func (p *producer) advanceCursors(rows []store.Job, asked int) {
	p.below = nil
	if len(rows) < asked {
		clear(p.cursors)
		return
	}
	if len(p.cursors) == 0 {
		p.cursorSince = p.lastClaim
	}
	if p.cursors == nil {
		p.cursors = map[store.Unit]store.ClaimPosition{}
	}
	var lowest *store.Unit
	for _, r := range rows {
		u := store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}
		pos := store.ClaimPosition{Priority: r.Priority, RunAt: r.RunAt, ID: r.ID}
		if last, ok := p.cursors[u]; !ok || last.Less(pos) {
			p.cursors[u] = pos
		}
		if lowest == nil || u.Tenant < lowest.Tenant || (u.Tenant == lowest.Tenant && u.FairnessKey < lowest.FairnessKey) {
			lowest = &u
		}
	}
	if len(p.cursors) > maxCursors {
		clear(p.cursors)
	}
	// Units are served from the last in (tenant, fairness key) order down,
	// at most as many as the claim takes jobs: one job per unit means the
	// claim may have stopped for want of room, and the next starts below
	// the last it served (wrapping around).
	if countUnits(rows) == len(rows) {
		p.below = lowest
	}
}

// maxCursors bounds the cursors a producer keeps (and sends per claim).
const maxCursors = 1000

func countUnits(rows []store.Job) int {
	seen := map[store.Unit]bool{}
	for _, r := range rows {
		seen[store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}] = true
	}
	return len(seen)
}

// finished frees a slot; if the queue had more work, claim again.
func (p *producer) finished() {
	p.active.Add(-1)
	if p.more.Load() {
		p.wake()
	}
}

func (w *Worker) launch(p *producer, row store.Job, claimedAt time.Time) {
	j := fromRow(row)
	j.st = w.store
	ctx, cancel := context.WithCancelCause(context.Background())
	e := &execution{job: j, lease: store.Lease{ID: row.ID, Attempt: row.Attempt, Token: row.LeaseToken},
		cancel: cancel, started: time.Now(), renewedAt: claimedAt, producer: p}
	if j.AttemptedAt != nil {
		w.metrics.forKind(j.Queue, j.Kind).queueWait.Observe(max(0, j.AttemptedAt.Sub(j.RunAt).Seconds()))
	}
	e.ctx = ctx
	w.mu.Lock()
	w.executing[e.lease] = e
	w.mu.Unlock()
	w.handlers.Add(1)
	// Hand the attempt to an idle handler goroutine, or start one: they
	// outlive their jobs, so a busy queue does not pay for a new goroutine
	// (and its stack growth) per job.
	select {
	case p.work <- e:
	default:
		go p.serve(e)
	}
}

// serve runs attempts, one after another, until the worker stops.
func (p *producer) serve(e *execution) {
	for {
		p.w.execute(e)
		select {
		case e = <-p.work:
		case <-p.quit:
			return
		}
	}
}

func (w *Worker) execute(e *execution) {
	defer w.handlers.Done()
	defer e.producer.finished()
	defer e.cancel(nil)
	w.run(e.ctx, e)
}

// run executes one attempt and records its outcome.
func (w *Worker) run(ctx context.Context, e *execution) {
	j := e.job
	reg, known := w.cfg.Registry.lookup(j.Kind)
	timeout := j.Timeout
	if timeout == 0 {
		timeout = reg.opts.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
		defer cancel()
	}
	var (
		err     error
		stack   string
		errKind = "error"
	)
	start := time.Now()
	if !known {
		err, errKind = fmt.Errorf("no handler for kind %q on node %s", j.Kind, w.cfg.NodeID), "unknown_kind"
	} else if err, stack = callHandler(ctx, reg.handler, j); stack != "" {
		errKind = "panic"
	}
	w.metrics.forKind(j.Queue, j.Kind).runDuration.Observe(time.Since(start).Seconds())

	e.mu.Lock()
	released := e.released
	e.finished = true
	e.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.executing, e.lease)
		w.mu.Unlock()
	}()
	if released {
		return // the lease went back at the drain deadline; another attempt owns the job
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrLeaseLost) {
		w.log.Debug("attempt ended after losing its lease; outcome discarded", "job_id", j.ID, "attempt", j.Attempt)
		return
	}
	if err != nil && errors.Is(cause, ErrTimeout) && errKind == "error" {
		errKind = "timeout"
	}
	w.record(e, err, errKind, stack, cause, backoffFor(reg, known))
}

func backoffFor(reg registration, known bool) Backoff {
	if known && reg.opts.Backoff != nil {
		return reg.opts.Backoff
	}
	return DefaultBackoff
}

// record writes an attempt's outcome, compare-and-set on its lease.
func (w *Worker) record(e *execution, err error, errKind, stack string, cause error, backoff Backoff) {
	j := e.job
	var (
		snooze *SnoozeError
		cancel *CancelError
		perm   *PermanentError
	)
	switch {
	case err == nil && j.completedInTx:
		w.metrics.forKind(j.Queue, j.Kind).completed.Inc() // committed by the handler's own transaction
		return
	case err == nil:
		w.completer.add(completion{c: store.Completion{Lease: e.lease, Result: j.result}, queue: j.Queue, kind: j.Kind})
		return
	case errors.As(err, &snooze):
		w.write(e, "snooze", func(ctx context.Context) error {
			_, err := w.store.SnoozeJob(ctx, e.lease, snooze.Delay)
			return err
		}, w.metrics.snoozed)
		return
	case errors.As(err, &cancel) || errors.Is(cause, ErrCancelled):
		reason := "cancelled"
		if cancel != nil {
			reason = redact.URLs(cancel.Error())
		}
		w.write(e, "cancel", func(ctx context.Context) error {
			return w.store.CancelRunningJob(ctx, e.lease, reason)
		}, w.metrics.cancelled)
		return
	}
	// The message is stored and shown to the tenant's readers: no URL
	// passwords or query values (a failed call's error quotes its URL).
	f := store.Failure{Lease: e.lease, Message: redact.URLs(err.Error()), Kind: errKind, Stack: stack, Permanent: errors.As(err, &perm)}
	if f.Permanent && perm.kind != "" {
		f.Kind = perm.kind
	}
	var after *RetryAfterError
	switch {
	case f.Permanent:
	case errors.As(err, &after):
		f.RetryDelay = after.Delay
	default:
		f.RetryDelay = backoff.Delay(j.Attempt)
	}
	var state string
	w.write(e, "fail", func(ctx context.Context) error {
		var err error
		state, err = w.store.FailJob(ctx, f)
		return err
	}, nil)
	switch state {
	case string(Retrying):
		w.metrics.counter(w.metrics.retried, j.Queue, j.Kind).Inc()
	case string(Failed):
		w.metrics.counter(w.metrics.failed, j.Queue, j.Kind).Inc()
	case string(Cancelled):
		w.metrics.counter(w.metrics.cancelled, j.Queue, j.Kind).Inc()
	}
}

// write runs one outcome write with retries, counting a refusal as stale.
func (w *Worker) write(e *execution, op string, fn func(ctx context.Context) error, ok *prometheus.CounterVec) {
	err := retryWrite(fn)
	j := e.job
	switch {
	case errors.Is(err, store.ErrStale):
		w.stale(j, op)
	case err != nil:
		w.log.Error("record outcome; the job will run again after its lease expires", "job_id", j.ID, "op", op, "error", err)
	default:
		if ok != nil {
			w.metrics.counter(ok, j.Queue, j.Kind).Inc()
		}
		w.wakeAfterWrite(map[string]bool{j.Queue: true})
	}
}

func (w *Worker) stale(j *Job, op string) {
	w.metrics.counter(w.metrics.stale, j.Queue, j.Kind, op).Inc()
	w.log.Warn("write refused: the attempt no longer owns the job", "job_id", j.ID, "attempt", j.Attempt, "op", op)
	if w.onStale != nil {
		w.onStale(j.ID, op)
	}
}

// callHandler runs the handler, turning a panic into an error and a stack.
func callHandler(ctx context.Context, h Handler, j *Job) (err error, stack string) {
	defer func() {
		if r := recover(); r != nil {
			err, stack = fmt.Errorf("panic: %v", r), string(debug.Stack())
		}
	}()
	return h.Work(ctx, j), ""
}

// watch heartbeats running attempts whose lease is a third spent and
// checks the others for cancellation requests.
func (w *Worker) watch(ctx context.Context) {
	ticker := time.NewTicker(w.cfg.CheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			w.checkRunning(ctx)
		}
	}
}

func (w *Worker) checkRunning(ctx context.Context) {
	now := time.Now()
	w.mu.Lock()
	var renew, check []*execution
	for _, e := range w.executing {
		e.mu.Lock()
		switch {
		case e.finished || e.released || e.lost:
		case now.Sub(e.renewedAt) >= w.cfg.LeaseTTL/3:
			renew = append(renew, e)
		case now.Sub(e.started) >= w.cfg.CheckInterval:
			check = append(check, e)
		}
		e.mu.Unlock()
	}
	w.mu.Unlock()
	if len(renew) > 0 {
		w.heartbeat(ctx, renew)
	}
	if len(check) > 0 {
		ids := make([]int64, len(check))
		for i, e := range check {
			ids[i] = e.lease.ID
		}
		cancelled, err := w.store.CancelRequestedAmong(ctx, ids)
		if err != nil {
			w.log.Warn("check running jobs for cancellation", "error", err)
			return
		}
		for _, id := range cancelled {
			w.CancelLocal(id)
		}
	}
}

func (w *Worker) heartbeat(ctx context.Context, es []*execution) {
	leases := make([]store.Lease, len(es))
	for i, e := range es {
		leases[i] = e.lease
	}
	sent := time.Now()
	res, err := w.store.HeartbeatJobs(ctx, leases, w.cfg.LeaseTTL)
	if err != nil {
		// The lease still has two thirds of its time: try again next tick.
		w.log.Warn("heartbeat running jobs", "jobs", len(es), "error", err)
		return
	}
	got := make(map[int64]bool, len(res))
	for _, r := range res {
		got[r.ID] = true
		if r.CancelRequested {
			w.CancelLocal(r.ID)
		}
	}
	for _, e := range es {
		e.mu.Lock()
		lost := !got[e.lease.ID] && !e.finished && !e.released && !e.lost
		if got[e.lease.ID] {
			e.renewedAt = sent
		}
		if lost {
			e.lost = true
		}
		e.mu.Unlock()
		if lost {
			w.stale(e.job, "heartbeat")
			e.cancel(ErrLeaseLost)
		}
	}
}

// RunningJobs lists the ids of attempts running on this node, sorted.
func (w *Worker) RunningJobs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.executing))
	for l := range w.executing {
		ids = append(ids, l.ID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func jitter(d time.Duration, frac float64) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*frac*float64(d))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Queues returns the queues this worker claims from, with concurrency.
func (w *Worker) Queues() map[string]int {
	out := make(map[string]int, len(w.cfg.Queues))
	for q, n := range w.cfg.Queues {
		out[q] = n
	}
	return out
}
