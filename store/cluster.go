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
	sqlRegisterNode = query("register_node")
	sqlTouchNode    = query("touch_node")
	sqlNodeLeft     = query("node_left")
	sqlMarkNodeLost = query("mark_node_lost")
	sqlLiveNodes    = query("live_nodes")
	sqlRequestDrain = query("request_drain")
	sqlCancelDrain  = query("cancel_drain")
	sqlListNodes    = query("list_nodes")
	sqlRaiseFence   = query("raise_fence")
	sqlReadFence    = query("read_fence")
	sqlCheckFence   = query("check_fence")
)

// ErrNoLongerTrusted: FencedWhile's caller stopped trusting its
// leadership before the fence was read; nothing was written.
var ErrNoLongerTrusted = errors.New("leadership no longer trusted")

// ErrFenced means a newer leader has raised the fence: the caller is no
// longer the leader and its leader-only write was rolled back.
var ErrFenced = errors.New("fenced: a newer leader holds the epoch")

// NodeRow is a node as the nodes table records it.
type NodeRow struct {
	ID       string
	Hostname string
	Version  string
	// TZData is the IANA release of the zone rules in the node's binary;
	// "" for a binary too old to report it.
	TZData           string
	Queues           map[string]int
	State            string
	InFlight         int
	StartedAt        time.Time
	LastSeen         time.Time
	DrainRequestedAt *time.Time
	DrainDeadline    *time.Time
	DrainedAt        *time.Time
	LeftAt           *time.Time
	LeftReason       string
	// SinceSeen is how long ago, by the database clock, the node reported.
	SinceSeen time.Duration
	// Kind is "node" or "remote" (a remote worker); Tenant is a remote
	// worker's tenant ("*" for one spanning tenants) and Kinds the kinds
	// it named.
	Kind   string
	Tenant string
	Kinds  []string
}

// RegisterNode records a (re)starting node as active with no drain;
// tzdata is the release of the zone rules its binary holds.
func (s *Store) RegisterNode(ctx context.Context, id, hostname, version, tzdata string, queues map[string]int, kinds []string) error {
	q, _ := json.Marshal(queues)
	if kinds == nil {
		kinds = []string{}
	}
	k, _ := json.Marshal(kinds)
	if _, err := s.pool.Exec(ctx, sqlRegisterNode, id, hostname, version, tzdata, q, k); err != nil {
		return fmt.Errorf("register node %s: %w", id, err)
	}
	return nil
}

// DrainOrder is a drain request as a node reads it.
type DrainOrder struct {
	Requested bool
	// Left is the time until the deadline, by the database clock.
	Left time.Duration
}

// TouchNode records a node's report and returns its drain request. A node
// marked dead that reports again is active again.
func (s *Store) TouchNode(ctx context.Context, id string, inFlight int, state string) (DrainOrder, error) {
	var d DrainOrder
	var leftMS int64
	err := s.pool.QueryRow(ctx, sqlTouchNode, id, inFlight, state).Scan(&d.Requested, &leftMS)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("report node %s: %w", id, err)
	}
	d.Left = time.Duration(leftMS) * time.Millisecond
	return d, nil
}

// NodeLeft records that a node left cleanly ("drained" or "stopped").
func (s *Store) NodeLeft(ctx context.Context, id, reason string) error {
	if _, err := s.pool.Exec(ctx, sqlNodeLeft, id, reason); err != nil {
		return fmt.Errorf("record node %s left: %w", id, err)
	}
	return nil
}

// MarkNodeLost marks a live node dead through q (a fenced transaction) and
// reports whether it was live.
func (s *Store) MarkNodeLost(ctx context.Context, q DB, id string) (bool, error) {
	var got string
	err := s.db(q).QueryRow(ctx, sqlMarkNodeLost, id).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mark node %s lost: %w", id, err)
	}
	return true, nil
}

// LiveNode is a node not marked dead, and how long ago (by the database
// clock) it last registered its row.
type LiveNode struct {
	ID  string
	Age time.Duration
}

// LiveNodes lists the nodes not marked dead.
func (s *Store) LiveNodes(ctx context.Context) ([]LiveNode, error) {
	rows, err := s.pool.Query(ctx, sqlLiveNodes)
	if err != nil {
		return nil, fmt.Errorf("live nodes: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (LiveNode, error) {
		var n LiveNode
		var age float64
		err := row.Scan(&n.ID, &age)
		n.Age = time.Duration(age * float64(time.Second))
		return n, err
	})
}

