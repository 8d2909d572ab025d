package cluster

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// Do runs a leader-only write under the fence (it implements job.Fence).
// A write refused by the fence makes this node step down.
func (c *Cluster) Do(ctx context.Context, fn func(q pgx.Tx) error) error {
	c.mu.Lock()
	l := c.leading
	c.mu.Unlock()
	if l == nil || !c.trusted() {
		return errNotLeader
	}
	err := c.store.Fenced(ctx, l.epoch, fn)
	if errors.Is(err, store.ErrFenced) {
		c.metrics.fenceRejections.Inc()
		c.log.Warn("leader-only write refused by the fence; stepping down", "epoch", l.epoch, "error", err)
		select {
		case l.fenced <- struct{}{}:
		default:
		}
	}
	return err
}

var errNotLeader = service.ErrNotLeader
