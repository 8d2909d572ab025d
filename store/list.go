package store

import (
	"context"
	"fmt"
	"time"
)

// JobFilter selects jobs to list. Zero fields do not filter.
type JobFilter struct {
	Tenant string
	States []string
	Queue  string
	Kind   string
	// BeforeID is the pagination cursor: only jobs with a smaller id.
	BeforeID int64
	Limit    int
}

// ListJobs returns jobs matching f, newest first.
func (s *Store) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	var w where
	if f.Tenant != "" {
		w.add("tenant = ?", f.Tenant)
	}
	if len(f.States) > 0 {
		w.add("state = ANY(?)", f.States)
	}
	if f.Queue != "" {
		w.add("queue = ?", f.Queue)
	}
	if f.Kind != "" {
		w.add("kind = ?", f.Kind)
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	limit := w.next(clampLimit(f.Limit))
	sql := "SELECT " + expandJobColumns("{{job}}") + " FROM gaffer.jobs WHERE " + w.sql() + " ORDER BY id DESC LIMIT " + limit
	jobs, err := collectJobs(s.pool.Query(ctx, sql, w.args...))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

func clampLimit(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > 1000:
		return 1000
	}
	return n
}

// DLQFilter selects DLQ entries. Zero fields do not filter.
type DLQFilter struct {
	Tenant        string
	Queue         string
	Kind          string
	FailedAfter   time.Time
	FailedBefore  time.Time
	ErrorContains string
	// JobID keeps the entry of one dead job.
	JobID int64
	// Replayed, when set, keeps only replayed (true) or unreplayed (false)
	// entries.
	Replayed *bool
	BeforeID int64
	Limit    int
}

func (f DLQFilter) where() *where {
	w := &where{}
	if f.Tenant != "" {
		w.add("tenant = ?", f.Tenant)
	}
	if f.Queue != "" {
		w.add("queue = ?", f.Queue)
	}
	if f.Kind != "" {
		w.add("kind = ?", f.Kind)
	}
	if !f.FailedAfter.IsZero() {
		w.add("failed_at >= ?", f.FailedAfter)
	}
	if !f.FailedBefore.IsZero() {
		w.add("failed_at < ?", f.FailedBefore)
	}
	if f.ErrorContains != "" {
		w.add("strpos(lower(errors::text), lower(?)) > 0", f.ErrorContains)
	}
	if f.JobID != 0 {
		w.add("job_id = ?", f.JobID)
	}
	if f.Replayed != nil {
		if *f.Replayed {
			w.conds = append(w.conds, "replayed_at IS NOT NULL")
		} else {
			w.conds = append(w.conds, "replayed_at IS NULL")
		}
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	return w
}
