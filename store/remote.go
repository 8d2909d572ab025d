package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlLockRemoteTenant     = query("lock_remote_tenant")
	sqlRegisterRemoteWorker = query("register_remote_worker")
	sqlRemoteDueQueues      = query("remote_due_queues")
	sqlRemoteDueQueuesAny   = query("remote_due_queues_any")
	sqlTouchRemoteWorker    = query("touch_remote_worker")
	sqlJobsOfTenant         = query("jobs_of_tenant")
	sqlReleaseNodeJobs      = query("release_node_jobs")
	sqlRemoteWorkerLeft     = query("remote_worker_left")
	sqlSweepRemoteWorkers   = query("sweep_remote_workers")
	sqlSetProgress          = query("set_progress")
)

// ErrTooMany means a tenant holds as many remote workers as it may.
var ErrTooMany = errors.New("too many remote workers")

// AllTenants is the tenant of a remote worker that works every tenant's
// jobs.
const AllTenants = "*"

// RemoteWorkerParams is a remote worker to register.
type RemoteWorkerParams struct {
	ID      string
	Name    string
	Version string
	Tenant  string // a tenant, or AllTenants
	Queues  []string
	Kinds   []string // none: every kind
	// MaxPerTenant caps the rows the tenant's workers hold, live or gone
	// and not yet deleted.
	MaxPerTenant int
}

// RegisterRemoteWorker records a new remote worker as active. Errors:
// ErrTooMany at the tenant's cap, ErrConflict for an id in use. The cap
// holds under concurrent registrations: each counts the tenant's rows
// under a lock of the tenant's that it holds until it commits.
func (s *Store) RegisterRemoteWorker(ctx context.Context, p RemoteWorkerParams) error {
	queues := make(map[string]int, len(p.Queues))
	for _, q := range p.Queues {
		queues[q] = 0
	}
	qj, _ := json.Marshal(queues)
	kinds := p.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	kj, _ := json.Marshal(kinds)
	err := s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockRemoteTenant, p.Tenant); err != nil {
			return err
		}
		var id string
		return tx.QueryRow(ctx, sqlRegisterRemoteWorker, p.ID, p.Name, p.Version, qj, kj, p.Tenant, p.MaxPerTenant).Scan(&id)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrTooMany
	case isUniqueViolation(err):
		return ErrConflict
	case err != nil:
		return fmt.Errorf("register remote worker: %w", err)
	}
	return nil
}

// RemoteWorkerRow is a remote worker as a claim reads it.
type RemoteWorkerRow struct {
	Tenant   string // a tenant, or AllTenants
	Queues   []string
	Kinds    []string
	State    string
	Draining bool
	// LeftReason is why a gone worker left: drained, stopped or lost.
	LeftReason string
}

// TouchRemoteWorker records a call from remote worker id and returns it.
// tenant, when not empty, is the caller's: another tenant's worker is
// ErrNotFound.
func (s *Store) TouchRemoteWorker(ctx context.Context, id, tenant string) (RemoteWorkerRow, error) {
	var w RemoteWorkerRow
	var queues, kinds []byte
	err := s.pool.QueryRow(ctx, sqlTouchRemoteWorker, id, nullString(tenant)).Scan(&w.Tenant, &queues, &kinds, &w.State, &w.Draining, &w.LeftReason)
	if err != nil {
		return w, notFound(err)
	}
	var qm map[string]int
	_ = json.Unmarshal(queues, &qm)
	for q := range qm {
		w.Queues = append(w.Queues, q)
	}
	_ = json.Unmarshal(kinds, &w.Kinds)
	return w, nil
}

// RemoteDueQueues returns which of queues hold a due job of tenant
// (AllTenants: of any tenant) and are not paused. It claims nothing: a
// remote claim waiting on one of them claims it.
func (s *Store) RemoteDueQueues(ctx context.Context, tenant string, queues []string) ([]string, error) {
	var rows pgx.Rows
	var err error
	if tenant == AllTenants {
		rows, err = s.pool.Query(ctx, sqlRemoteDueQueuesAny, queues)
	} else {
		rows, err = s.pool.Query(ctx, sqlRemoteDueQueues, queues, tenant)
	}
	if err != nil {
		return nil, fmt.Errorf("look for due queues: %w", err)
	}
	due, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("look for due queues: %w", err)
	}
	return due, nil
}

// JobLabel is a job's queue and kind.
type JobLabel struct {
	Queue, Kind string
}

// JobsOfTenant returns, of the jobs ids, those that belong to tenant
// ("": any), with their queue and kind.
func (s *Store) JobsOfTenant(ctx context.Context, ids []int64, tenant string) (map[int64]JobLabel, error) {
	rows, err := s.pool.Query(ctx, sqlJobsOfTenant, ids, nullString(tenant))
	if err != nil {
		return nil, fmt.Errorf("look up jobs: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]JobLabel, len(ids))
	for rows.Next() {
		var id int64
		var l JobLabel
		if err := rows.Scan(&id, &l.Queue, &l.Kind); err != nil {
			return nil, fmt.Errorf("look up jobs: %w", err)
		}
		out[id] = l
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up jobs: %w", err)
	}
	return out, nil
}

// ReleaseNodeJobs gives back every attempt running on the given nodes or
// remote workers without using it up, and returns how many.
func (s *Store) ReleaseNodeJobs(ctx context.Context, ids []string, reason string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, sqlReleaseNodeJobs, ids, reason).Scan(&n); err != nil {
		return 0, fmt.Errorf("release jobs: %w", err)
	}
	return n, nil
}

// RemoteWorkerLeft records that remote worker id stopped. tenant, when
// not empty, is the caller's. Errors: ErrNotFound for an unknown worker,
// another tenant's, or one already gone.
func (s *Store) RemoteWorkerLeft(ctx context.Context, id, tenant string) error {
	var got string
	if err := s.pool.QueryRow(ctx, sqlRemoteWorkerLeft, id, nullString(tenant)).Scan(&got); err != nil {
		err = notFound(err)
		if errors.Is(err, ErrNotFound) {
			return err
		}
		return fmt.Errorf("record remote worker %s left: %w", id, err)
	}
	return nil
}

// RemoteSweep is what one sweep of the remote workers did.
type RemoteSweep struct {
	Released, Drained, Lost int
	// Live is how many remote workers are active or draining now.
	Live int
}

// SweepRemoteWorkers moves remote workers along by the database clock:
// drain orders, drain deadlines (running attempts released), drains
// finished, workers silent for silent marked lost, and workers gone for
// keep deleted.
func (s *Store) SweepRemoteWorkers(ctx context.Context, silent, keep time.Duration) (RemoteSweep, error) {
	var r RemoteSweep
	err := s.pool.QueryRow(ctx, sqlSweepRemoteWorkers, silent.Milliseconds(), keep.Milliseconds()).Scan(&r.Released, &r.Drained, &r.Lost, &r.Live)
	if err != nil {
		return r, fmt.Errorf("sweep remote workers: %w", err)
	}
	return r, nil
}

// SetProgress records an attempt's progress, compare-and-set on its
// lease. Errors: ErrStale.
func (s *Store) SetProgress(ctx context.Context, l Lease, percent float64, message string) error {
	var id int64
	err := s.pool.QueryRow(ctx, sqlSetProgress, l.ID, l.Attempt, l.Token, float32(percent), message).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("set progress of job %d: %w", l.ID, err)
	}
	return nil
}
