package cron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Fence runs leader-only writes: fn's statements commit only while this
// node leads (cluster.Cluster provides it).
type Fence interface {
	Do(ctx context.Context, fn func(q pgx.Tx) error) error
}

// SchedulerConfig configures a Scheduler. Zero values take the defaults.
type SchedulerConfig struct {
	Pool *pgxpool.Pool // required
	// Fence guards every firing. Required: cron must only fire on the
	// proven leader.
	Fence      Fence
	Logger     hclog.Logger
	Registerer prometheus.Registerer
	// MisfireGrace: an occurrence handled more than this after its instant
	// counts as missed, and its entry's missed-fire policy decides. Handled
	// within it, it fires, however late: this covers a leader failover.
	// Default 1m.
	MisfireGrace time.Duration
	// MaxSleep caps the wait between evaluations, a backstop for a missed
	// wake-up. Default 1m.
	MaxSleep time.Duration
	// TenantFireRate is how many jobs per second one tenant's entries may
	// make, sustained, and TenantFireBurst how many at once: cron-made
	// jobs are metered like a token's API requests. A tenant past its
	// budget waits — its due entries fire as it refills, late (past
	// MisfireGrace, by their missed-fire policy) — and no other tenant's
	// entry waits for it. Defaults 200 and twice the rate; a negative
	// rate leaves cron unmetered.
	TenantFireRate  float64
	TenantFireBurst int
}

// Scheduler is the leader-only service that turns cron entries into jobs.
// It sleeps until the earliest cursor (by the database clock), woken early
// by Wake when entries change, then fires every due entry, round-robin
// by tenant, each tenant within its fire budget, several entries to a
// fenced transaction (each under a savepoint of its own). An entry it cannot fire gets the error recorded on it and is
// held back by a backoff; the others fire regardless.
type Scheduler struct {
	cfg     SchedulerConfig
	store   *store.Store
	log     hclog.Logger
	metrics *metrics
	runner  service.Runner
	wake    chan struct{}
	clock   clock.Clock // when to look again, and budgets; due times are the database's
	budget  *fireBudget
}

// NewScheduler validates cfg and returns a stopped scheduler.
func NewScheduler(cfg SchedulerConfig) (*Scheduler, error) {
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("cron: SchedulerConfig.Pool is required")
	case cfg.Fence == nil:
		return nil, errors.New("cron: SchedulerConfig.Fence is required")
	case cfg.MisfireGrace < 0 || cfg.MaxSleep < 0:
		return nil, errors.New("cron: SchedulerConfig durations must not be negative")
	case cfg.TenantFireBurst < 0:
		return nil, errors.New("cron: SchedulerConfig.TenantFireBurst must not be negative")
	}
	if cfg.TenantFireRate == 0 {
		cfg.TenantFireRate = DefaultTenantFireRate
	}
	if cfg.TenantFireBurst == 0 {
		cfg.TenantFireBurst = max(1, int(2*cfg.TenantFireRate))
	}
	if cfg.MisfireGrace == 0 {
		cfg.MisfireGrace = time.Minute
	}
	if cfg.MaxSleep == 0 {
		cfg.MaxSleep = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Scheduler{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("cron"), metrics: newMetrics(cfg.Registerer),
		wake: make(chan struct{}, 1), clock: clock.Real, budget: newFireBudget(cfg.TenantFireRate, cfg.TenantFireBurst)}, nil
}

// Start begins evaluating in the background; non-blocking, idempotent.
func (s *Scheduler) Start(ctx context.Context) error {
	s.runner.Start(ctx, s.loop)
	return nil
}

// Stop ends the loop and waits for it.
func (s *Scheduler) Stop() { s.runner.Stop() }

// Wake makes the scheduler re-read the entries now (an entry changed).
// It does not block.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) loop(ctx context.Context) {
	for {
		wait, err := s.RunOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, service.ErrNotLeader):
			wait = time.Second
		case err != nil:
			s.log.Error("evaluate cron entries", "error", err)
			wait = time.Second
		}
		t := s.clock.NewTimer(min(max(wait, 0), s.cfg.MaxSleep))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-s.wake:
			t.Stop()
		}
	}
}

