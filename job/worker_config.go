package job

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// WorkerConfig configures a Worker. Zero values take the defaults shown.
type WorkerConfig struct {
	Pool *pgxpool.Pool // required
	// LeasePool, when set, is used for the writes that keep and give back
	// leases — heartbeats, the cancellation checks beside them, releases —
	// so that they never wait for a connection behind claims and
	// completions: a node whose Pool is saturated (a slow database, a
	// burst of work) still renews its leases in time. A connection or two
	// is enough. Default: Pool.
	LeasePool *pgxpool.Pool
	Registry  *Registry // required
	NodeID    string    // required: recorded on every job this node runs
	Metrics   *Metrics
	Logger    hclog.Logger
	// TracerProvider makes a span of every attempt, linked to the trace
	// context its job was enqueued in (see the package documentation).
	// Default nil: no spans, and attempts pay nothing for tracing (nor do
	// they with a noop.TracerProvider). Pass otel.GetTracerProvider() to
	// use the global one.
	TracerProvider trace.TracerProvider
	// Queues maps each queue this node works to the most jobs of it the
	// node runs at once. Default {"default": 10}.
	Queues map[string]int
	// LeaseTTL is how long a claim holds a job without a heartbeat.
	// Running jobs are heartbeated every LeaseTTL/3. Default 30s.
	LeaseTTL time.Duration
	// PollInterval is the fallback claim poll, jittered ±10%; inserts wake
	// workers at once through LISTEN/NOTIFY. Default 1s.
	PollInterval time.Duration
	// FetchCooldown is the least time between two claims of one queue, so
	// that slots freed together, and jobs enqueued together, are taken by
	// one claim. The first claim after a quiet spell is not held back.
	// Default 2ms; longer costs the database less per job at moderate
	// rates (docs/benchmarks.md, "What a job costs the database").
	FetchCooldown time.Duration
	// TrickleCooldown is the least time between a claim that found fewer
	// due jobs than it had slots for — the queue keeps up with its work —
	// and the next claim of that queue, if longer than FetchCooldown: at
	// a steady trickle of enqueues, the jobs enqueued meanwhile share one
	// claim instead of each waking a claim of its own. A claim after a
	// quiet spell is not held back, nor one after a full claim (a backlog
	// is claimed as fast as slots free), nor one a limit cut short (the
	// jobs it held back start as soon as a slot frees). Default 8ms;
	// negative: none.
	TrickleCooldown time.Duration
	// ClaimBatch caps the jobs one claim takes. Default 500.
	ClaimBatch int
	// CheckInterval is how often running jobs are checked for cancellation
	// requests (a fallback to notifications) and heartbeated when due.
	// Default 1s, and at most LeaseTTL/4.
	CheckInterval time.Duration
	// CursorReset bounds how long claims continue from where the last full
	// claim ended before they scan the queue from its start again. Deep
	// backlogs claim without walking the dead index entries earlier claims
	// left; a job queued before the cursor (a more urgent priority, or an
	// earlier run_at) waits at most this long. Default 1s.
	CursorReset time.Duration
}

func (c *WorkerConfig) setDefaults() error {
	switch {
	case c.Pool == nil:
		return errors.New("WorkerConfig.Pool is required")
	case c.Registry == nil:
		return errors.New("WorkerConfig.Registry is required")
	case c.NodeID == "":
		return errors.New("WorkerConfig.NodeID is required")
	case c.LeaseTTL < 0 || (c.LeaseTTL > 0 && c.LeaseTTL < 500*time.Millisecond):
		return fmt.Errorf("WorkerConfig.LeaseTTL must be at least 500ms, got %s", c.LeaseTTL)
	case c.PollInterval < 0 || c.FetchCooldown < 0 || c.ClaimBatch < 0 || c.CheckInterval < 0:
		return errors.New("WorkerConfig: intervals and batch sizes must not be negative")
	}
	if c.LeasePool == nil {
		c.LeasePool = c.Pool
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{DefaultQueue: 10}
	}
	for q, n := range c.Queues {
		if err := ValidateName("queue", q); err != nil {
			return fmt.Errorf("WorkerConfig.Queues: %w", err)
		}
		if n < 1 {
			return fmt.Errorf("WorkerConfig.Queues[%q]: concurrency must be at least 1, got %d", q, n)
		}
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.FetchCooldown == 0 {
		c.FetchCooldown = 2 * time.Millisecond
	}
	if c.TrickleCooldown == 0 {
		c.TrickleCooldown = 8 * time.Millisecond
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = 500
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = time.Second
	}
	if c.CursorReset < 0 {
		return errors.New("WorkerConfig.CursorReset must not be negative")
	}
	if c.CursorReset == 0 {
		c.CursorReset = time.Second
	}
	c.CheckInterval = min(c.CheckInterval, c.LeaseTTL/4)
	return nil
}
