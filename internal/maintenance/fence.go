package maintenance

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Fence runs leader-only writes: fn's statements commit only while this
// node holds leadership (the cluster's fence), or always (job.Unfenced,
// for a node without a cluster, where every node runs the leader-only
// services itself). A refused Do returns an error and rolls fn back.
type Fence interface {
	Do(ctx context.Context, fn func(q pgx.Tx) error) error
}