// RequestDrain asks node id to drain within deadline (from the database's
// now) and tells it. A repeated request keeps the first request time and
// moves the deadline. Errors: ErrNotFound for an unknown or dead node.
func (s *Store) RequestDrain(ctx context.Context, id string, deadline time.Duration) error {
	return s.nodeControl(ctx, sqlRequestDrain, "drain", id, deadline.Milliseconds())
}

// CancelDrain withdraws a drain request. Errors: ErrNotFound.
func (s *Store) CancelDrain(ctx context.Context, id string) error {
	return s.nodeControl(ctx, sqlCancelDrain, "undrain", id)
}

func (s *Store) nodeControl(ctx context.Context, sql, what, id string, args ...any) error {
	var got string
	var told int64
	err := s.pool.QueryRow(ctx, sql, append([]any{id}, args...)...).Scan(&got, &told)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s node %s: %w", what, id, err)
	}
	return nil
}

// ListNodes returns every node the cluster has seen.
func (s *Store) ListNodes(ctx context.Context) ([]NodeRow, error) {
	rows, err := s.pool.Query(ctx, sqlListNodes)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []NodeRow
	for rows.Next() {
		var n NodeRow
		var queues, kinds []byte
		var since float64
		if err := rows.Scan(&n.ID, &n.Hostname, &n.Version, &n.TZData, &queues, &n.State, &n.InFlight, &n.StartedAt, &n.LastSeen,
			&n.DrainRequestedAt, &n.DrainDeadline, &n.DrainedAt, &n.LeftAt, &n.LeftReason, &since, &n.Kind, &n.Tenant, &kinds); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		_ = json.Unmarshal(queues, &n.Queues)
		if n.Kind == "remote" {
			_ = json.Unmarshal(kinds, &n.Kinds)
		}
		n.SinceSeen = time.Duration(since * float64(time.Second))
		out = append(out, n)
	}
	return out, rows.Err()
}

// Fence is the leader fence row.
type Fence struct {
	Epoch    int64
	Leader   string
	RaisedAt *time.Time
}

// RaiseFence moves the fence to epoch for leader, if epoch is newer (or
// is leader's own). It reports whether the fence is now leader's. It waits
// at most lockWait for a deposed leader's transaction that holds the
// fence, then returns an error (retry).
func (s *Store) RaiseFence(ctx context.Context, epoch int64, leader string, lockWait time.Duration) (bool, error) {
	raised := false
	err := pgx.BeginTxFunc(ctx, s.pool, guarded, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", max(lockWait.Milliseconds(), 1))); err != nil {
			return err
		}
		var got int64
		err := tx.QueryRow(ctx, sqlRaiseFence, epoch, leader).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		raised = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("raise leader fence to %d: %w", epoch, err)
	}
	return raised, nil
}

// ReadFence returns the fence row.
func (s *Store) ReadFence(ctx context.Context) (Fence, error) {
	var f Fence
	if err := s.pool.QueryRow(ctx, sqlReadFence).Scan(&f.Epoch, &f.Leader, &f.RaisedAt); err != nil {
		return f, fmt.Errorf("read leader fence: %w", err)
	}
	return f, nil
}

// Fenced runs fn in a transaction that commits only while the fence holds
// epoch. The fence row is share-locked for the transaction, so a newer
// leader's raise waits for it, and a transaction begun after a raise
// sees the new epoch and returns ErrFenced without running fn. A deposed
// leader stopped mid-transaction holds the lock at most IdleInTxTimeout.
func (s *Store) Fenced(ctx context.Context, epoch int64, fn func(tx pgx.Tx) error) error {
	return s.FencedWhile(ctx, epoch, nil, fn)
}

// FencedWhile is Fenced, asking still (if not nil) once the transaction
// has begun, just before the fence is read: a caller that may stop
// trusting its leadership meanwhile (a pause between its own check and
// the write) gives up with ErrNoLongerTrusted instead of meeting the
// fence.
func (s *Store) FencedWhile(ctx context.Context, epoch int64, still func() bool, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, guarded, func(tx pgx.Tx) error {
		if still != nil && !still() {
			return ErrNoLongerTrusted
		}
		var current int64
		if err := tx.QueryRow(ctx, sqlCheckFence).Scan(&current); err != nil {
			return fmt.Errorf("check leader fence: %w", err)
		}
		if current != epoch {
			return fmt.Errorf("%w (epoch %d, ours %d)", ErrFenced, current, epoch)
		}
		return fn(tx)
	})
}

