package job

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// Retention defaults.
const (
	DefaultJobRetention = 24 * time.Hour
	DefaultDLQRetention = 14 * 24 * time.Hour
)

// RetentionCleanerConfig configures a RetentionCleaner.
type RetentionCleanerConfig struct {
	Store  *store.Store // required
	Logger hclog.Logger
	// Fence guards the deletes. Default Unfenced.
	Fence Fence
	// JobRetention is how long finished (completed, failed, cancelled) jobs
	// are kept. Default 24h.
	JobRetention time.Duration
	// DLQRetention is how long DLQ entries are kept. Default 14 days.
	DLQRetention time.Duration
	// Interval between sweeps. Default 1m.
	Interval time.Duration
	// BatchSize caps the rows one statement deletes. Default 5000.
	BatchSize int
}

// RetentionCleaner deletes finished jobs and DLQ entries past their
// retention, and expired dashboard sessions, in small fenced batches so
// that it never holds many locks.
type RetentionCleaner struct {
	cfg    RetentionCleanerConfig
	log    hclog.Logger
	runner service.Runner
}

// NewRetentionCleaner validates cfg and returns a stopped cleaner.
func NewRetentionCleaner(cfg RetentionCleanerConfig) (*RetentionCleaner, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("RetentionCleanerConfig.Store is required")
	case cfg.JobRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.JobRetention must not be negative")
	case cfg.DLQRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.DLQRetention must not be negative")
	case cfg.Interval < 0 || cfg.BatchSize < 0:
		return nil, errors.New("RetentionCleanerConfig: Interval and BatchSize must not be negative")
	}
	if cfg.JobRetention == 0 {
		cfg.JobRetention = DefaultJobRetention
	}
	if cfg.DLQRetention == 0 {
		cfg.DLQRetention = DefaultDLQRetention
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Minute
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 5000
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Fence == nil {
		cfg.Fence = Unfenced{Store: cfg.Store}
	}
	return &RetentionCleaner{cfg: cfg, log: cfg.Logger.Named("retention")}, nil
}

// Start begins sweeping in the background; non-blocking and idempotent.
func (c *RetentionCleaner) Start(ctx context.Context) error {
	c.runner.StartEvery(ctx, c.cfg.Interval, func(ctx context.Context) error {
		_, err := c.RunOnce(ctx)
		return err
	}, c.log, "delete expired rows")
	return nil
}

// Stop ends the loop and waits for it.
func (c *RetentionCleaner) Stop() { c.runner.Stop() }

// Swept counts what one retention sweep deleted.
type Swept struct {
	Jobs       int64
	DLQEntries int64
	// Sessions are expired dashboard sessions.
	Sessions int64
}

// RunOnce deletes everything past retention now and returns how much it
// deleted. It stops at the first error, returning what it deleted so far.
func (c *RetentionCleaner) RunOnce(ctx context.Context) (Swept, error) {
	var s Swept
	var err error
	s.Jobs, err = c.drainBatches(ctx, func(q store.DB) (int64, error) {
		return c.cfg.Store.DeleteFinishedJobs(ctx, q, c.cfg.JobRetention, c.cfg.BatchSize)
	})
	if err == nil {
		s.DLQEntries, err = c.drainBatches(ctx, func(q store.DB) (int64, error) {
			return c.cfg.Store.DeleteOldDLQEntries(ctx, q, c.cfg.DLQRetention, c.cfg.BatchSize)
		})
	}
	if err == nil {
		s.Sessions, err = c.drainBatches(ctx, func(q store.DB) (int64, error) {
			return c.cfg.Store.DeleteExpiredUISessions(ctx, q, c.cfg.BatchSize)
		})
	}
	if s.Jobs+s.DLQEntries+s.Sessions > 0 {
		c.log.Debug("deleted expired rows", "jobs", s.Jobs, "dlq_entries", s.DLQEntries, "sessions", s.Sessions)
	}
	return s, err
}

// drainBatches runs del, one fenced batch at a time, until a batch comes
// back short.
func (c *RetentionCleaner) drainBatches(ctx context.Context, del func(q store.DB) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		err := c.cfg.Fence.Do(ctx, func(q store.DB) error {
			var err error
			n, err = del(q)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < int64(c.cfg.BatchSize) {
			return total, nil
		}
	}
}
