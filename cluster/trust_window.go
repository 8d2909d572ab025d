package cluster

import (
	"context"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/gafferhq/gaffer/internal/clock"
)

// trusted reports whether this node may act as leader now: its session
// is alive and etcd answered a keepalive recently enough that the lease
// cannot have expired.
func (c *Cluster) trusted() bool {
	if c.fenceOnly {
		return true
	}
	if !c.connected.Load() {
		return false
	}
	last := time.Unix(0, c.lastAck.Load())
	return clock.Since(c.clock, last) < c.cfg.SessionTTL-c.cfg.trustMargin()
}

// watchKeepalives records when etcd last answered a keepalive for the
// session's lease: the start of the trust window.
func (c *Cluster) watchKeepalives(ctx context.Context, sess *concurrency.Session) {
	ch, err := c.etcd().KeepAlive(ctx, sess.Lease())
	if err != nil {
		return
	}
	for resp := range ch {
		if resp != nil && resp.TTL > 0 {
			c.lastAck.Store(c.clock.Now().UnixNano())
		}
	}
}
