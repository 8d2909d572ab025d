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

// vacuumWatch is how often a vacuum asks whether it is in anyone's way.
const vacuumWatch = 200 * time.Millisecond

// Vacuumer defaults.
const (
	// DefaultVacuumThreshold is gaffer.jobs' own
	// autovacuum_vacuum_threshold (store/schema/tables.sql).
	DefaultVacuumThreshold = 20000
	DefaultVacuumInterval  = time.Second
)

// VacuumerConfig configures a Vacuumer.
type VacuumerConfig struct {
	Pool   *pgxpool.Pool // required
	Logger hclog.Logger
	// Threshold is how many dead rows gaffer.jobs gathers, beyond those
	// the last vacuum had to leave, before the next vacuum. Default
	// 20,000.
	Threshold int64
	// Interval between reads of the dead row count. Default 1s.
	Interval time.Duration
}

// Vacuumer vacuums gaffer.jobs when dead rows gather in it, instead of
// waiting for autovacuum. Every claim and completion leaves a dead row
// version, and a dead entry at the front of the claim index that the
// next claims walk over until a vacuum removes it; autovacuum looks at a
// database once per autovacuum_naptime (a minute by default), however
// low the table's thresholds, and at thousands of jobs a second a
// minute of dead entries slows every claim. With this a server's
// default settings are enough (docs/operations.md).
//
// It vacuums only when a vacuum can free something: when the dead rows
// grew by Threshold since the last vacuum, and the transaction horizon
// (store.XIDHorizon) moved since then — while a long transaction holds
// it, a vacuum removes nothing and costs a pass over the table, so it
// waits for the horizon instead. It never spends more than a third of its
// time vacuuming: after a vacuum that took d, the next waits at least 2d,
// and a vacuum runs in one process (PARALLEL 0), as autovacuum's do: a
// vacuum is overhead for a backlog, whose claims keep their place in the
// claim index and walk no dead entries (bench backlog: 4.6% with these
// bounds, 7% with half the time and parallel index passes). Its
// vacuums skip the table while another vacuum (autovacuum's) holds it,
// and step aside, as autovacuum does, for a session that waits for the
// table's lock (DDL): otherwise every claim would queue behind that
// session until the vacuum ended.
//
// Leader-only, unfenced: a vacuum changes no row a user can see, and a
// deposed leader's last one only costs time. A role that may not vacuum
// the table (not its owner) leaves it to autovacuum, which it says once.
type Vacuumer struct {
	cfg    VacuumerConfig
	store  *store.Store
	log    hclog.Logger
	runner service.Runner
	clock  clock.Clock

	// The loop's own state (RunOnce is not safe for concurrent use).
	pace vacuumPace
}

// NewVacuumer validates cfg and returns a stopped vacuumer.
func NewVacuumer(cfg VacuumerConfig) (*Vacuumer, error) {
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("VacuumerConfig.Pool is required")
	case cfg.Threshold < 0:
		return nil, errors.New("VacuumerConfig.Threshold must not be negative")
	case cfg.Interval < 0:
		return nil, errors.New("VacuumerConfig.Interval must not be negative")
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultVacuumThreshold
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultVacuumInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Vacuumer{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("vacuum"), clock: clock.Real,
		pace: vacuumPace{threshold: cfg.Threshold}}, nil
}

// Start begins watching in the background; non-blocking and idempotent.
func (v *Vacuumer) Start(ctx context.Context) error {
	v.runner.Start(ctx, v.loop)
	return nil
}

// Stop ends the loop and waits for it, and for a vacuum it was running
// (cancelled with the loop's context).
func (v *Vacuumer) Stop() { v.runner.Stop() }

func (v *Vacuumer) loop(ctx context.Context) {
	may, err := v.store.MayVacuumJobs(ctx)
	for err != nil {
		if ctx.Err() != nil {
			return
		}
		v.log.Error("read whether this role may vacuum gaffer.jobs", "error", err)
		if !clock.Sleep(ctx, v.clock, time.Minute) {
			return
		}
		may, err = v.store.MayVacuumJobs(ctx)
	}
	if !may {
		v.log.Warn("this role does not own gaffer.jobs and may not vacuum it: its dead rows wait for autovacuum; " +
			"set autovacuum_naptime = 5s, or run the nodes as the role that owns the schema (docs/operations.md)")
		return
	}
	for {
		if _, err := v.RunOnce(ctx); err != nil && ctx.Err() == nil {
			v.log.Error("vacuum gaffer.jobs", "error", err)
		}
		if !clock.Sleep(ctx, v.clock, v.cfg.Interval) {
			return
		}
	}
}

