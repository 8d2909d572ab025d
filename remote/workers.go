package remote

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Config configures Workers. Zero values take the defaults shown.
type Config struct {
	Pool *pgxpool.Pool // required
	// Metrics counts the remote attempts. Default: a *job.Metrics
	// registered nowhere; a node gives its own, so that remote attempts
	// count in the series its worker's do.
	Metrics Metrics
	Logger  hclog.Logger
	// LeaseTTL is how long a remote claim holds a job without a heartbeat.
	// Default 30s; a node gives its own.
	LeaseTTL time.Duration
	// MaxWait bounds how long one claim may wait for work. Default 30s.
	MaxWait time.Duration
	// PollInterval: while a claim waits, how often it also looks for work
	// no notification announces (a retry whose backoff ended, a rate
	// limit's refilled token, a slot freed on another node). Default 1s.
	PollInterval time.Duration
	// MaxClaim caps the jobs one claim takes. Default 1000.
	MaxClaim int
	// SilentAfter: a remote worker not heard from (no claim, no
	// heartbeat) for this long is marked lost in the nodes view. Its jobs
	// do not wait for it: their leases expire after LeaseTTL and the lease
	// rescuer runs them again. Default MaxWait + 2×LeaseTTL.
	SilentAfter time.Duration
	// Keep is how long a gone remote worker stays in the nodes view.
	// Default 10m.
	Keep time.Duration
	// MaxPerTenant caps a tenant's remote workers, live or gone within
	// Keep. Default 1000.
	MaxPerTenant int
	// MaxWaitingPerTenant caps the claims of a tenant's workers (its
	// spanning workers count as one tenant) that wait for work on this
	// node at once; past it a claim that finds nothing answers
	// ErrTooManyWaiting instead of waiting. A worker has one claim
	// waiting at a time (a later one replaces it). Default 256.
	MaxWaitingPerTenant int
	// SweepInterval: how often this node moves remote workers along
	// (drains, deadlines, silence) while any is live; five times that
	// while none is. Default 1s.
	SweepInterval time.Duration
	// CursorReset is job.WorkerConfig.CursorReset for remote claims. Default
	// 1s.
	CursorReset time.Duration
}

// Metrics counts what remote workers' attempts do: *job.Metrics.
type Metrics interface {
	// ObserveQueueWait records how long a claimed job waited from due to
	// claimed.
	ObserveQueueWait(queue, kind string, wait time.Duration)
	// CountOutcome counts an attempt's outcome once it is written
	// (job.OutcomeCompleted, job.OutcomeRetry, …).
	CountOutcome(queue, kind, outcome string)
	// CountStale counts a write refused because the attempt no longer
	// owned its job; op names the write.
	CountStale(queue, kind, op string)
}

func (c *Config) setDefaults() error {
	if c.Pool == nil {
		return errors.New("remote: Config.Pool is required")
	}
	for name, d := range map[string]time.Duration{"LeaseTTL": c.LeaseTTL, "MaxWait": c.MaxWait, "PollInterval": c.PollInterval,
		"SilentAfter": c.SilentAfter, "Keep": c.Keep, "SweepInterval": c.SweepInterval, "CursorReset": c.CursorReset} {
		if d < 0 {
			return fmt.Errorf("remote: Config.%s must not be negative, got %s", name, d)
		}
	}
	if c.MaxClaim < 0 || c.MaxPerTenant < 0 || c.MaxWaitingPerTenant < 0 {
		return errors.New("remote: Config.MaxClaim, MaxPerTenant and MaxWaitingPerTenant must not be negative")
	}
	if c.LeaseTTL > 0 && c.LeaseTTL < 500*time.Millisecond {
		return fmt.Errorf("remote: Config.LeaseTTL must be at least 500ms, got %s", c.LeaseTTL)
	}
	if c.Metrics == nil {
		c.Metrics = job.NewMetrics(nil)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.LeaseTTL, 30*time.Second)
	def(&c.MaxWait, 30*time.Second)
	def(&c.PollInterval, time.Second)
	def(&c.SilentAfter, c.MaxWait+2*c.LeaseTTL)
	def(&c.Keep, 10*time.Minute)
	def(&c.SweepInterval, time.Second)
	def(&c.CursorReset, time.Second)
	if c.MaxClaim == 0 {
		c.MaxClaim = 1000
	}
	if c.MaxPerTenant == 0 {
		c.MaxPerTenant = 1000
	}
	if c.MaxWaitingPerTenant == 0 {
		c.MaxWaitingPerTenant = 256
	}
	return nil
}

