package cluster

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/knobs"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/internal/tzdata"
	"github.com/gafferhq/gaffer/store"
)

// Cluster is one node's membership in the cluster: its etcd session and
// registration, its part in the leader election, the leader-only services
// it runs while it leads, its report to the nodes table, and its drain.
// See the package documentation for the state machine.
type Cluster struct {
	cfg     Config
	log     hclog.Logger
	store   *store.Store
	metrics *metrics
	// clock times the loops: session retries, publishing, the trust
	// window, reports and drains.
	clock clock.Clock
	// fenceOnly: see knobs.SetTrustFenceOnly (a testing aid).
	fenceOnly bool
	// client is nil until the session loop first connects (see connect).
	client atomic.Pointer[clientv3.Client]

	services []Service // leader-only, in start order

	runner     service.Runner // the session loop
	reporter   service.Runner // the nodes-table report loop
	wakeReport chan struct{}
	published  string // the registration last written to etcd

	connected atomic.Bool
	lastAck   atomic.Int64 // unix nanos of the last keepalive answer

	// reportMu orders reports and the leave: a report that read the
	// state before the node left must not write after the leave did.
	reportMu sync.Mutex

	mu        sync.Mutex
	leading   *leadership
	state     string // "active", "draining" or "left"
	leaderID  string
	etcdErr   string        // why the last session ended or could not start
	drainStop chan struct{} // closes to cancel a running drain
	leaveOnce sync.Once
}

// New validates cfg. It does not touch etcd: the session loop connects,
// so an unreachable etcd (or refused credentials) never fails New or
// Start. Register leader-only services with LeaderServices before Start.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg: cfg, log: cfg.Logger.Named("cluster"), store: store.New(cfg.Pool),
		metrics: newMetrics(cfg.Registerer), state: "active",
		wakeReport: make(chan struct{}, 1), fenceOnly: knobs.TrustFenceOnly(cfg.Node.ID), clock: clock.Real,
	}
	c.services = []Service{newDeadNodeRescuer(c)}
	return c, nil
}

// LeaderServices adds services that run only on the leader. They start in
// the order given when this node wins the election, and stop in the
// reverse order when it loses it (or its etcd session ends). Call before
// Start.
func (c *Cluster) LeaderServices(s ...Service) { c.services = append(c.services, s...) }

// SetKinds records the job kinds this node handles, reported with its
// registration (metrics label only kinds some node handles). Call before
// Start.
func (c *Cluster) SetKinds(kinds []string) { c.cfg.Node.Kinds = kinds }

// Start registers the node in the nodes table and starts the session loop
// (etcd registration and election) and the report loop. It does not
// block: etcd being unreachable is not an error, the loops keep trying.
func (c *Cluster) Start(ctx context.Context) error {
	n := c.cfg.Node
	if err := c.store.RegisterNode(ctx, n.ID, n.Hostname, n.Version, tzdata.Version, n.Queues, n.Kinds); err != nil {
		return err
	}
	c.runner.Start(ctx, c.sessionLoop)
	c.reporter.Start(ctx, c.reportLoop)
	return nil
}

// Stop leaves the cluster: it stops leading (leader services stop),
// resigns, and closes the etcd session so that the node's key vanishes.
// The caller drains the worker and records the node as left first.
func (c *Cluster) Stop() {
	c.runner.Stop()
	c.reporter.Stop()
	if cl := c.client.Load(); cl != nil {
		cl.Close()
	}
}

// Status is what a node knows of the cluster.
type Status struct {
	EtcdConnected bool
	IsLeader      bool
	// Epoch of this node's leadership, when it leads.
	Epoch int64
	// LeaderID is the leader as this node last saw it; empty if unknown.
	LeaderID string
	// State is this node's state: "active", "draining" or "left".
	State string
	// Degraded lists what is not working, in words.
	Degraded []string
}

// Status reports this node's view.
func (c *Cluster) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{EtcdConnected: c.connected.Load(), State: c.state, LeaderID: c.leaderID}
	if c.leading != nil {
		s.IsLeader, s.Epoch = true, c.leading.epoch
	}
	if !s.EtcdConnected {
		what := "etcd unreachable"
		if c.etcdErr != "" {
			// Refused credentials or certificates look the same to the jobs:
			// say which it is.
			what = "not connected to etcd (" + c.etcdErr + ")"
		}
		s.Degraded = append(s.Degraded, what+": jobs run from PostgreSQL; leader-only work (cron, rescue of dead nodes) is paused until etcd returns")
	}
	return s
}

func (c *Cluster) nodeKey(id string) string { return c.cfg.Prefix + "/nodes/" + id }
func (c *Cluster) nodesPrefix() string      { return c.cfg.Prefix + "/nodes/" }
func (c *Cluster) electionPrefix() string   { return c.cfg.Prefix + "/leader" }
