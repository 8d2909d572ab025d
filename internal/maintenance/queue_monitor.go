package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// QueueMonitorConfig configures a QueueMonitor.
type QueueMonitorConfig struct {
	Pool    *pgxpool.Pool // required
	Metrics QueueGauges   // required: the gauges it sets
	Logger  hclog.Logger
	// Fence guards the throughput sample it writes. Default job.Unfenced.
	Fence Fence
	// Interval between refreshes. Default 10s.
	Interval time.Duration
}

// QueueGauges are the gauges a QueueMonitor sets: *job.Metrics, which
// owns them and bounds their label values.
type QueueGauges interface {
	// SetQueueGauges replaces the queue and limit gauges with what
	// queues and limits (as read now, cluster-wide) say.
	SetQueueGauges(queues []store.Queue, limits []store.LimitUsage)
}

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
		cfg.Fence = job.Unfenced{Pool: cfg.Pool}
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
	// A leader-only write: a deposed leader, paused past its term, must
	// not add a sample beside its successor's.
	if err := q.cfg.Fence.Do(ctx, func(db pgx.Tx) error { return q.store.SampleThroughput(ctx, db) }); err != nil {
		return err
	}
	limits, err := q.store.LimitUsages(ctx, 1, job.DueCap)
	if err != nil {
		return err
	}
	q.cfg.Metrics.SetQueueGauges(queues, limits)
	return nil
}