// Workers lets processes in any language work jobs over HTTP under
// the same fenced attempts as a node (G11): a remote worker registers,
// claims jobs of its tenant, queues and kinds (waiting for them up to
// MaxWait, woken by the same notifications that wake nodes), and records
// heartbeats, outcomes and progress with each attempt's lease. Every
// write is the store's compare-and-set on (job, attempt, lease token,
// running), the very statement a node's worker uses: once the attempt is
// no longer current it changes nothing and returns job.ErrLeaseLost.
//
// A remote worker is a row of the nodes table (kind "remote"): it is
// drained like a node (cluster.Admin.Drain: its claims return nothing,
// its running jobs may finish until the deadline, then they are
// released), its claims go through the same fairness and limit admission
// as a node's, and a worker that stops calling loses its leases when
// they expire, like a node. Any node serves any remote worker; each node
// runs the sweep that moves drains and silent workers along.
//
// Start and Stop run the sweep; the other methods work without it.
type Workers struct {
	cfg     Config
	store   *store.Store
	log     hclog.Logger
	metrics Metrics
	sweeper service.Runner
	// clock times the sweep, a claim's wait and polls, the claim cursors'
	// age and the release retries; leases and due times are the
	// database's. Tests set a fake one (SetClock in export_test.go).
	clock clock.Clock

	// Waiting claims (parking.go).
	mu      sync.Mutex
	parked  map[string]*waiter // by worker
	pollers map[string]*poller // by tenant
	ending  chan struct{}      // closed by EndWaits
	ended   bool
	polls   sync.WaitGroup // the pollers' loops

	cursorMu sync.Mutex
	cursors  map[cursorKey]*claimCursor

	rotor atomic.Uint32 // where a claim of several queues starts
}

// NewWorkers validates cfg and returns Workers whose sweep is
// stopped.
func NewWorkers(cfg Config) (*Workers, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Workers{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("remote_workers"), metrics: cfg.Metrics, clock: clock.Real,
		parked: map[string]*waiter{}, pollers: map[string]*poller{}, ending: make(chan struct{}),
		cursors: map[cursorKey]*claimCursor{}}, nil
}

// Errors of the remote worker calls.
var (
	// ErrUnknownWorker: no remote worker has that id (or it is another
	// tenant's).
	ErrUnknownWorker = errors.New("unknown remote worker")
	// ErrWorkerGone: the remote worker left (stopped) or was marked lost
	// after falling silent; register again. (A drained worker's claims
	// answer Draining instead.)
	ErrWorkerGone = errors.New("remote worker gone")
	// ErrTooManyWorkers: the tenant holds Config.MaxPerTenant
	// remote workers.
	ErrTooManyWorkers = errors.New("too many remote workers")
	// ErrTooManyWaiting: the claim found no job, and the tenant has
	// Config.MaxWaitingPerTenant claims waiting on this node already, so
	// it may not wait; claim again later.
	ErrTooManyWaiting = errors.New("too many waiting claims")
)

// Limits on what a remote worker names.
const (
	MaxQueues  = 32
	MaxKinds   = 256
	MaxNameLen = 64
)

// Registration is a remote worker to register.
type Registration struct {
	// Tenant is the tenant whose jobs it works, or AllTenants ("*") for
	// every tenant's (a spanning token's worker).
	Tenant string
	// Name and Version are shown in the nodes view (optional; printable,
	// at most MaxNameLen bytes each).
	Name, Version string
	// Queues it claims from: 1 to MaxQueues names.
	Queues []string
	// Kinds it claims: up to MaxKinds; none claims every kind in its
	// queues, as a node does.
	Kinds []string
}

// AllTenants is the tenant of a remote worker that works every tenant's
// jobs.
const AllTenants = store.AllTenants

// Worker is a registered remote worker and the timings it must keep.
type Worker struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Tenant  string   `json:"tenant"`
	Queues  []string `json:"queues"`
	Kinds   []string `json:"kinds"`
	// LeaseTTL is how long a claimed job is held without a heartbeat;
	// HeartbeatInterval (a third of it) how often to heartbeat; MaxWait
	// the longest a claim may wait.
	LeaseTTL          time.Duration `json:"-"`
	HeartbeatInterval time.Duration `json:"-"`
	MaxWait           time.Duration `json:"-"`
}

func (reg *Registration) check() error {
	if reg.Tenant != AllTenants {
		if err := job.ValidateName("tenant", reg.Tenant); err != nil {
			return err
		}
	}
	for field, v := range map[string]string{"name": reg.Name, "version": reg.Version} {
		if err := checkLabel(field, v); err != nil {
			return err
		}
	}
	if len(reg.Queues) == 0 || len(reg.Queues) > MaxQueues {
		return &job.ValidationError{Field: "queues", Message: fmt.Sprintf("name 1 to %d queues, got %d", MaxQueues, len(reg.Queues))}
	}
	for _, q := range reg.Queues {
		if err := job.ValidateName("queues", q); err != nil {
			return err
		}
	}
	if len(reg.Kinds) > MaxKinds {
		return &job.ValidationError{Field: "kinds", Message: fmt.Sprintf("name at most %d kinds, got %d", MaxKinds, len(reg.Kinds))}
	}
	for _, k := range reg.Kinds {
		if err := job.ValidateKind(k); err != nil {
			return &job.ValidationError{Field: "kinds", Message: err.(*job.ValidationError).Message}
		}
	}
	reg.Queues = dedupe(reg.Queues)
	reg.Kinds = dedupe(reg.Kinds)
	return nil
}

