package remote

import (
	"context"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/store"
)

// Sweep runs one sweep of the remote workers.
func Sweep(r *Workers, ctx context.Context) (store.RemoteSweep, error) {
	return r.sweep(ctx)
}

// SetClock makes the sweep, the claims' waits and polls, the claim
// cursors and the release retries read c, so that a test turns their
// time by hand. Call it before Start and before the first claim.
func (r *Workers) SetClock(c clock.Clock) { r.clock = c }
