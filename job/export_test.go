package job

import (
	"context"

	"github.com/gafferhq/gaffer/internal/store"
)

// FromRow builds a Job from a claimed row, lease included, for tests that
// claim through the store.
func FromRow(r store.Job) *Job { return fromRow(r) }

// SweepRemote runs one sweep of the remote workers.
func SweepRemote(r *RemoteWorkers, ctx context.Context) (store.RemoteSweep, error) {
	return r.sweep(ctx)
}
