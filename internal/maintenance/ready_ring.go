package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// ReadyRing defaults.
const (
	DefaultReadyRingInterval = time.Second
	DefaultReadyRingMoveMax  = 5000
	DefaultReadyRingWait     = 50 * time.Millisecond
	// After this long without a turn for want of the lock, the ring says so.
	readyRingStuckAfter = time.Minute
)

// ReadyRingConfig configures a ReadyRing.
type ReadyRingConfig struct {
	Pool   *pgxpool.Pool // required
	Logger hclog.Logger
	// Interval between turns. Default 1s: a claim walks at most about two
	// intervals of rows the claims before it took.
	Interval time.Duration
	// MoveMax is the most rows a slot may hold to be emptied; a slot with
	// more (a backlog) stays until claims have taken them. Default 5,000.
	MoveMax int
	// Wait is how long a turn waits for the slot's lock. Claims queue
	// behind it meanwhile (a turn waits only for the claims already under way). Default 50ms;
	// a turn that could not have the lock is tried again after a quarter of Interval.
	Wait time.Duration
}

// ReadyRing turns the ready set's ring (store/schema/ready.sql): every
// Interval, the slot of gaffer.ready written two steps ago is emptied by
// TRUNCATE, which leaves no dead row behind for the claims to walk, even
// while a long transaction keeps vacuum from removing any. The leader
// runs it. A turn that cannot have the slot's lock in time, or finds a
// backlog in it, is skipped; the ring then waits, and the ready set's
// dead rows wait for vacuum as gaffer.jobs' do.
type ReadyRing struct {
	cfg    ReadyRingConfig
	store  *store.Store
	log    hclog.Logger
	runner service.Runner
	clock  clock.Clock

	// The loop's own state.
	lockedSince time.Time // first turn skipped for the lock, in a row; zero: none
	warned      bool
}

// NewReadyRing validates cfg and returns a stopped ring.
func NewReadyRing(cfg ReadyRingConfig) (*ReadyRing, error) {
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("ReadyRingConfig.Pool is required")
	case cfg.Interval < 0 || cfg.MoveMax < 0 || cfg.Wait < 0:
		return nil, errors.New("ReadyRingConfig.Interval, .MoveMax and .Wait must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultReadyRingInterval
	}
	if cfg.MoveMax == 0 {
		cfg.MoveMax = DefaultReadyRingMoveMax
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultReadyRingWait
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &ReadyRing{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("ready-ring"), clock: clock.Real}, nil
}

// Start begins turning in the background; non-blocking and idempotent.
func (r *ReadyRing) Start(ctx context.Context) error {
	r.runner.Start(ctx, r.loop)
	return nil
}

// Stop ends the loop and waits for it.
func (r *ReadyRing) Stop() { r.runner.Stop() }

func (r *ReadyRing) loop(ctx context.Context) {
	for {
		wait := r.cfg.Interval
		t, err := r.RunOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Error("turn the ready ring", "error", err)
		case t.Why == "locked":
			wait /= 4
		}
		if !clock.Sleep(ctx, r.clock, wait) {
			return
		}
	}
}

// RunOnce turns the ring one step if it can. Not safe for concurrent use
// (the database serialises turns all the same).
func (r *ReadyRing) RunOnce(ctx context.Context) (store.ReadyTurn, error) {
	t, err := r.store.TurnReadyRing(ctx, r.cfg.MoveMax, r.cfg.Wait)
	if err != nil {
		return t, err
	}
	now := r.clock.Now()
	if t.Why != "locked" {
		if r.warned {
			r.log.Info("the ready ring turns again")
		}
		r.lockedSince, r.warned = time.Time{}, false
		return t, nil
	}
	if r.lockedSince.IsZero() {
		r.lockedSince = now
	}
	if !r.warned && now.Sub(r.lockedSince) >= readyRingStuckAfter {
		r.warned = true
		r.log.Warn("a transaction keeps a lock on gaffer.ready: the ready ring has not turned, and claims walk more dead rows as it waits; "+
			"gaffer.ready is Gaffer's own, read it only in short transactions", "for", now.Sub(r.lockedSince).Round(time.Second))
	}
	return t, nil
}
