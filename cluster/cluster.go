package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/gafferhq/gaffer/internal/knobs"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/internal/store"
	"github.com/gafferhq/gaffer/internal/tzdata"
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

// leadership is one term as leader.
type leadership struct {
	epoch  int64
	cancel context.CancelFunc
	// fenced receives when a write under this term was refused.
	fenced chan struct{}
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
		wakeReport: make(chan struct{}, 1), fenceOnly: knobs.TrustFenceOnly(cfg.Node.ID),
	}
	c.services = []Service{newDeadNodeRescuer(c)}
	return c, nil
}

// connect returns the etcd client, creating it the first time. Without a
// username that only sets up a lazily dialling client; with one, the
// client authenticates as it is created (etcd's client does so), which
// fails while etcd is unreachable or refuses the credentials: the
// session loop then retries. Only the session loop calls it.
func (c *Cluster) connect() (*clientv3.Client, error) {
	if cl := c.client.Load(); cl != nil {
		return cl, nil
	}
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:            c.cfg.Endpoints,
		DialTimeout:          c.cfg.DialTimeout,
		DialKeepAliveTime:    c.cfg.SessionTTL / 2,
		DialKeepAliveTimeout: c.cfg.SessionTTL / 4,
		TLS:                  c.cfg.TLS,
		Username:             c.cfg.Username,
		Password:             c.cfg.Password,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	c.client.Store(cl)
	return cl, nil
}

// etcd is the client the session loop connected. Leader services and the
// session's helpers run only within a session, so it is never nil there.
func (c *Cluster) etcd() *clientv3.Client { return c.client.Load() }

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

