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
	// The trust window is asked again once the transaction has begun: a
	// pause between the check above and the fence's read (a SIGSTOP, a
	// long GC) must not turn into a write attempted past the window.
	err := c.store.FencedWhile(ctx, l.epoch, c.trusted, fn)
	if errors.Is(err, store.ErrNoLongerTrusted) {
		return errNotLeader
	}
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