// DefaultTenantFireRate is the jobs per second one tenant's cron entries
// may make by default: the API's default request rate per token.
const DefaultTenantFireRate = 200

// turnBatch is how many due entries one pass reads. Small, because an
// entry that falls due meanwhile waits for the rest of the batch: with
// entries read round-robin by tenant, another tenant's entry waits at
// most one batch, however many entries one tenant has due.
const turnBatch = 16

// fireBatch is how many entries' firings share one fenced transaction:
// a firing is a few statements, and the transaction's begin, fence
// check and commit cost as much again.
const fireBatch = 8

// RunOnce fires every due entry its tenant's budget allows and returns
// how long until the next one is due, by the database clock, or until a
// waiting tenant's budget refills.
func (s *Scheduler) RunOnce(ctx context.Context) (time.Duration, error) {
	var refill time.Duration
	for {
		var spent []string
		spent, refill = s.budget.spent(s.clock.Now())
		due, now, err := s.store.DueCronEntries(ctx, turnBatch, spent)
		if err != nil {
			return 0, err
		}
		read := len(due)
		fired := 0
		for len(due) > 0 {
			n := min(len(due), fireBatch)
			k, err := s.fireBatch(ctx, due[:n], now)
			if err != nil {
				return 0, err
			}
			fired += k
			due = due[n:]
		}
		if read < turnBatch || fired == 0 {
			// Fewer than a batch (or nothing fireable): what is left is
			// not due, or waits for a budget; spent again, in case this
			// pass spent some.
			if read > 0 {
				_, refill = s.budget.spent(s.clock.Now())
			}
			break
		}
	}
	spent, _ := s.budget.spent(s.clock.Now())
	wait, ok, err := s.store.NextCronDue(ctx, spent)
	if err != nil {
		return 0, err
	}
	switch {
	case !ok && refill == 0:
		return s.cfg.MaxSleep, nil
	case !ok:
		return refill, nil
	case refill > 0 && refill < wait:
		return refill, nil
	}
	return wait, nil
}

// maxEnumerate bounds the occurrences counted for one entry in one pass
// (a week of "@every 1s" is 604,800).
const maxEnumerate = 2_000_000

// firing is one entry's part of a batch.
type firing struct {
	e        store.CronEntry
	plan     store.CronFiring
	cause    error // the entry's own error, to record on it
	recorded []store.CronOccurrence
	written  bool
}