// IsLeader reports whether this node leads and can prove it now.
func (c *Cluster) IsLeader() bool {
	c.mu.Lock()
	l := c.leading
	c.mu.Unlock()
	return l != nil && c.trusted()
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

// sessionLoop holds an etcd session, re-creating it whenever it ends,
// with jittered backoff while etcd is unreachable.
func (c *Cluster) sessionLoop(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := c.session(ctx, func() { backoff = 200 * time.Millisecond })
		c.connected.Store(false)
		c.metrics.etcdConnected.Set(0)
		if ctx.Err() != nil {
			return
		}
		err = c.explainTimeout(ctx, err)
		c.mu.Lock()
		c.etcdErr = err.Error()
		c.mu.Unlock()
		c.log.Warn("etcd session ended; retrying", "error", err, "backoff", backoff)
		if !sleepCtx(ctx, backoff/2+rand.N(backoff/2+1)) {
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// session runs one etcd session: register, campaign, lead, until the
// session ends or ctx does.
func (c *Cluster) session(ctx context.Context, connected func()) error {
	client, err := c.connect()
	if err != nil {
		return err
	}
	ttl := int(c.cfg.SessionTTL / time.Second)
	grantCtx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	lease, err := client.Grant(grantCtx, int64(ttl))
	cancel()
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	// The session's own context must outlive ctx: Close revokes the lease
	// with it.
	sess, err := concurrency.NewSession(client, concurrency.WithLease(lease.ID), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return fmt.Errorf("new session: %w", err)
	}
	sessCtx, stopSession := context.WithCancel(ctx)
	defer func() {
		stopSession()
		closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sess.Orphan()
		client.Revoke(closeCtx, sess.Lease())
	}()
	c.lastAck.Store(time.Now().UnixNano())
	go c.watchKeepalives(sessCtx, sess)
	if err := c.publish(sessCtx, sess); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	c.mu.Lock()
	c.etcdErr = ""
	c.mu.Unlock()
	c.connected.Store(true)
	c.metrics.etcdConnected.Set(1)
	connected()
	c.log.Info("joined cluster", "lease", fmt.Sprintf("%x", int64(sess.Lease())))

	election := concurrency.NewElection(sess, c.electionPrefix())
	go c.watchLeader(sessCtx, election)
	won := make(chan error, 1)
	campaigning := false
	campaign := func() {
		campaigning = true
		go func() { won <- election.Campaign(sessCtx, c.cfg.Node.ID) }()
	}
	// resign gives up the election key; a pending Campaign must return
	// first (the Election is not safe for concurrent use).
	resign := func() {
		if campaigning {
			stopSession()
			<-won
			campaigning = false
		}
		resignCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		election.Resign(resignCtx)
		cancel()
	}
	campaign()
	publish := time.NewTicker(time.Second)
	defer publish.Stop()
	defer c.revoke("session ended")
	var term *leadership // this session's term, once won
	for {
		var fenced <-chan struct{}
		if term != nil {
			fenced = term.fenced
		}
		select {
		case <-ctx.Done():
			c.revoke("node stopping")
			resign()
			return ctx.Err()
		case <-sess.Done():
			if c.fenceOnly && term != nil {
				// Keep leading until the fence says otherwise.
				c.mu.Lock()
				c.leading = nil
				c.mu.Unlock()
				go c.orphanedLeadership(ctx, term)
			}
			return errors.New("session lease expired or revoked")
		case err := <-won:
			campaigning = false
			if err != nil {
				if sessCtx.Err() != nil {
					return err
				}
				c.log.Warn("campaign failed; campaigning again", "error", err)
				sleepCtx(ctx, time.Second)
				campaign()
				continue
			}
			if term, err = c.becomeLeader(ctx, sessCtx, sess, election); err != nil {
				c.log.Warn("won the election but cannot lead; resigning", "error", err)
				resign()
				sleepCtx(ctx, time.Second)
				campaign()
			}
		case <-fenced:
			term = nil
			c.revoke("fenced: a newer leader exists")
			resign()
			campaign()
		case <-publish.C:
			if err := c.publish(sessCtx, sess); err != nil && sessCtx.Err() == nil {
				c.log.Warn("refresh node registration", "error", err)
			}
		}
	}
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
		if !sleepCtx(ctx, time.Second) {
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
	return time.Since(last) < c.cfg.SessionTTL-c.cfg.trustMargin()
}

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

// watchKeepalives records when etcd last answered a keepalive for the
// session's lease: the start of the trust window.
func (c *Cluster) watchKeepalives(ctx context.Context, sess *concurrency.Session) {
	ch, err := c.etcd().KeepAlive(ctx, sess.Lease())
	if err != nil {
		return
	}
	for resp := range ch {
		if resp != nil && resp.TTL > 0 {
			c.lastAck.Store(time.Now().UnixNano())
		}
	}
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

// Member is a node as registered in etcd.
type Member struct {
	NodeInfo
	State     string    `json:"state"`
	InFlight  int       `json:"in_flight"`
	StartedAt time.Time `json:"started_at"`
}

// publish writes this node's registration under its session's lease.
func (c *Cluster) publish(ctx context.Context, sess *concurrency.Session) error {
	c.mu.Lock()
	state := c.state
	c.mu.Unlock()
	m := Member{NodeInfo: c.cfg.Node, State: state, InFlight: c.cfg.Worker.InFlight(), StartedAt: startedAt}
	b, _ := json.Marshal(m)
	value := fmt.Sprintf("%x/%s", int64(sess.Lease()), b)
	if value == c.published {
		return nil // unchanged: etcd keeps it under the lease
	}
	putCtx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	if _, err := c.etcd().Put(putCtx, c.nodeKey(c.cfg.Node.ID), string(b), clientv3.WithLease(sess.Lease())); err != nil {
		return err
	}
	c.published = value
	return nil
}

var startedAt = time.Now()

// Members lists the nodes registered in etcd now.
func (c *Cluster) Members(ctx context.Context) ([]Member, error) {
	client := c.client.Load()
	if client == nil {
		return nil, errors.New("not connected to etcd yet")
	}
	resp, err := client.Get(ctx, c.nodesPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
