package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/gafferhq/gaffer/internal/clock"
)

// leadership is one term as leader.
type leadership struct {
	epoch  int64
	cancel context.CancelFunc
	// fenced receives when a write under this term was refused.
	fenced chan struct{}
}

// IsLeader reports whether this node leads and can prove it now.
func (c *Cluster) IsLeader() bool {
	c.mu.Lock()
	l := c.leading
	c.mu.Unlock()
	return l != nil && c.trusted()
}

// becomeLeader guards against the Campaign pitfall (it can return after
// the session's lease expired), raises the PostgreSQL fence to this
// term's epoch, and starts the leader-only services. ctx is the session's;
// the services run under nodeCtx, and stop when the term is revoked.
func (c *Cluster) becomeLeader(nodeCtx, ctx context.Context, sess *concurrency.Session, e *concurrency.Election) (*leadership, error) {
	select {
	case <-sess.Done():
		return nil, errors.New("session ended while campaigning")
	default:
	}
	resp, err := c.etcd().Get(ctx, e.Key())
	if err != nil {
		return nil, fmt.Errorf("confirm election key: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != e.Rev() || clientv3.LeaseID(resp.Kvs[0].Lease) != sess.Lease() {
		return nil, errors.New("election key gone: the session expired during the campaign")
	}
	gen, err := c.generation(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the etcd generation: %w", err)
	}
	epoch, err := epochOf(gen, e.Rev())
	if err != nil {
		return nil, err
	}
	for {
		raised, err := c.store.RaiseFence(ctx, epoch, c.cfg.Node.ID, 2*time.Second)
		if err == nil && !raised {
			return nil, fmt.Errorf("the fence holds a newer epoch than ours (%d)", epoch)
		}
		if err == nil {
			break
		}
		// PostgreSQL unreachable, or a deposed leader still holds the fence
		// in a transaction (it is killed by idle_in_transaction_session_timeout).
		c.log.Warn("raise leader fence; retrying", "epoch", epoch, "error", err)
		if !clock.Sleep(ctx, c.clock, time.Second) {
			return nil, ctx.Err()
		}
	}
	if !c.trusted() {
		return nil, errors.New("session no longer trusted after raising the fence")
	}
	return c.establish(nodeCtx, epoch), nil
}

// establish starts the leader-only services, in order, for a new term.
// revoke mirrors it.
func (c *Cluster) establish(ctx context.Context, epoch int64) *leadership {
	c.revoke("new term")
	leaderCtx, cancel := context.WithCancel(ctx)
	l := &leadership{epoch: epoch, cancel: cancel, fenced: make(chan struct{}, 1)}
	c.mu.Lock()
	c.leading = l
	c.leaderID = c.cfg.Node.ID
	c.mu.Unlock()
	c.metrics.isLeader.Set(1)
	c.metrics.leaderChanges.Inc()
	c.log.Info("elected leader", "epoch", epoch)
	for _, s := range c.services {
		if err := s.Start(leaderCtx); err != nil {
			c.log.Error("start leader service", "error", err)
		}
	}
	return l
}

// revoke stops the leader-only services, in reverse order, if this node
// leads.
func (c *Cluster) revoke(why string) {
	c.mu.Lock()
	l := c.leading
	c.leading = nil
	c.mu.Unlock()
	if l == nil {
		return
	}
	c.stopServices(l)
	c.metrics.leaderChanges.Inc()
	c.log.Info("stepped down as leader", "epoch", l.epoch, "reason", why)
}

func (c *Cluster) stopServices(l *leadership) {
	l.cancel()
	for i := len(c.services) - 1; i >= 0; i-- {
		c.services[i].Stop()
	}
	c.metrics.isLeader.Set(0)
}

// orphanedLeadership (TrustFenceOnly) keeps a term's services running
// after its session ended until a fenced write is refused.
func (c *Cluster) orphanedLeadership(ctx context.Context, l *leadership) {
	c.mu.Lock()
	c.leading = l
	c.mu.Unlock()
	select {
	case <-l.fenced:
	case <-ctx.Done():
	}
	c.revoke("fenced: a newer leader exists")
}

// watchLeader keeps LeaderID current.
func (c *Cluster) watchLeader(ctx context.Context, e *concurrency.Election) {
	for resp := range e.Observe(ctx) {
		if len(resp.Kvs) > 0 {
			c.mu.Lock()
			c.leaderID = string(resp.Kvs[0].Value)
			c.mu.Unlock()
		}
	}
}
