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
	sqlListQueues     = query("list_queues")
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

// ListQueues returns every queue that has unfinished jobs or was ever
// paused, with counts.
func (s *Store) ListQueues(ctx context.Context) ([]Queue, error) {
	rows, err := s.pool.Query(ctx, sqlListQueues)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	defer rows.Close()
	var out []Queue
	for rows.Next() {
		var q Queue
		var age float64
		if err := rows.Scan(&q.Name, &q.Paused, &q.Pending, &q.Retrying, &q.Running, &age); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		q.OldestDueAge = time.Duration(age * float64(time.Second))
		out = append(out, q)
	}
	return out, rows.Err()
}