// RunOnce reads the dead row count and vacuums gaffer.jobs if a vacuum is
// due, returning whether it ran one. It blocks while the vacuum runs.
// Not safe for concurrent use.
func (v *Vacuumer) RunOnce(ctx context.Context) (bool, error) {
	dead, err := v.store.JobsDeadRows(ctx)
	if err != nil {
		return false, err
	}
	now := v.clock.Now()
	if !v.pace.worthReading(now, dead) {
		return false, nil
	}
	horizon, err := v.store.XIDHorizon(ctx)
	if err != nil {
		return false, err
	}
	if !v.pace.moved(horizon) {
		return false, nil
	}
	yielded, err := v.store.VacuumJobsUnlessBusy(ctx, vacuumWatch)
	if err != nil {
		return false, err
	}
	end := v.clock.Now()
	if yielded {
		// Someone wanted the table (DDL): try again after a rest, from
		// the same pace.
		v.pace.lastEnd, v.pace.rest = end, max(v.pace.rest, v.cfg.Interval)
		v.log.Info("stepped aside: a session waited for the vacuum's lock on gaffer.jobs", "took", end.Sub(now))
		return false, nil
	}
	// What the vacuum could not remove is the next one's residual; if it
	// cannot be read, the count before stands in, so that the next
	// vacuum waits for as many new dead rows as a full one would.
	left, err := v.store.JobsDeadRows(ctx)
	if err != nil {
		v.log.Warn("count gaffer.jobs' dead rows after a vacuum", "error", err)
		left = dead
	}
	v.pace.vacuumed(now, end, horizon, left)
	v.log.Debug("vacuumed gaffer.jobs", "dead_rows", dead, "left", left, "took", end.Sub(now))
	return true, nil
}

// vacuumPace decides when the next vacuum is due. Its zero horizon and
// residual make the first vacuum due on dead rows alone.
type vacuumPace struct {
	threshold int64
	// residual: the dead rows counted just after the last vacuum, which it
	// could not remove (or which died while it ran).
	residual int64
	// horizon: the transaction horizon the last vacuum ran under.
	horizon int64
	// rest: the least time from the end of the last vacuum to the next,
	// twice as long as the last one took, at most maxVacuumRest.
	rest    time.Duration
	lastEnd time.Time
}

// worthReading reports whether dead rows grew by the threshold since the
// last vacuum and that vacuum has rested: whether the horizon is worth
// reading. A count below the residual means another vacuum (autovacuum)
// ran since and removed them: the residual follows it down.
func (p *vacuumPace) worthReading(now time.Time, dead int64) bool {
	if dead < p.residual {
		p.residual = dead
	}
	return dead-p.residual >= p.threshold && !now.Before(p.lastEnd.Add(p.rest))
}

// moved reports whether the horizon moved on since the last vacuum, so
// that rows have become removable since.
func (p *vacuumPace) moved(horizon int64) bool {
	return horizon > p.horizon
}

// maxVacuumRest bounds the rest after a long vacuum. A vacuum that
// starts just as a long transaction takes its snapshot runs until that
// transaction ends (measured: 149 s, ending a second after the release):
// its index pass waits for cleanup locks on the claim index's pages,
// which the claims walking the entries the snapshot keeps hold pinned.
// Resting twice that long would leave what died meanwhile to autovacuum
// for minutes.
const maxVacuumRest = 10 * time.Second

// vacuumed records a vacuum from start to end under horizon, after which
// left dead rows were counted. The next one rests twice as long as this
// one took, at most maxVacuumRest.
func (p *vacuumPace) vacuumed(start, end time.Time, horizon, left int64) {
	p.horizon, p.residual, p.lastEnd, p.rest = horizon, left, end, min(2*end.Sub(start), maxVacuumRest)
}
