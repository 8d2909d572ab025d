package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// jobStates are the states a job row can be in: the jobs_state_check
// constraint's list (job.States names them for Go callers).
var jobStates = []string{"pending", "running", "retrying", "completed", "failed", "cancelled"}

// JobFilter selects jobs to list. Zero fields do not filter.
type JobFilter struct {
	Tenant string
	States []string
	Queue  string
	Kind   string
	// CronEntry keeps the jobs one cron entry made (scheduled and
	// triggered); WorkflowRun the jobs of one workflow run's steps. Each
	// has its own partial index in id order (migration cron_status).
	CronEntry   string
	WorkflowRun int64
	// BeforeID is the pagination cursor: only jobs with a smaller id.
	BeforeID int64
	Limit    int
}

// ListJobs returns jobs matching f, newest first, without step inputs
// (GetJob reads them).
func (s *Store) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	sql, args, err := listJobsSQL(f)
	if err != nil {
		return nil, err
	}
	jobs, err := collectJobs(s.pool.Query(ctx, sql, args...))
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	// A listing leaves step inputs out (GetJob has them): a page of step
	// jobs would carry up to its length times a step's input budget.
	for i := range jobs {
		jobs[i].Inputs = nil
	}
	return jobs, nil
}

// listJobsSQL is ListJobs' query and its arguments.
func listJobsSQL(f JobFilter) (string, []any, error) {
	var w where
	if f.Tenant != "" {
		w.add("tenant = ?", f.Tenant)
	}
	if len(f.States) > 0 {
		// Written out, not a parameter: a plan made for one literal state
		// can use that state's partial index (failed and cancelled jobs
		// have their own by id, so listing them never walks the table).
		lits := make([]string, len(f.States))
		for i, st := range f.States {
			if !slices.Contains(jobStates, st) {
				return "", nil, fmt.Errorf("list jobs: unknown state %q", st)
			}
			lits[i] = "'" + st + "'"
		}
		w.addLiteral("state IN (" + strings.Join(lits, ", ") + ")")
	}
	if f.Queue != "" {
		w.add("queue = ?", f.Queue)
	}
	if f.Kind != "" {
		w.add("kind = ?", f.Kind)
	}
	if f.CronEntry != "" {
		w.add("cron_entry = ?", f.CronEntry)
	}
	if f.WorkflowRun != 0 {
		w.add("workflow_run = ?", f.WorkflowRun)
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	limit := w.next(clampLimit(f.Limit))
	sql := "SELECT " + expandJobColumns("{{job}}") + " FROM gaffer.jobs WHERE " + w.sql() + " ORDER BY id DESC LIMIT " + limit
	return sql, w.args, nil
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
			w.addLiteral("replayed_at IS NOT NULL")
		} else {
			w.addLiteral("replayed_at IS NULL")
		}
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	return w
}
