package remote

import (
	"context"

	"github.com/gafferhq/gaffer/store"
)

// Sweep runs one sweep of the remote workers.
func Sweep(r *Workers, ctx context.Context) (store.RemoteSweep, error) {
	return r.sweep(ctx)
}
