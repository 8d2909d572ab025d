package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlSetQueuePaused = query("set_queue_paused")
	sqlPausedQueues   = query("paused_queues")
)

// Queue is a queue's state across the cluster.
type Queue struct {
	Name     string
	Paused   bool
	Pending  int64
	Retrying int64
	Running  int64
	// OldestDueAge is how long the oldest due, unclaimed job has waited.
	OldestDueAge time.Duration
	// Workers is how many live nodes and remote workers work the queue
	// (draining ones claim nothing and are not counted).
	Workers int64
}

// SetQueuePaused pauses or resumes a queue cluster-wide and tells every
// node. A paused queue's jobs are not claimed; running ones finish.
func (s *Store) SetQueuePaused(ctx context.Context, name string, paused bool) error {
	var told int64
	if err := s.pool.QueryRow(ctx, sqlSetQueuePaused, name, paused).Scan(&told); err != nil {
		return fmt.Errorf("set queue %q paused=%v: %w", name, paused, err)
	}
	return nil
}

// PausedQueues returns the names of paused queues.
func (s *Store) PausedQueues(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, sqlPausedQueues)
	if err != nil {
		return nil, fmt.Errorf("paused queues: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ListQueues returns every queue that has unfinished jobs, was ever
// paused, or is worked by a live node, with exact counts — or, for a
// tenant (not ""), only the queues where that tenant has unfinished jobs,
// with that tenant's counts.
func (s *Store) ListQueues(ctx context.Context, tenant string) ([]Queue, error) {
	if tenant != "" {
		return s.tenantQueueDepths(ctx, tenant)
	}
	return s.queueDepths(ctx, nil)
}

var (
	sqlDeleteQueueJobs = query("delete_queue_jobs")
	sqlVacuumJobs      = query("vacuum_jobs")
	sqlCountQueueJobs  = query("count_queue_jobs")
)

// DeleteQueueJobs deletes every job of queue that is not running, and
// returns how many it deleted.
func (s *Store) DeleteQueueJobs(ctx context.Context, queue string) (int64, error) {
	tag, err := s.pool.Exec(ctx, sqlDeleteQueueJobs, queue)
	if err != nil {
		return 0, fmt.Errorf("delete jobs of queue %q: %w", queue, err)
	}
	return tag.RowsAffected(), nil
}

// VacuumJobs vacuums and analyzes the job table (for benchmarks, between
// rounds). It cannot run inside a transaction.
func (s *Store) VacuumJobs(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sqlVacuumJobs); err != nil {
		return fmt.Errorf("vacuum jobs: %w", err)
	}
	return nil
}

// CountQueueJobs counts every job of queue, in any state.
func (s *Store) CountQueueJobs(ctx context.Context, queue string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, sqlCountQueueJobs, queue).Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs of queue %q: %w", queue, err)
	}
	return n, nil
}

var (
	sqlSampleThroughput = query("sample_throughput")
	sqlThroughputSeries = query("throughput_series")
	sqlQueueHistory     = query("queue_history")
	sqlQueueDepths      = query("queue_depths")
	sqlTenantQueues     = query("tenant_queue_depths")
	sqlEstimateJobs     = query("estimate_jobs")
)

// SampleThroughput records how many jobs finished since the last sample,
// in all and per tenant, through q (the leader's fenced transaction) or
// the pool when q is nil.
func (s *Store) SampleThroughput(ctx context.Context, q DB) error {
	var one int
	if err := s.db(q).QueryRow(ctx, sqlSampleThroughput).Scan(&one); err != nil {
		return fmt.Errorf("sample throughput: %w", err)
	}
	return nil
}

// ThroughputPoint is one minute's average rates.
type ThroughputPoint struct {
	Minute          time.Time
	CompletedPerSec float64
	FailedPerSec    float64
}

// ThroughputSeries returns per-minute rates over the last window, of one
// tenant or, for "", of all. Per-tenant samples are kept for an hour.
func (s *Store) ThroughputSeries(ctx context.Context, tenant string, window time.Duration) ([]ThroughputPoint, error) {
	if tenant == "" {
		tenant = "*"
	}
	rows, err := s.pool.Query(ctx, sqlThroughputSeries, window.Milliseconds(), tenant)
	if err != nil {
		return nil, fmt.Errorf("throughput series: %w", err)
	}
	defer rows.Close()
	var out []ThroughputPoint
	for rows.Next() {
		var p ThroughputPoint
		if err := rows.Scan(&p.Minute, &p.CompletedPerSec, &p.FailedPerSec); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// QueueBucket is what finished in one bucket of a queue's history.
type QueueBucket struct {
	At                time.Time
	Completed, Failed int64
}

// QueueHistory returns queue's finished jobs per bucket over the last
// window, of tenant ("": all), oldest first; buckets where nothing
// finished are left out. History is kept per minute, for a week in all
// and a day per tenant, for each tenant's 20 busiest queues and the 500
// busiest in all (sample_throughput).
func (s *Store) QueueHistory(ctx context.Context, queue, tenant string, window, bucket time.Duration) ([]QueueBucket, error) {
	if tenant == "" {
		tenant = "*"
	}
	rows, err := s.pool.Query(ctx, sqlQueueHistory, queue, tenant, window.Milliseconds(), int64(bucket/time.Second))
	if err != nil {
		return nil, fmt.Errorf("queue history: %w", err)
	}
	defer rows.Close()
	var out []QueueBucket
	for rows.Next() {
		var b QueueBucket
		if err := rows.Scan(&b.At, &b.Completed, &b.Failed); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// QueueDepthsCapped is ListQueues for huge tables: pending and retrying
// counts stop at limit (a count equal to it means at least that many). A
// tenant's counts are exact.
func (s *Store) QueueDepthsCapped(ctx context.Context, tenant string, limit int) ([]Queue, error) {
	if tenant != "" {
		return s.tenantQueueDepths(ctx, tenant)
	}
	return s.queueDepths(ctx, limit)
}

// queueDepths lists the queues, counting at most limit pending and
// retrying jobs in each (nil: all).
func (s *Store) queueDepths(ctx context.Context, limit any) ([]Queue, error) {
	rows, err := s.pool.Query(ctx, sqlQueueDepths, limit)
	return scanQueues(rows, err)
}

func (s *Store) tenantQueueDepths(ctx context.Context, tenant string) ([]Queue, error) {
	rows, err := s.pool.Query(ctx, sqlTenantQueues, tenant)
	return scanQueues(rows, err)
}

func scanQueues(rows pgx.Rows, err error) ([]Queue, error) {
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	defer rows.Close()
	var out []Queue
	for rows.Next() {
		var q Queue
		var age float64
		if err := rows.Scan(&q.Name, &q.Paused, &q.Pending, &q.Retrying, &q.Running, &age, &q.Workers); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		q.OldestDueAge = time.Duration(age * float64(time.Second))
		out = append(out, q)
	}
	return out, rows.Err()
}

// EstimateJobs is the planner's estimate of the jobs table's rows (as of
// the last autovacuum or analyze): instant on any size, unlike count(*).
func (s *Store) EstimateJobs(ctx context.Context) (int64, error) {
	var n float64
	err := s.pool.QueryRow(ctx, sqlEstimateJobs).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("estimate jobs: %w", err)
	}
	return int64(n), nil
}
