package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gafferhq/gaffer/internal/tzdata"
	"github.com/gafferhq/gaffer/store"
)

// reportLoop reports this node to the nodes table every ReportInterval,
// or at once when a drain notification wakes it, and acts on the drain
// order it reads back. It needs only PostgreSQL.
func (c *Cluster) reportLoop(ctx context.Context) {
	t := c.clock.NewTicker(c.cfg.ReportInterval)
	defer t.Stop()
	for {
		c.report(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-c.wakeReport:
		}
	}
}

func (c *Cluster) report(ctx context.Context) {
	c.reportMu.Lock()
	defer c.reportMu.Unlock()
	c.mu.Lock()
	state := c.state
	c.mu.Unlock()
	if state == "left" {
		return
	}
	inFlight := c.cfg.Worker.InFlight()
	if state == "draining" {
		c.metrics.drainInFlight.Set(float64(inFlight))
	}
	order, err := c.store.TouchNode(ctx, c.cfg.Node.ID, inFlight, state)
	if errors.Is(err, store.ErrNotFound) {
		n := c.cfg.Node
		err = c.store.RegisterNode(ctx, n.ID, n.Hostname, n.Version, tzdata.Version, n.Queues, n.Kinds)
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("report to the nodes table", "error", err)
		}
		return
	}
	switch {
	case order.Requested && state == "active":
		c.startDrain(ctx, order.Left)
	case !order.Requested && state == "draining":
		c.cancelDrain()
	}
}

type controlMessage struct {
	Op   string `json:"op"`
	Node string `json:"node"`
}

// HandleNotification reacts to drain and undrain orders for this node
// sent on store.ChannelControl. It does not block.
func (c *Cluster) HandleNotification(channel, payload string) {
	if channel != store.ChannelControl {
		return
	}
	var m controlMessage
	if json.Unmarshal([]byte(payload), &m) != nil || m.Node != c.cfg.Node.ID {
		return
	}
	if m.Op == "drain" || m.Op == "undrain" {
		select {
		case c.wakeReport <- struct{}{}:
		default:
		}
	}
}

// startDrain stops claiming and lets the running jobs finish for up to
// left, then releases what still runs, records the node as drained and
// leaves.
func (c *Cluster) startDrain(ctx context.Context, left time.Duration) {
	c.mu.Lock()
	if c.state != "active" {
		c.mu.Unlock()
		return
	}
	c.state = "draining"
	stop := make(chan struct{})
	c.drainStop = stop
	c.mu.Unlock()
	c.cfg.Worker.SetClaiming(false)
	c.metrics.draining.Set(1)
	c.log.Info("draining", "deadline_in", left.Round(time.Millisecond), "in_flight", c.cfg.Worker.InFlight())
	go c.drain(context.WithoutCancel(ctx), left, stop)
}

func (c *Cluster) drain(ctx context.Context, left time.Duration, stop chan struct{}) {
	deadline := c.clock.NewTimer(max(left, 0))
	defer deadline.Stop()
	tick := c.clock.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n := c.cfg.Worker.InFlight()
		c.metrics.drainInFlight.Set(float64(n))
		if n == 0 {
			c.leave(ctx, "drained")
			return
		}
		select {
		case <-stop:
			return
		case <-deadline.C():
			c.log.Warn("drain deadline reached; releasing running jobs to other nodes", "in_flight", c.cfg.Worker.InFlight())
			if err := c.cfg.Worker.ReleaseRunning(); err != nil {
				c.log.Error("release running jobs at the drain deadline; their leases will expire instead", "error", err)
			}
			c.leave(ctx, "drained")
			return
		case <-tick.C():
		}
	}
}

// cancelDrain puts a node draining on a drain order back to work. A node
// draining because it is shutting down (SetDraining) has no order to take
// back: it stays draining.
func (c *Cluster) cancelDrain() {
	c.mu.Lock()
	if c.state != "draining" || c.drainStop == nil {
		c.mu.Unlock()
		return
	}
	c.state = "active"
	close(c.drainStop)
	c.drainStop = nil
	c.mu.Unlock()
	c.cfg.Worker.SetClaiming(true)
	c.metrics.draining.Set(0)
	c.metrics.drainInFlight.Set(0)
	c.log.Info("drain cancelled; claiming again")
}

// leave records the node as gone and calls OnLeave, once.
func (c *Cluster) leave(ctx context.Context, reason string) {
	c.leaveOnce.Do(func() {
		c.reportMu.Lock()
		c.mu.Lock()
		c.state = "left"
		c.mu.Unlock()
		c.metrics.draining.Set(0)
		c.metrics.drainInFlight.Set(0)
		if err := c.store.NodeLeft(ctx, c.cfg.Node.ID, reason); err != nil {
			c.log.Error("record node left", "error", err)
		}
		c.reportMu.Unlock()
		c.log.Info("left the cluster", "reason", reason)
		go c.cfg.OnLeave()
	})
}

// Leave records this node as gone for reason ("stopped" on a shutdown).
// The node's owner calls it after its worker has drained, before Stop.
func (c *Cluster) Leave(ctx context.Context, reason string) { c.leave(ctx, reason) }

// SetState marks the node draining (a shutdown drain), so the cluster
// sees it at the next report.
func (c *Cluster) SetDraining() {
	c.mu.Lock()
	if c.state == "active" {
		c.state = "draining"
	}
	c.mu.Unlock()
	c.metrics.draining.Set(1)
	select {
	case c.wakeReport <- struct{}{}:
	default:
	}
}