// checkLabel checks a short text a worker names itself with: shown to
// operators, so printable and bounded.
func checkLabel(field, v string) error {
	if len(v) > MaxNameLen || !utf8.ValidString(v) {
		return &job.ValidationError{Field: field, Message: fmt.Sprintf("must be UTF-8 of at most %d bytes", MaxNameLen)}
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return &job.ValidationError{Field: field, Message: fmt.Sprintf("must be printable, got %U", r)}
		}
	}
	return nil
}

func dedupe(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// Register records a new remote worker and returns it with its id.
// Errors: *job.ValidationError, ErrTooManyWorkers.
func (r *Workers) Register(ctx context.Context, reg Registration) (Worker, error) {
	if err := reg.check(); err != nil {
		return Worker{}, err
	}
	if reg.Name == "" {
		reg.Name = "remote"
	}
	for range 3 {
		b := make([]byte, 8)
		crand.Read(b)
		id := "rw_" + hex.EncodeToString(b)
		err := r.store.RegisterRemoteWorker(ctx, store.RemoteWorkerParams{ID: id, Name: reg.Name, Version: reg.Version,
			Tenant: reg.Tenant, Queues: reg.Queues, Kinds: reg.Kinds, MaxPerTenant: r.cfg.MaxPerTenant})
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case errors.Is(err, store.ErrTooMany):
			return Worker{}, fmt.Errorf("%w: tenant %q has %d", ErrTooManyWorkers, reg.Tenant, r.cfg.MaxPerTenant)
		case err != nil:
			return Worker{}, err
		}
		r.log.Info("remote worker registered", "worker", id, "tenant", reg.Tenant, "queues", reg.Queues, "kinds", len(reg.Kinds))
		return Worker{ID: id, Name: reg.Name, Version: reg.Version, Tenant: reg.Tenant, Queues: reg.Queues, Kinds: reg.Kinds,
			LeaseTTL: r.cfg.LeaseTTL, HeartbeatInterval: r.cfg.LeaseTTL / 3, MaxWait: r.cfg.MaxWait}, nil
	}
	return Worker{}, errors.New("register remote worker: no free id")
}

// Leave records that a remote worker stopped and releases the jobs it
// still runs, without using up their attempts, so that others run them
// at once. tenant is the caller's ("" for a spanning caller). Errors:
// ErrUnknownWorker (also for one already gone).
func (r *Workers) Leave(ctx context.Context, tenant, worker string) (released int, err error) {
	if err := r.store.RemoteWorkerLeft(ctx, worker, tenant); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return 0, fmt.Errorf("%w %q", ErrUnknownWorker, worker)
		}
		return 0, err
	}
	r.wakeWorker(worker)
	n, err := r.store.ReleaseNodeJobs(ctx, []string{worker}, "released: remote worker "+worker+" stopped before the job finished")
	if err != nil {
		// Their leases expire and the lease rescuer runs them again.
		return 0, err
	}
	r.log.Info("remote worker left", "worker", worker, "released", n)
	return n, nil
}

// Start begins this node's sweep of the remote workers: drain orders,
// drain deadlines, drains finished, silent workers. Non-blocking and
// idempotent; ctx bounds the loop.
func (r *Workers) Start(ctx context.Context) error {
	r.sweeper.Start(ctx, r.sweepLoop)
	return nil
}

// Stop ends the sweep and every claim waiting for work (they return
// empty at once), and waits for the sweep and the waiting claims'
// pollers to return.
func (r *Workers) Stop() {
	r.EndWaits()
	r.sweeper.Stop()
	r.polls.Wait()
}

func (r *Workers) sweepLoop(ctx context.Context) {
	interval := 5 * r.cfg.SweepInterval
	for {
		t := r.clock.NewTimer(interval + time.Duration((rand.Float64()*0.2-0.1)*float64(interval)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		res, err := r.sweep(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("sweep remote workers", "error", err)
			}
			continue
		}
		interval = 5 * r.cfg.SweepInterval
		if res.Live > 0 {
			interval = r.cfg.SweepInterval
		}
	}
}

// sweep moves the remote workers along once: see Workers.Start.
func (r *Workers) sweep(ctx context.Context) (store.RemoteSweep, error) {
	res, err := r.store.SweepRemoteWorkers(ctx, r.cfg.SilentAfter, r.cfg.Keep)
	if err != nil {
		return res, err
	}
	if res.Released > 0 || res.Drained > 0 || res.Lost > 0 {
		r.log.Info("remote workers swept", "released_jobs", res.Released, "drained", res.Drained, "lost", res.Lost, "live", res.Live)
	}
	return res, nil
}
