package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// HorizonWatch defaults.
const (
	DefaultHorizonWatchInterval = 5 * time.Second
	DefaultHorizonWarnAfter     = time.Minute
)

// HorizonGauge is the gauge a HorizonWatch sets: *job.Metrics.
type HorizonGauge interface {
	SetHorizonHeld(time.Duration)
}

// HorizonWatchConfig configures a HorizonWatch.
type HorizonWatchConfig struct {
	Pool    *pgxpool.Pool // required
	Metrics HorizonGauge  // required
	Logger  hclog.Logger
	// Interval between reads of the horizon. Default 5s.
	Interval time.Duration
	// WarnAfter is how long a transaction holds the horizon before the
	// watch says so in the log and in Health. Default 1m.
	WarnAfter time.Duration
	// Speak reports whether this watch is the one that logs (the
	// leader's: one warning a cluster). Nil: always.
	Speak func() bool
}

// HorizonWatch tells the operator about a long transaction that keeps
// vacuum from removing gaffer.jobs' dead rows: a session idle in
// transaction, a long REPEATABLE READ report, a replication slot or a
// prepared transaction, anywhere on the server. While one holds the
// transaction horizon, every claim walks the index entries of the jobs
// claimed since it began, and pickup slows by the minute
// (docs/benchmarks.md, "Pressure: a held snapshot"); nothing in Gaffer
// can free them, so the watch names the holder: the gauge
// gaffer_db_horizon_held_seconds, a line in Health (the cluster status
// and the dashboard) and a warning in the log once it has held for
// WarnAfter, and a line when it lets go.
//
// A holder is the same while the horizon stands still: each read, the
// horizon is compared with the last. How long it has held is the longer
// of the time since the watch first saw that horizon and the age of the
// holder's transaction where PostgreSQL shows it. Every node runs one,
// so that each node's status tells; only the one Speak names logs.
type HorizonWatch struct {
	cfg    HorizonWatchConfig
	store  *store.Store
	log    hclog.Logger
	runner service.Runner
	clock  clock.Clock

	// The loop's own state (RunOnce is not safe for concurrent use).
	horizon int64     // the horizon a holder held at the last read; 0: none
	seen    time.Time // when the watch first read that horizon
	warned  bool      // whether it warned about that holder

	mu      sync.Mutex
	held    store.Horizon // the holder past WarnAfter, for Health
	heldFor time.Duration // how long it had held at the last read
}

// NewHorizonWatch validates cfg and returns a stopped watch.
func NewHorizonWatch(cfg HorizonWatchConfig) (*HorizonWatch, error) {
	switch {
	case cfg.Pool == nil || cfg.Metrics == nil:
		return nil, errors.New("HorizonWatchConfig.Pool and .Metrics are required")
	case cfg.Interval < 0:
		return nil, errors.New("HorizonWatchConfig.Interval must not be negative")
	case cfg.WarnAfter < 0:
		return nil, errors.New("HorizonWatchConfig.WarnAfter must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultHorizonWatchInterval
	}
	if cfg.WarnAfter == 0 {
		cfg.WarnAfter = DefaultHorizonWarnAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Speak == nil {
		cfg.Speak = func() bool { return true }
	}
	return &HorizonWatch{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("horizon"), clock: clock.Real}, nil
}

// Start begins watching in the background; non-blocking and idempotent.
func (w *HorizonWatch) Start(ctx context.Context) error {
	w.runner.Start(ctx, w.loop)
	return nil
}

// Stop ends the loop and waits for it. The gauge goes to zero: the next
// leader's watch reports from then on.
func (w *HorizonWatch) Stop() {
	w.runner.Stop()
	w.cfg.Metrics.SetHorizonHeld(0)
	w.setHeld(store.Horizon{}, 0)
}

func (w *HorizonWatch) loop(ctx context.Context) {
	for {
		if err := w.RunOnce(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("read the transaction horizon", "error", err)
		}
		if !clock.Sleep(ctx, w.clock, w.cfg.Interval) {
			return
		}
	}
}

// RunOnce reads the horizon and what holds it, sets the gauge, and warns
// or tells of a release as due. Not safe for concurrent use.
func (w *HorizonWatch) RunOnce(ctx context.Context) error {
	h, err := w.store.HorizonHolder(ctx)
	if err != nil {
		return err
	}
	now := w.clock.Now()
	held := h.Kind != ""
	// An older horizon than the one held does not end the hold: whatever
	// showed it came and went within the read (a snapshot taken in the
	// holder's shadow), while the holder stays. A newer one, or none,
	// does.
	if held && w.horizon != 0 && h.Horizon < w.horizon {
		h.Horizon = w.horizon
	}
	if !held || h.Horizon != w.horizon {
		if w.warned {
			w.log.Info("the transaction that held back vacuum let go", "held_for", now.Sub(w.seen).Round(time.Second))
		}
		w.horizon, w.seen, w.warned = 0, now, false
		if held {
			w.horizon = h.Horizon
		}
	}
	if !held {
		w.cfg.Metrics.SetHorizonHeld(0)
		w.setHeld(store.Horizon{}, 0)
		return nil
	}
	d := max(now.Sub(w.seen), h.Age)
	w.cfg.Metrics.SetHorizonHeld(d)
	if d < w.cfg.WarnAfter {
		w.setHeld(store.Horizon{}, 0)
		return nil
	}
	w.setHeld(h, d)
	if !w.warned && w.cfg.Speak() {
		w.warned = true
		// The strings are whatever the holding session's client set:
		// bounded here, quoted by the logger.
		w.log.Warn("a transaction keeps vacuum from removing gaffer.jobs' dead rows: claims slow down until it ends; "+
			"end it, or bound such sessions (idle_in_transaction_session_timeout; docs/operations.md, Long transactions)",
			"held_for", d.Round(time.Second), "holder", h.Kind, "pid", h.PID, "role", clipped(h.Role), "name", clipped(h.Name),
			"client", clipped(h.Client), "state", clipped(h.State))
	}
	return nil
}

func (w *HorizonWatch) setHeld(h store.Horizon, d time.Duration) {
	w.mu.Lock()
	w.held, w.heldFor = h, d
	w.mu.Unlock()
}

// Health says, in words, that a transaction has held back vacuum for
// WarnAfter or longer, as of the last read; nothing otherwise. identify
// names the holder (for an operator's token: a tenant's would learn who
// else uses the database). Safe for concurrent use.
func (w *HorizonWatch) Health(identify bool) []string {
	w.mu.Lock()
	h, d := w.held, w.heldFor
	w.mu.Unlock()
	if h.Kind == "" {
		return nil
	}
	what := "a long transaction on the database"
	if identify {
		what = "a " + h.Kind
		if h.PID != 0 {
			what += fmt.Sprintf(" (pid %d)", h.PID)
		}
		for _, f := range []struct{ k, v string }{{"role", h.Role}, {"name", h.Name}, {"client", h.Client}, {"state", h.State}} {
			if f.v != "" {
				what += fmt.Sprintf(" %s %q", f.k, clipped(f.v))
			}
		}
	}
	return []string{fmt.Sprintf("%s has kept vacuum from removing gaffer.jobs' dead rows for %s: claims slow down until it ends (docs/operations.md, Long transactions)",
		what, d.Round(time.Second))}
}

// maxHolderText bounds each string about a holder that the log repeats.
const maxHolderText = 64

// clipped shortens s to at most maxHolderText bytes, on a character
// boundary.
func clipped(s string) string {
	n := maxHolderText
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