// Statement is one row of pg_stat_statements.
type Statement struct {
	Query   string
	Calls   int64
	Rows    int64
	TotalMS float64
	Share   float64
}

// TopStatements reads pg_stat_statements (which must be preloaded), for
// benchmarks: the statements that took the most time.
func (s *Store) TopStatements(ctx context.Context, n int) ([]Statement, error) {
	if _, err := s.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 90), calls, rows, total_exec_time,
		total_exec_time / sum(total_exec_time) OVER () FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	defer rows.Close()
	var out []Statement
	for rows.Next() {
		var st Statement
		if err := rows.Scan(&st.Query, &st.Calls, &st.Rows, &st.TotalMS, &st.Share); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// TransactionCount is the database's committed plus rolled-back
// transactions so far (pg_stat_database), for measuring load.
func (s *Store) TransactionCount(ctx context.Context) (int64, error) {
	var n int64
	// Statistics are flushed lazily; force this backend's view to be fresh.
	if _, err := s.pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, err
	}
	err := s.pool.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	return n, err
}

// CronLateness returns, for the named entries' fired occurrences, the
// milliseconds from scheduled instant to job insert (database clock).
func (s *Store) CronLateness(ctx context.Context, entries []string) ([]float64, error) {
	rows, err := s.pool.Query(ctx, `SELECT extract(epoch FROM created_at - cron_at) * 1000 FROM gaffer.jobs WHERE cron_entry = ANY($1)`, entries)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[float64])
}

var sqlKnownLabels = query("known_labels")

// RemoteLabels bounds the label values remote workers' names may take
// (see KnownLabels): per tenant and in all.
type RemoteLabels struct {
	KindsPerTenant, QueuesPerTenant int
	Kinds, Queues                   int
}

// KnownLabels returns the kinds and queues of the nodes that have not
// left, and of the remote workers that have not left as many as bound
// allows, taken round-robin over their tenants.
func (s *Store) KnownLabels(ctx context.Context, bound RemoteLabels) (kinds, queues []string, err error) {
	if err := s.pool.QueryRow(ctx, sqlKnownLabels, bound.KindsPerTenant, bound.QueuesPerTenant, bound.Kinds, bound.Queues).Scan(&kinds, &queues); err != nil {
		return nil, nil, fmt.Errorf("known labels: %w", err)
	}
	return kinds, queues, nil
}

var sqlKindRegistered = query("kind_registered")

// KindRegistered reports whether some node handles kind, or some remote
// worker of tenant (or one spanning tenants) works it, by the rows the
// nodes table holds (those that left included, until retention). q is
// the caller's transaction (a request that holds one must not wait for a
// second connection), or nil for the pool.
func (s *Store) KindRegistered(ctx context.Context, q DB, tenant, kind string) (bool, error) {
	var ok bool
	if err := s.db(q).QueryRow(ctx, sqlKindRegistered, tenant, kind).Scan(&ok); err != nil {
		return false, fmt.Errorf("kind registered: %w", err)
	}
	return ok, nil
}

var sqlDeleteDeadNodes = query("delete_dead_nodes")

// DeleteDeadNodes deletes up to limit rows of nodes that left or were
// lost more than age ago, oldest first. q is the leader's fenced
// transaction, or nil for the pool.
func (s *Store) DeleteDeadNodes(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteDeadNodes, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete dead nodes: %w", err)
	}
	return tag.RowsAffected(), nil
}

// JobTableSize is what gaffer.jobs takes on disk, for benchmarks that
// watch it grow or stay flat.
type JobTableSize struct {
	// TableBytes is the heap with its TOAST and free-space maps;
	// IndexBytes all its indexes.
	TableBytes, IndexBytes int64
	// LiveRows and DeadRows are the statistics collector's estimates.
	LiveRows, DeadRows int64
	// Vacuums counts the table's vacuums, manual and automatic.
	Vacuums int64
}

// JobTableSize measures gaffer.jobs now.
func (s *Store) JobTableSize(ctx context.Context) (JobTableSize, error) {
	var z JobTableSize
	err := s.pool.QueryRow(ctx, `SELECT pg_table_size(relid), pg_indexes_size(relid), n_live_tup, n_dead_tup,
		vacuum_count + autovacuum_count FROM pg_stat_user_tables WHERE relid = 'gaffer.jobs'::regclass`).
		Scan(&z.TableBytes, &z.IndexBytes, &z.LiveRows, &z.DeadRows, &z.Vacuums)
	if err != nil {
		return z, fmt.Errorf("job table size: %w", err)
	}
	return z, nil
}
