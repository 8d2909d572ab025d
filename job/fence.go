package job

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// Fence runs leader-only writes. Do runs fn in a transaction that commits
// only while this node holds leadership; otherwise it returns an error
// (ErrNotLeader, or ErrFenced when a newer leader raised the epoch)
// and fn's writes are rolled back. The cluster package provides the real
// one.
type Fence interface {
	Do(ctx context.Context, fn func(q pgx.Tx) error) error
}

// ErrNotLeader: a leader-only write was attempted by a node that cannot
// prove it leads.
var ErrNotLeader = service.ErrNotLeader

// ErrFenced: a leader-only write was refused because a newer leader has
// raised the fence since this node became leader.
var ErrFenced = store.ErrFenced

// Unfenced runs fn in a plain transaction. It is for nodes without a
// cluster, where each node runs the "leader-only" services itself: their
// writes are compare-and-set, idempotent, or (cron) keyed by occurrence,
// so running them on several nodes at once is safe, only wasteful.
type Unfenced struct{ Pool *pgxpool.Pool }

// Do implements Fence.
func (u Unfenced) Do(ctx context.Context, fn func(q pgx.Tx) error) error {
	return store.New(u.Pool).InTx(ctx, fn)
}
