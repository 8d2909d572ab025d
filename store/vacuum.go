package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	sqlJobsDeadRows         = query("jobs_dead_rows")
	sqlMayVacuumJobs        = query("may_vacuum_jobs")
	sqlVacuumJobsUnlessBusy = query("vacuum_jobs_unless_busy")
	sqlJobsLockWanted       = query("jobs_lock_wanted")
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
// of rows. Every watch meanwhile it asks whether another session waits
// for the vacuum's lock (an ALTER TABLE, a LOCK TABLE), and if one does
// it cancels the vacuum and returns yielded true, as PostgreSQL does for
// an autovacuum in the way: a VACUUM that a user runs is not cancelled
// for anyone, and everything that then queues behind the waiting
// statement — every claim — would wait out the vacuum too.
func (s *Store) VacuumJobsUnlessBusy(ctx context.Context, watch time.Duration) (yielded bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("vacuum gaffer.jobs: %w", err)
	}
	defer conn.Release()
	pg := conn.Conn().PgConn()
	var cancelled atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(watch)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			var wanted bool
			if err := s.pool.QueryRow(ctx, sqlJobsLockWanted).Scan(&wanted); err != nil || !wanted {
				continue
			}
			// A cancel request, not the context: cancelling the context
			// would drop the connection, and the server would go on
			// vacuuming, holding the lock, until it next wrote to it.
			// Behind a pooler the request goes to the pooler, which
			// passes it to the server session running this connection's
			// statement.
			if pg.CancelRequest(ctx) == nil {
				cancelled.Store(true)
			}
			return
		}
	}()
	_, err = conn.Exec(ctx, sqlVacuumJobsUnlessBusy)
	close(stop)
	wg.Wait()
	if cancelled.Load() {
		// The request may still be on its way, and would cancel whatever
		// this connection ran next.
		conn.Conn().Close(context.WithoutCancel(ctx))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "57014" { // query_canceled
			return true, nil
		}
	}
	if err != nil {
		return false, fmt.Errorf("vacuum gaffer.jobs: %w", err)
	}
	return false, nil
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
