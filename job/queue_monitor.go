package job

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// QueueMonitorConfig configures a QueueMonitor.
type QueueMonitorConfig struct {
	Pool    *pgxpool.Pool // required
	Metrics *Metrics      // required: the gauges it sets
	Logger  hclog.Logger
	// Fence guards the throughput sample it writes. Default Unfenced.
	Fence Fence
	// Interval between refreshes. Default 10s.
	Interval time.Duration
}

// maxLimitLabels bounds the limits the limit gauges name.
const maxLimitLabels = 100

// QueueMonitor refreshes the queue depth and oldest-due-age gauges from
// PostgreSQL and records a throughput sample for the dashboard (in all and
// per tenant). The counts are cluster-wide, so one node (the leader) runs
// it, and the sample is written through the leader's fence.
type QueueMonitor struct {
	cfg    QueueMonitorConfig
	store  *store.Store
	log    hclog.Logger
	runner service.Runner
	clock  clock.Clock
}

// NewQueueMonitor validates cfg and returns a stopped monitor.
func NewQueueMonitor(cfg QueueMonitorConfig) (*QueueMonitor, error) {
	if cfg.Pool == nil || cfg.Metrics == nil {
		return nil, errors.New("QueueMonitorConfig.Pool and .Metrics are required")
	}
	if cfg.Interval < 0 {
		return nil, errors.New("QueueMonitorConfig.Interval must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Fence == nil {
		cfg.Fence = Unfenced{Pool: cfg.Pool}
	}
	return &QueueMonitor{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("queue_monitor"), clock: clock.Real}, nil
}

// Start begins refreshing in the background; non-blocking and idempotent.
func (q *QueueMonitor) Start(ctx context.Context) error {
	q.runner.StartEvery(ctx, q.clock, q.cfg.Interval, q.RunOnce, q.log, "refresh queue gauges")
	return nil
}

// Stop ends the loop and waits for it.
func (q *QueueMonitor) Stop() { q.runner.Stop() }

// RunOnce refreshes the gauges now.
func (q *QueueMonitor) RunOnce(ctx context.Context) error {
	queues, err := q.store.ListQueues(ctx, "")
	if err != nil {
		return err
	}
	m := q.cfg.Metrics
	// A leader-only write: a deposed leader, paused past its term, must
	// not add a sample beside its successor's.
	if err := q.cfg.Fence.Do(ctx, func(db pgx.Tx) error { return q.store.SampleThroughput(ctx, db) }); err != nil {
		return err
	}
	// Queues no node works are summed under OtherLabel (their oldest job
	// is the oldest of them): tenants name queues, and each name would be
	// a series.
	type gauges struct {
		pending, retrying, running int64
		oldest                     time.Duration
	}
	byLabel := map[string]*gauges{}
	for _, x := range queues {
		l := m.queueLabel(x.Name)
		g := byLabel[l]
		if g == nil {
			g = &gauges{}
			byLabel[l] = g
		}
		g.pending += x.Pending
		g.retrying += x.Retrying
		g.running += x.Running
		g.oldest = max(g.oldest, x.OldestDueAge)
	}
	// Limits are the operator's, named by the operator: a bounded set of
	// label values (the first maxLimitLabels by name).
	limits, err := q.store.LimitUsages(ctx, 1, DueCap)
	if err != nil {
		return err
	}
	m.limitUsed.Reset()
	m.limitDue.Reset()
	for i, l := range limits {
		if i == maxLimitLabels {
			break
		}
		m.limitUsed.WithLabelValues(l.Name).Set(float64(l.Busiest))
		m.limitDue.WithLabelValues(l.Name).Set(float64(l.Due))
	}
	m.depth.Reset()
	m.oldestDue.Reset()
	for l, g := range byLabel {
		m.depth.WithLabelValues(l, string(Pending)).Set(float64(g.pending))
		m.depth.WithLabelValues(l, string(Retrying)).Set(float64(g.retrying))
		m.depth.WithLabelValues(l, string(Running)).Set(float64(g.running))
		m.oldestDue.WithLabelValues(l).Set(g.oldest.Seconds())
	}
	return nil
}
