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

var sqlHorizonHolder = query("horizon_holder")

// XIDHorizon returns the oldest transaction id (64-bit) whose deletions a
// vacuum of gaffer.jobs cannot yet remove: rows deleted at or after it are
// dead but still visible to some snapshot. It only moves forward; while it
// stands still, a second vacuum frees nothing the first did not.
func (s *Store) XIDHorizon(ctx context.Context) (int64, error) {
	h, err := s.HorizonHolder(ctx)
	return h.Horizon, err
}

// Horizon is the transaction horizon (XIDHorizon) and what holds it
// back, as far as PostgreSQL shows it to the pool's role. The strings
// come from whoever opened the holding session (any database client),
// unchecked.
type Horizon struct {
	Horizon int64 // the oldest transaction id whose deletions must be kept
	// Kind is what holds it: "session", "replication slot" or "prepared
	// transaction"; empty when nothing does (nothing older than the
	// statement that read it).
	Kind   string
	PID    int32  // the session's (or the slot's active walsender's); 0: none or hidden
	Role   string // the session's role, the prepared transaction's owner
	Name   string // the session's application_name, the slot's name, the prepared transaction's gid
	Client string // the session's client address; empty: a local socket, or hidden
	State  string // the session's state ("idle in transaction", "active"); empty: hidden
	// Age is how long ago the holding transaction (or the prepared one)
	// began, by the database's clock; zero when PostgreSQL does not show
	// it (a slot, another role's session without pg_read_all_stats).
	Age time.Duration
}

// HorizonHolder reads the transaction horizon and what holds it back.
func (s *Store) HorizonHolder(ctx context.Context) (Horizon, error) {
	var h Horizon
	var kind, role, name, client, state *string
	var pid *int32
	var age *float64
	if err := s.pool.QueryRow(ctx, sqlHorizonHolder).Scan(&h.Horizon, &kind, &pid, &role, &name, &client, &state, &age); err != nil {
		return Horizon{}, fmt.Errorf("read the transaction horizon: %w", err)
	}
	h.Kind, h.Role, h.Name, h.Client, h.State = deref(kind), deref(role), deref(name), deref(client), deref(state)
	if pid != nil {
		h.PID = *pid
	}
	if age != nil && *age > 0 {
		h.Age = time.Duration(*age * float64(time.Second))
	}
	return h, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
