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

// Retention defaults.
const (
	DefaultJobRetention         = 24 * time.Hour
	DefaultDLQRetention         = 14 * 24 * time.Hour
	DefaultIdempotencyRetention = 24 * time.Hour
	// A finished run outlives its steps' jobs (JobRetention) by days, so
	// that last week's runs can still be looked at.
	DefaultWorkflowRetention = 7 * 24 * time.Hour
	// Long enough to look into last week's crash or deploy.
	DefaultDeadNodeRetention    = 7 * 24 * time.Hour
	DefaultCronHistoryRetention = 7 * 24 * time.Hour
	// A revoked token stays listed (who had access, until when) for a
	// month; it authenticates nothing meanwhile.
	DefaultRevokedTokenRetention = 30 * 24 * time.Hour
)

// RetentionCleanerConfig configures a RetentionCleaner.
type RetentionCleanerConfig struct {
	Pool   *pgxpool.Pool // required
	Logger hclog.Logger
	// Fence guards the deletes. Default job.Unfenced.
	Fence Fence
	// JobRetention is how long finished (completed, failed, cancelled) jobs
	// are kept. Default 24h.
	JobRetention time.Duration
	// DLQRetention is how long DLQ entries are kept. Default 14 days.
	DLQRetention time.Duration
	// IdempotencyRetention is how long an Idempotency-Key and its stored
	// response are kept. Default 24h.
	IdempotencyRetention time.Duration
	// WorkflowRetention is how long a finished (completed, failed or
	// cancelled) workflow run and its steps are kept after it finished.
	// A run is kept longer while a job of one of its steps is unfinished,
	// and a failed run while a DLQ entry of one of its steps waits to be
	// replayed (a replay resumes the run); DLQRetention bounds that wait.
	// Default 7 days.
	WorkflowRetention time.Duration
	// DeadNodeRetention is how long the row of a node that left or was
	// lost is kept. Default 7 days.
	DeadNodeRetention time.Duration
	// CronHistoryRetention is how long a cron occurrence's record (fired,
	// skipped, missed) is kept. Default 7 days.
	CronHistoryRetention time.Duration
	// RevokedTokenRetention is how long a revoked API token's record is
	// kept after its revocation. Default 30 days.
	RevokedTokenRetention time.Duration
	// Interval between sweeps. Default 1m.
	Interval time.Duration
	// BatchSize caps the rows one statement deletes. Default 5000.
	BatchSize int
}

// RetentionCleaner deletes what is past its retention — finished jobs,
// DLQ entries, finished workflow runs, idempotency keys, cron history,
// the rows of dead nodes and revoked tokens — and expired dashboard
// sessions and webhook secrets, in small fenced batches so that it never
// holds many locks and a deposed leader deletes nothing.
type RetentionCleaner struct {
	cfg    RetentionCleanerConfig
	store  *store.Store
	log    hclog.Logger
	runner service.Runner
	clock  clock.Clock
}

// NewRetentionCleaner validates cfg and returns a stopped cleaner.
func NewRetentionCleaner(cfg RetentionCleanerConfig) (*RetentionCleaner, error) {
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("RetentionCleanerConfig.Pool is required")
	case cfg.JobRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.JobRetention must not be negative")
	case cfg.DLQRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.DLQRetention must not be negative")
	case cfg.IdempotencyRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.IdempotencyRetention must not be negative")
	case cfg.WorkflowRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.WorkflowRetention must not be negative")
	case cfg.DeadNodeRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.DeadNodeRetention must not be negative")
	case cfg.CronHistoryRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.CronHistoryRetention must not be negative")
	case cfg.RevokedTokenRetention < 0:
		return nil, errors.New("RetentionCleanerConfig.RevokedTokenRetention must not be negative")
	case cfg.Interval < 0 || cfg.BatchSize < 0:
		return nil, errors.New("RetentionCleanerConfig: Interval and BatchSize must not be negative")
	}
	if cfg.JobRetention == 0 {
		cfg.JobRetention = DefaultJobRetention
	}
	if cfg.DLQRetention == 0 {
		cfg.DLQRetention = DefaultDLQRetention
	}
	if cfg.IdempotencyRetention == 0 {
		cfg.IdempotencyRetention = DefaultIdempotencyRetention
	}
	if cfg.WorkflowRetention == 0 {
		cfg.WorkflowRetention = DefaultWorkflowRetention
	}
	if cfg.DeadNodeRetention == 0 {
		cfg.DeadNodeRetention = DefaultDeadNodeRetention
	}
	if cfg.CronHistoryRetention == 0 {
		cfg.CronHistoryRetention = DefaultCronHistoryRetention
	}
	if cfg.RevokedTokenRetention == 0 {
		cfg.RevokedTokenRetention = DefaultRevokedTokenRetention
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
		cfg.Fence = job.Unfenced{Pool: cfg.Pool}
	}
	return &RetentionCleaner{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("retention"), clock: clock.Real}, nil
}

