package cron

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// Fence runs leader-only writes: fn's statements commit only while this
// node leads (cluster.Cluster provides it).
type Fence interface {
	Do(ctx context.Context, fn func(q store.DB) error) error
}

// SchedulerConfig configures a Scheduler. Zero values take the defaults.
type SchedulerConfig struct {
	Store *store.Store // required
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
	// HistoryRetention: how long occurrence history is kept. Default 7 days.
	HistoryRetention time.Duration
}

// Scheduler is the leader-only service that turns cron entries into jobs.
// It sleeps until the earliest cursor (by the database clock), woken early
// by Wake when entries change, then fires every due entry in its own
// fenced transaction.
type Scheduler struct {
	cfg     SchedulerConfig
	log     hclog.Logger
	metrics *metrics
	runner  service.Runner
	wake    chan struct{}

	mu          sync.Mutex
	broken      map[string]time.Time // entries whose schedule fails to parse, by updated_at
	lastCleanup time.Time
}

// NewScheduler validates cfg and returns a stopped scheduler.
func NewScheduler(cfg SchedulerConfig) (*Scheduler, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("cron: SchedulerConfig.Store is required")
	case cfg.Fence == nil:
		return nil, errors.New("cron: SchedulerConfig.Fence is required")
	case cfg.MisfireGrace < 0 || cfg.MaxSleep < 0 || cfg.HistoryRetention < 0:
		return nil, errors.New("cron: SchedulerConfig durations must not be negative")
	}
	if cfg.MisfireGrace == 0 {
		cfg.MisfireGrace = time.Minute
	}
	if cfg.MaxSleep == 0 {
		cfg.MaxSleep = time.Minute
	}
	if cfg.HistoryRetention == 0 {
		cfg.HistoryRetention = 7 * 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Scheduler{cfg: cfg, log: cfg.Logger.Named("cron"), metrics: newMetrics(cfg.Registerer),
		wake: make(chan struct{}, 1), broken: map[string]time.Time{}}, nil
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
		t := time.NewTimer(min(max(wait, 0), s.cfg.MaxSleep))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-s.wake:
			t.Stop()
		}
	}
}

// RunOnce fires every due entry and returns how long until the next one
// is due, by the database clock.
func (s *Scheduler) RunOnce(ctx context.Context) (time.Duration, error) {
	for {
		due, now, err := s.cfg.Store.DueCronEntries(ctx, 100)
		if err != nil {
			return 0, err
		}
		fired := 0
		for _, e := range due {
			ok, err := s.fire(ctx, e, now)
			if err != nil {
				return 0, err
			}
			if ok {
				fired++
			}
		}
		if len(due) < 100 || fired == 0 {
			break
		}
	}
	s.cleanup(ctx)
	wait, ok, err := s.cfg.Store.NextCronDue(ctx)
	if err != nil {
		return 0, err
	}
	if !ok {
		return s.cfg.MaxSleep, nil
	}
	return wait, nil
}

// maxEnumerate bounds the occurrences counted for one entry in one pass
// (a week of "@every 1s" is 604,800).
const maxEnumerate = 2_000_000

// fire decides what becomes of one entry's due occurrences and records it
// in a fenced transaction. It reports whether anything was written.
func (s *Scheduler) fire(ctx context.Context, e store.CronEntry, now time.Time) (bool, error) {
	key := e.Tenant + "/" + e.Name
	s.mu.Lock()
	brokenAt, broken := s.broken[key]
	s.mu.Unlock()
	if broken && brokenAt.Equal(e.UpdatedAt) {
		return false, nil
	}
	sched, err := Parse(e.Schedule, e.Timezone)
	if err != nil {
		s.log.Error("cron entry's schedule no longer parses; skipping it until it is updated", "entry", key, "error", err)
		s.mu.Lock()
		s.broken[key] = e.UpdatedAt
		s.mu.Unlock()
		return false, nil
	}
	plan := planOccurrences(sched, e, now, s.cfg.MisfireGrace)
	firing := store.CronFiring{Tenant: e.Tenant, Name: e.Name, OldCursor: e.NextRunAt, NewCursor: plan.next,
		Occurrences: plan.occurrences, Job: e.Job, SkipIfBusy: e.Overlap == OverlapSkip}
	var recorded []store.CronOccurrence
	err = s.cfg.Fence.Do(ctx, func(q store.DB) error {
		var err error
		recorded, err = s.cfg.Store.FireCron(ctx, q, firing)
		return err
	})
	if errors.Is(err, store.ErrCursorMoved) {
		return false, nil // edited or paused meanwhile: the next pass sees the new state
	}
	if err != nil {
		return false, fmt.Errorf("fire cron entry %s: %w", key, err)
	}
	for _, o := range recorded {
		s.metrics.occurrences.WithLabelValues(o.Status).Add(float64(max(o.Count, 1)))
		if o.Status == "fired" {
			s.metrics.lateness.Observe(now.Sub(o.ScheduledAt).Seconds())
		}
		if o.Status == "missed" || o.Status == "skipped" {
			s.log.Info("cron occurrence not fired", "entry", key, "scheduled_at", o.ScheduledAt, "status", o.Status, "count", o.Count, "reason", o.Reason)
		}
	}
	return true, nil
}

type plan struct {
	occurrences []store.CronOccurrence
	next        time.Time
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
	if next.IsZero() {
		next = now.Add(24 * time.Hour) // nothing within the horizon: look again tomorrow
	}
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

// cleanup deletes old history, at most hourly.
func (s *Scheduler) cleanup(ctx context.Context) {
	if time.Since(s.lastCleanup) < time.Hour {
		return
	}
	s.lastCleanup = time.Now()
	err := s.cfg.Fence.Do(ctx, func(q store.DB) error {
		_, err := s.cfg.Store.DeleteOldCronOccurrences(ctx, q, s.cfg.HistoryRetention, 10000)
		return err
	})
	if err != nil && !errors.Is(err, service.ErrNotLeader) {
		s.log.Warn("delete old cron history", "error", err)
	}
}