// fireBatch decides what becomes of the due occurrences of entries (in
// order, each within its tenant's budget) and records them in one
// fenced transaction, each entry's firing under a savepoint of its own:
// an entry whose cursor moved, or whose firing fails for its own reasons
// (its schedule, its template, the job insert), is rolled back to its
// savepoint and the others commit. The fence and each firing's keys and
// compare-and-set are as for a transaction of one: an occurrence still
// yields one job. It returns how many entries it wrote. Entry errors are
// recorded on their entries, not returned; an error returned is one of
// leadership or of the database, which ends this pass and writes
// nothing of the batch.
func (s *Scheduler) fireBatch(ctx context.Context, entries []store.CronEntry, now time.Time) (int, error) {
	batch := make([]*firing, 0, len(entries))
	for _, e := range entries {
		f := &firing{e: e}
		sched, err := Parse(e.Schedule, e.Timezone)
		if err != nil {
			f.cause = fmt.Errorf("the schedule no longer parses: %w", err)
			batch = append(batch, f)
			continue
		}
		if err := checkTemplate(e); err != nil {
			f.cause = fmt.Errorf("the job template is invalid: %w", err)
			batch = append(batch, f)
			continue
		}
		plan := planOccurrences(sched, e, now, s.cfg.MisfireGrace)
		// Paid for now, for the budget of the rest of the batch; a batch
		// that does not commit has spent it for nothing, rarely. One the
		// tenant cannot pay for waits: the next passes leave the tenant
		// out until it can.
		if !s.budget.take(e.Tenant, plannedJobs(plan.occurrences), s.clock.Now()) {
			s.metrics.budgetWaits.Inc()
			continue
		}
		f.plan = store.CronFiring{Tenant: e.Tenant, Name: e.Name, OldCursor: e.NextRunAt, NewCursor: plan.next,
			Occurrences: plan.occurrences, Job: e.Job, SkipIfBusy: e.Overlap == OverlapSkip}
		batch = append(batch, f)
	}
	err := s.cfg.Fence.Do(ctx, func(q pgx.Tx) error {
		for _, f := range batch {
			f.recorded, f.written = nil, false
			if f.cause != nil {
				continue
			}
			sp, err := q.Begin(ctx) // a savepoint
			if err != nil {
				return err
			}
			rec, err := s.store.FireCron(ctx, sp, f.plan)
			if err != nil {
				if rbErr := sp.Rollback(ctx); rbErr != nil {
					return errors.Join(err, rbErr)
				}
				switch {
				case errors.Is(err, store.ErrCursorMoved):
					// Edited or paused meanwhile: the next pass sees the
					// new state.
				case leadershipLost(ctx, err):
					return err
				default:
					f.cause = err
				}
				continue
			}
			if err := sp.Commit(ctx); err != nil {
				return err
			}
			f.recorded, f.written = rec, true
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	written := 0
	for _, f := range batch {
		if f.cause != nil {
			if err := s.failed(ctx, f.e, f.cause); err != nil {
				return written, err
			}
			continue
		}
		if !f.written {
			continue
		}
		written++
		key := f.e.Tenant + "/" + f.e.Name
		for _, o := range f.recorded {
			s.metrics.occurrences.WithLabelValues(o.Status).Add(float64(max(o.Count, 1)))
			if o.Status == "fired" {
				s.metrics.lateness.Observe(now.Sub(o.ScheduledAt).Seconds())
			}
			if o.Status == "missed" || o.Status == "skipped" {
				s.log.Info("cron occurrence not fired", "entry", key, "scheduled_at", o.ScheduledAt, "status", o.Status, "count", o.Count, "reason", o.Reason)
			}
		}
	}
	return written, nil
}

// plannedJobs is how many jobs occ would make (overlap skip may make
// fewer).
func plannedJobs(occ []store.CronOccurrence) int {
	n := 0
	for _, o := range occ {
		if o.Status == "fired" {
			n++
		}
	}
	return n
}

// leadershipLost: err says this node may not write as the leader (or is
// stopping), not that the entry is at fault.
func leadershipLost(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, service.ErrNotLeader) || errors.Is(err, store.ErrFenced)
}

// failed records why entry e could not be fired, on the entry, in a
// fenced transaction of its own: the firing's transaction has rolled back
// (Postgres aborts it at the failed statement), and only the leader may
// write the status, so a deposed leader cannot overwrite the current
// one's. Best effort: if that write fails too, both errors are returned
// and the pass ends; the entry is tried again next pass.
func (s *Scheduler) failed(ctx context.Context, e store.CronEntry, cause error) error {
	key := e.Tenant + "/" + e.Name
	var n int
	err := s.cfg.Fence.Do(ctx, func(q pgx.Tx) error {
		var err error
		n, err = s.store.RecordCronError(ctx, q, e.Tenant, e.Name, e.UpdatedAt, cause.Error())
		return err
	})
	if err != nil {
		if leadershipLost(ctx, err) {
			return err
		}
		return fmt.Errorf("cron entry %s: %w (and recording that failed: %w)", key, cause, err)
	}
	s.metrics.errors.Inc()
	if n == 0 {
		// Changed or deleted since it was read: the error was about a
		// version that no longer exists; the next pass sees the new one.
		s.log.Warn("cannot fire cron entry, which changed meanwhile", "entry", key, "error", cause)
		return nil
	}
	s.log.Error("cannot fire cron entry; recorded on the entry, retrying after a backoff", "entry", key, "consecutive_failures", n, "error", cause)
	return nil
}

// checkTemplate checks an entry's stored job template as an enqueue
// would, so that a template no longer valid (the rules changed, or the
// row was edited by hand) is reported on the entry by field.
func checkTemplate(e store.CronEntry) error {
	j := e.Job
	_, err := job.Request{Kind: j.Kind, Args: j.Args, Tenant: e.Tenant, Queue: j.Queue, Priority: j.Priority,
		MaxAttempts: j.MaxAttempts, Timeout: time.Duration(j.TimeoutMS) * time.Millisecond}.Check()
	var ve *job.ValidationError
	if errors.As(err, &ve) {
		return &job.ValidationError{Field: "job." + ve.Field, Message: ve.Message}
	}
	return err
}

type plan struct {
	occurrences []store.CronOccurrence
	next        time.Time // zero: the entry is done
}

// planOccurrences lists the due instants from the entry's cursor up to
// now and applies the missed-fire policy to those later than grace. Long
// runs of missed instants are recorded as one row with a count.
func planOccurrences(sched Schedule, e store.CronEntry, now time.Time, grace time.Duration) plan {
	var instants []time.Time
	t := e.NextRunAt
	for n := 0; !t.IsZero() && !t.After(now); n++ {
		if n >= maxEnumerate {
			// Give up counting: jump to the present.
			t = sched.Next(now)
			break
		}
		instants = append(instants, t)
		t = sched.Next(t)
	}
	next := t
	if _, oneShot := oneShotAt(sched); next.IsZero() && !oneShot {
		next = now.Add(24 * time.Hour) // nothing within the horizon: look again tomorrow
	}
	// A one-shot's next is zero once its instant is among those handled:
	// the entry is done.
	// Instants later than grace are missed; the rest are on time.
	firstOnTime := len(instants)
	for i, at := range instants {
		if now.Sub(at) <= grace {
			firstOnTime = i
			break
		}
	}
	missed, onTime := instants[:firstOnTime], instants[firstOnTime:]
	fireMissed := map[int]string{}
	switch e.Missed {
	case MissedOnce:
		if len(missed) > 0 {
			fireMissed[len(missed)-1] = fmt.Sprintf("missed-fire policy once: stands for %d missed occurrences", len(missed))
		}
	case MissedAll:
		for i := max(0, len(missed)-e.MissedCap); i < len(missed); i++ {
			fireMissed[i] = "missed-fire policy all: caught up"
		}
	}
	var occ []store.CronOccurrence
	run := 0 // length of the current run of missed, not fired instants
	flush := func(end int) {
		if run == 0 {
			return
		}
		first := missed[end-run]
		reason := fmt.Sprintf("missed-fire policy %s: not fired", e.Missed)
		if e.Missed == MissedAll {
			reason = fmt.Sprintf("missed-fire policy all: beyond the cap of %d", e.MissedCap)
		}
		if run > 1 {
			reason += fmt.Sprintf(" (%d occurrences, %s to %s)", run, first.Format(time.RFC3339), missed[end-1].Format(time.RFC3339))
		}
		occ = append(occ, store.CronOccurrence{ScheduledAt: first, Status: "missed", Reason: reason, Count: run})
		run = 0
	}
	for i, at := range missed {
		if why, ok := fireMissed[i]; ok {
			flush(i)
			occ = append(occ, store.CronOccurrence{ScheduledAt: at, Status: "fired", Reason: why, Count: 1})
			continue
		}
		run++
	}
	flush(len(missed))
	for _, at := range onTime {
		occ = append(occ, store.CronOccurrence{ScheduledAt: at, Status: "fired", Count: 1})
	}
	return plan{occurrences: occ, next: next}
}
