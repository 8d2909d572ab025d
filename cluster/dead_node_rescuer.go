package cluster

import (
	"context"
	"errors"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
)

// deadNodeRescuer is a leader-only service. It compares the nodes table
// with the members registered in etcd, then watches the registrations:
// when a node's key vanishes (its session lease expired: the node died or
// was cut off), it ends the node's running attempts at once — fenced by
// their lease tokens, so a node that was only cut off cannot complete
// them late — and marks the node dead.
type deadNodeRescuer struct {
	c      *Cluster
	runner service.Runner
}

func newDeadNodeRescuer(c *Cluster) *deadNodeRescuer { return &deadNodeRescuer{c: c} }

func (d *deadNodeRescuer) Start(ctx context.Context) error {
	d.runner.Start(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			if err := d.run(ctx); err != nil && ctx.Err() == nil {
				d.c.log.Warn("dead-node watch ended; restarting", "error", err)
				clock.Sleep(ctx, d.c.clock, time.Second)
			}
		}
	})
	return nil
}

func (d *deadNodeRescuer) Stop() { d.runner.Stop() }

func (d *deadNodeRescuer) run(ctx context.Context) error {
	c := d.c
	resp, err := c.etcd().Get(ctx, c.nodesPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	registered := map[string]bool{}
	for _, kv := range resp.Kvs {
		registered[strings.TrimPrefix(string(kv.Key), c.nodesPrefix())] = true
	}
	// Nodes that died while there was no leader to see them go. A node
	// writes its row first and registers in etcd a moment later, so one
	// whose row is younger than the grace may be starting, not dead: it is
	// looked at again once the grace has passed (lost checks etcd again).
	live, err := c.store.LiveNodes(ctx)
	if err != nil {
		return err
	}
	grace := d.grace()
	young := map[string]time.Time{}
	for _, n := range live {
		switch {
		case registered[n.ID]:
		case n.Age < grace:
			young[n.ID] = c.clock.Now().Add(grace - n.Age)
		default:
			if err := d.lost(ctx, n.ID); err != nil {
				return err
			}
		}
	}
	d.refreshGauge(ctx)
	watch := c.etcd().Watch(clientv3.WithRequireLeader(ctx), c.nodesPrefix(), clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	gauge := d.c.clock.NewTicker(5 * time.Second)
	defer gauge.Stop()
	recheck := d.c.clock.NewTicker(time.Second)
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-recheck.C():
			for id, at := range young {
				if c.clock.Now().Before(at) {
					continue
				}
				delete(young, id)
				if err := d.lost(ctx, id); err != nil {
					return err
				}
			}
		case <-gauge.C():
			d.refreshGauge(ctx)
		case w, ok := <-watch:
			if !ok {
				return errors.New("watch closed")
			}
			if err := w.Err(); err != nil {
				return err
			}
			for _, ev := range w.Events {
				if ev.Type != clientv3.EventTypeDelete {
					continue
				}
				if err := d.lost(ctx, strings.TrimPrefix(string(ev.Kv.Key), c.nodesPrefix())); err != nil {
					return err
				}
			}
		}
	}
}

// grace is how long after writing its row a node may take to register in
// etcd before a leader that does not find it there calls it lost: its
// session TTL, and at least 5 s.
func (d *deadNodeRescuer) grace() time.Duration { return max(d.c.cfg.SessionTTL, 5*time.Second) }

// lost rescues a vanished node's running jobs, then marks it dead; in
// that order, so that a failure half-way is retried by the next pass.
func (d *deadNodeRescuer) lost(ctx context.Context, id string) error {
	c := d.c
	// Never this node: its own key goes only with its session, and then
	// the next leader rescues it (this one has stepped down, or, with
	// TrustFenceOnly, will be refused by the fence on its next write).
	if id == c.cfg.Node.ID {
		return nil
	}
	// The same node may already be back under a new session.
	if resp, err := c.etcd().Get(ctx, c.nodeKey(id), clientv3.WithKeysOnly()); err != nil {
		return err
	} else if len(resp.Kvs) > 0 {
		return nil
	}
	n, err := c.cfg.RescueNode(ctx, c, id)
	if err != nil {
		return err
	}
	var marked bool
	if err := c.Do(ctx, func(q pgx.Tx) error {
		var err error
		marked, err = c.store.MarkNodeLost(ctx, q, id)
		return err
	}); err != nil {
		return err
	}
	if marked || n > 0 {
		c.log.Warn("node lost; its running jobs were released to other nodes", "lost_node", id, "jobs", n)
	}
	return nil
}

func (d *deadNodeRescuer) refreshGauge(ctx context.Context) {
	nodes, err := d.c.store.ListNodes(ctx)
	if err != nil {
		return
	}
	counts := map[string]float64{"active": 0, "draining": 0, "dead": 0}
	for _, n := range nodes {
		counts[n.State]++
	}
	for state, n := range counts {
		d.c.metrics.nodes.WithLabelValues(state).Set(n)
	}
}
