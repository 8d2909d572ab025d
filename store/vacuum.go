package store

import (
	"context"
	"fmt"
)

var (
	sqlJobsDeadRows         = query("jobs_dead_rows")
	sqlMayVacuumJobs        = query("may_vacuum_jobs")
	sqlVacuumJobsUnlessBusy = query("vacuum_jobs_unless_busy")
)

// JobsDeadRows returns the dead row versions the server's statistics
// count in gaffer.jobs. The count lags writes by up to a second or so:
// each session reports its own when it next goes idle.
func (s *Store) JobsDeadRows(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, sqlJobsDeadRows).Scan(&n); err != nil {
		return 0, fmt.Errorf("read dead rows of gaffer.jobs: %w", err)
	}
	return n, nil
}

// MayVacuumJobs reports whether the pool's role may vacuum gaffer.jobs
// (it owns the table, is a member of its owner's role, or is a
// superuser). PostgreSQL skips the table, with a warning, for any other
// role.
func (s *Store) MayVacuumJobs(ctx context.Context) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, sqlMayVacuumJobs).Scan(&ok); err != nil {
		return false, fmt.Errorf("read gaffer.jobs' owner: %w", err)
	}
	return ok, nil
}

// VacuumJobsUnlessBusy vacuums gaffer.jobs, on a connection of the pool
// and outside any transaction (VACUUM cannot run inside one). It returns
// at once, having done nothing, while another vacuum holds the table. It
// blocks for as long as the vacuum takes: seconds on a table of millions
// of rows.
func (s *Store) VacuumJobsUnlessBusy(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sqlVacuumJobsUnlessBusy); err != nil {
		return fmt.Errorf("vacuum gaffer.jobs: %w", err)
	}
	return nil
}

var sqlXIDHorizon = query("xid_horizon")

// XIDHorizon returns the oldest transaction id (64-bit) whose deletions a
// vacuum of gaffer.jobs cannot yet remove: rows deleted at or after it are
// dead but still visible to some snapshot. It only moves forward; while it
// stands still, a second vacuum frees nothing the first did not.
func (s *Store) XIDHorizon(ctx context.Context) (int64, error) {
	var h int64
	if err := s.pool.QueryRow(ctx, sqlXIDHorizon).Scan(&h); err != nil {
		return 0, fmt.Errorf("read the transaction horizon: %w", err)
	}
	return h, nil
}
