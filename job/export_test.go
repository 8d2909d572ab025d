package job

import (
	"context"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/store"
)

// FromRow builds a Job from a claimed row, lease included, for tests that
// claim through the store.
func FromRow(r store.Job) *Job { return fromRow(r) }

// SweepRemote runs one sweep of the remote workers.
func SweepRemote(r *RemoteWorkers, ctx context.Context) (store.RemoteSweep, error) {
	return r.sweep(ctx)
}

// SetClock makes the worker's claim loops and heartbeats read c, so that
// a test turns their time by hand. Call it before Start.
func (w *Worker) SetClock(c clock.Clock) { w.clock = c }