// Start begins sweeping in the background; non-blocking and idempotent.
func (c *RetentionCleaner) Start(ctx context.Context) error {
	c.runner.StartEvery(ctx, c.clock, c.cfg.Interval, func(ctx context.Context) error {
		_, err := c.RunOnce(ctx)
		return err
	}, c.log, "delete expired rows")
	return nil
}

// Stop ends the loop and waits for it.
func (c *RetentionCleaner) Stop() { c.runner.Stop() }

// Deleted counts the rows one sweep deleted, per table.
type Deleted struct {
	Jobs, DLQEntries, IdempotencyKeys int64
	// WorkflowRuns are finished runs; their steps went with them.
	WorkflowRuns int64
	// Batches are finished batches (their callback enqueued longer ago
	// than the job retention).
	Batches int64
	// CronOccurrences are records of cron occurrences.
	CronOccurrences int64
	// DeadNodes are rows of nodes that left or were lost.
	DeadNodes int64
	// RevokedTokens are records of revoked API tokens.
	RevokedTokens int64
	// Sessions are expired dashboard sessions.
	Sessions int64
	// WebhookSecrets are rotated-out signing secrets past their grace.
	WebhookSecrets int64
}

// RunOnce deletes everything past retention now and returns how many rows
// of each table it deleted. It stops at the first error, returning what
// it deleted so far.
func (c *RetentionCleaner) RunOnce(ctx context.Context) (Deleted, error) {
	var d Deleted
	sweeps := []struct {
		n   *int64
		del func(q pgx.Tx) (int64, error)
	}{
		{&d.Jobs, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteFinishedJobs(ctx, q, c.cfg.JobRetention, c.cfg.BatchSize)
		}},
		{&d.DLQEntries, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteOldDLQEntries(ctx, q, c.cfg.DLQRetention, c.cfg.BatchSize)
		}},
		// After the DLQ: a failed run whose last waiting entry just expired
		// goes in the same sweep.
		{&d.WorkflowRuns, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteFinishedWorkflowRuns(ctx, q, c.cfg.WorkflowRetention, c.cfg.BatchSize)
		}},
		{&d.Batches, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteFinishedBatches(ctx, q, c.cfg.JobRetention, c.cfg.BatchSize)
		}},
		{&d.IdempotencyKeys, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteOldIdempotencyKeys(ctx, q, c.cfg.IdempotencyRetention, c.cfg.BatchSize)
		}},
		{&d.Sessions, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteExpiredUISessions(ctx, q, c.cfg.BatchSize)
		}},
		{&d.WebhookSecrets, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteExpiredWebhookSecrets(ctx, q, c.cfg.BatchSize)
		}},
		{&d.CronOccurrences, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteOldCronOccurrences(ctx, q, c.cfg.CronHistoryRetention, c.cfg.BatchSize)
		}},
		{&d.DeadNodes, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteDeadNodes(ctx, q, c.cfg.DeadNodeRetention, c.cfg.BatchSize)
		}},
		{&d.RevokedTokens, func(q pgx.Tx) (int64, error) {
			return c.store.DeleteOldRevokedTokens(ctx, q, c.cfg.RevokedTokenRetention, c.cfg.BatchSize)
		}},
	}
	for _, sw := range sweeps {
		n, err := c.drainBatches(ctx, sw.del)
		*sw.n = n
		if err != nil {
			return d, err
		}
	}
	if d != (Deleted{}) {
		c.log.Debug("deleted expired rows", "jobs", d.Jobs, "dlq_entries", d.DLQEntries, "workflow_runs", d.WorkflowRuns, "batches", d.Batches,
			"idempotency_keys", d.IdempotencyKeys, "sessions", d.Sessions, "webhook_secrets", d.WebhookSecrets,
			"cron_occurrences", d.CronOccurrences, "dead_nodes", d.DeadNodes, "revoked_tokens", d.RevokedTokens)
	}
	return d, nil
}

// drainBatches runs del, one fenced batch at a time, until a batch comes
// back short.
func (c *RetentionCleaner) drainBatches(ctx context.Context, del func(q pgx.Tx) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		err := c.cfg.Fence.Do(ctx, func(q pgx.Tx) error {
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
