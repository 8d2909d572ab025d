package job

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// QueueMonitorConfig configures a QueueMonitor.
type QueueMonitorConfig struct {
	Store   *store.Store // required
	Metrics *Metrics     // required: the gauges it sets
	Logger  hclog.Logger
	// Fence guards the throughput sample it writes. Default Unfenced.
	Fence Fence
	// Interval between refreshes. Default 10s.
	Interval time.Duration
}

// QueueMonitor refreshes the queue depth and oldest-due-age gauges from
// PostgreSQL and records a throughput sample for the dashboard (in all and
// per tenant). The counts are cluster-wide, so one node (the leader) runs
// it, and the sample is written through the leader's fence.
type QueueMonitor struct {
	cfg    QueueMonitorConfig
	log    hclog.Logger
	runner service.Runner
}

// NewQueueMonitor validates cfg and returns a stopped monitor.
func NewQueueMonitor(cfg QueueMonitorConfig) (*QueueMonitor, error) {
	if cfg.Store == nil || cfg.Metrics == nil {
		return nil, errors.New("QueueMonitorConfig.Store and .Metrics are required")
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
		cfg.Fence = Unfenced{Store: cfg.Store}
	}
	return &QueueMonitor{cfg: cfg, log: cfg.Logger.Named("queue_monitor")}, nil
}

// Start begins refreshing in the background; non-blocking and idempotent.
func (q *QueueMonitor) Start(ctx context.Context) error {
	q.runner.StartEvery(ctx, q.cfg.Interval, q.RunOnce, q.log, "refresh queue gauges")
	return nil
}

// Stop ends the loop and waits for it.
func (q *QueueMonitor) Stop() { q.runner.Stop() }

// RunOnce refreshes the gauges now.
func (q *QueueMonitor) RunOnce(ctx context.Context) error {
	queues, err := q.cfg.Store.ListQueues(ctx, "")
	if err != nil {
		return err
	}
	m := q.cfg.Metrics
	// A leader-only write: a deposed leader, paused past its term, must
	// not add a sample beside its successor's.
	if err := q.cfg.Fence.Do(ctx, func(db store.DB) error { return q.cfg.Store.SampleThroughput(ctx, db) }); err != nil {
		return err
	}
	m.depth.Reset()
	m.oldestDue.Reset()
	for _, x := range queues {
		m.depth.WithLabelValues(x.Name, string(Pending)).Set(float64(x.Pending))
		m.depth.WithLabelValues(x.Name, string(Retrying)).Set(float64(x.Retrying))
		m.depth.WithLabelValues(x.Name, string(Running)).Set(float64(x.Running))
		m.oldestDue.WithLabelValues(x.Name).Set(x.OldestDueAge.Seconds())
	}
	return nil
}
