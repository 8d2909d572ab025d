package gaffer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

// Node runs job handlers for its queues and the background services that
// keep jobs moving (lease rescue, retention, queue gauges). Register
// handlers, then Start; Stop drains.
type Node struct {
	cfg     Config
	id      string
	log     hclog.Logger
	store   *store.Store
	ownPool bool
	// leases is a pool of its own, with the node's own pool, for the
	// worker's heartbeats and releases (job.WorkerConfig.LeasePool).
	leases   *store.Store
	registry *job.Registry
	metrics  *job.Metrics
	client   *job.Client
	dlq      *dlq.Client

	worker    *job.Worker
	remote    *remote.Workers
	listener  *store.Listener
	cluster   *cluster.Cluster // nil without etcd
	horizon   *maintenance.HorizonWatch
	scheduler *cron.Scheduler
	services  []backgroundService
	done      chan struct{}
	// beforeLeave runs once a drain ordered through the cluster finished,
	// before the node stops and closes its pools (OnDrainedStop).
	beforeLeave func()

	mu      sync.Mutex
	started bool
	stopped bool
}

// backgroundService is the shape every long-running loop has.
type backgroundService interface {
	Start(ctx context.Context) error
	Stop()
}

// NewNode validates cfg and returns a stopped node. With DatabaseURL it
// connects; ctx bounds that connection attempt.
func NewNode(ctx context.Context, cfg Config) (*Node, error) {
	n := &Node{cfg: cfg, registry: job.NewRegistry(), done: make(chan struct{})}
	n.log = cfg.Logger
	if n.log == nil {
		n.log = hclog.NewNullLogger()
	}
	n.id = cfg.ID
	if n.id == "" {
		n.id = DefaultNodeID()
	}
	n.log = n.log.With("node", n.id)
	switch {
	case cfg.Pool != nil:
		n.store = store.New(cfg.Pool)
	case cfg.DatabaseURL != "":
		maxConns := cfg.MaxConns
		if maxConns == 0 {
			total := 0
			for _, c := range cfg.Queues {
				total += c
			}
			maxConns = int32(min(max(total/10, 4), 20))
		}
		st, err := store.OpenWith(ctx, cfg.DatabaseURL, store.ConnectOptions{MaxConns: maxConns, TransactionPooler: cfg.TransactionPooler})
		if err != nil {
			return nil, err
		}
		n.store, n.ownPool = st, true
		// Two connections of their own for the writes that keep leases:
		// with the pool saturated (a slow database, a burst of claims and
		// completions) a heartbeat would wait for a connection, and a node
		// alive and well could see its leases run out.
		if n.leases, err = store.OpenWith(ctx, cfg.DatabaseURL, store.ConnectOptions{MaxConns: 2, TransactionPooler: cfg.TransactionPooler}); err != nil {
			st.Close()
			return nil, err
		}
		for _, note := range st.Notes() {
			n.log.Info(note)
		}
		for _, w := range st.Warnings() {
			n.log.Warn(w)
		}
	default:
		return nil, errors.New("gaffer: Config.Pool or Config.DatabaseURL is required")
	}
	n.metrics = job.NewMetrics(cfg.Registerer)
	workflow.RegisterBuiltins(n.registry)
	pool := n.store.Pool()
	var leasePool *pgxpool.Pool
	if n.leases != nil {
		leasePool = n.leases.Pool()
	}
	n.client = job.NewClient(pool, n.metrics).WithKinds(n.registry)
	n.dlq = dlq.NewClient(pool)
	var err error
	n.worker, err = job.NewWorker(job.WorkerConfig{
		Pool: pool, LeasePool: leasePool, Registry: n.registry, NodeID: n.id, Metrics: n.metrics, Logger: n.log,
		Queues: cfg.Queues, LeaseTTL: cfg.LeaseTTL, PollInterval: cfg.PollInterval,
		ClaimBatch: cfg.ClaimBatch, FetchCooldown: cfg.FetchCooldown, TrickleCooldown: cfg.TrickleCooldown, TracerProvider: cfg.TracerProvider,
	})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	// Remote workers claim through any node's API; every node sweeps
	// them (drains, deadlines, silence), unfenced like the lease rescuer:
	// the sweep's statements are idempotent.
	n.remote, err = remote.NewWorkers(remote.Config{Pool: pool, Metrics: n.metrics, Logger: n.log, LeaseTTL: cfg.LeaseTTL,
		MaxWait: cfg.RemoteMaxWait, MaxWaitingPerTenant: cfg.RemoteMaxWaiting})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	// The lease rescuer runs on every node, unfenced: it is the backstop
	// for a node that died while no leader can be proven (etcd down), and
	// its writes are compare-and-set on expired leases, so several nodes
	// sweeping at once only waste a query.
	rescuer, err := maintenance.NewLeaseRescuer(maintenance.LeaseRescuerConfig{Pool: pool, Metrics: n.metrics, Logger: n.log,
		Interval: cfg.RescueInterval, Fence: job.Unfenced{Pool: pool}})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	var fence job.Fence = job.Unfenced{Pool: pool}
	if len(cfg.EtcdEndpoints) > 0 {
		if err := n.newCluster(rescuer); err != nil {
			return nil, n.closeOnError(err)
		}
		fence = n.cluster
	}
	cleaner, err := maintenance.NewRetentionCleaner(maintenance.RetentionCleanerConfig{Pool: pool, Logger: n.log, Fence: fence,
		JobRetention: cfg.JobRetention, DLQRetention: cfg.DLQRetention, IdempotencyRetention: cfg.IdempotencyRetention,
		WorkflowRetention: cfg.WorkflowRetention, DeadNodeRetention: cfg.DeadNodeRetention,
		CronHistoryRetention: cfg.CronHistoryRetention, RevokedTokenRetention: cfg.RevokedTokenRetention})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	monitor, err := maintenance.NewQueueMonitor(maintenance.QueueMonitorConfig{Pool: pool, Metrics: n.metrics, Logger: n.log, Fence: fence,
		Interval: cfg.QueueMonitorInterval})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	// Every node watches the horizon, so that each one's status tells;
	// the leader logs.
	n.horizon, err = maintenance.NewHorizonWatch(maintenance.HorizonWatchConfig{Pool: pool, Metrics: n.metrics, Logger: n.log,
		Speak: func() bool { return n.cluster == nil || n.cluster.IsLeader() }})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	var vacuumer *maintenance.Vacuumer
	if cfg.VacuumThreshold >= 0 {
		vacuumer, err = maintenance.NewVacuumer(maintenance.VacuumerConfig{Pool: pool, Logger: n.log, Threshold: cfg.VacuumThreshold})
		if err != nil {
			return nil, n.closeOnError(err)
		}
	}
	ring, err := maintenance.NewReadyRing(maintenance.ReadyRingConfig{Pool: pool, Logger: n.log})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	n.scheduler, err = cron.NewScheduler(cron.SchedulerConfig{Pool: pool, Fence: fence, Logger: n.log,
		Registerer: cfg.Registerer, MisfireGrace: cfg.CronMisfireGrace, TenantFireRate: cfg.CronTenantFireRate})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	queues := make([]string, 0, len(n.worker.Queues()))
	for q := range n.worker.Queues() {
		queues = append(queues, q)
	}
	labels, err := maintenance.NewLabelRefresher(maintenance.LabelRefresherConfig{Pool: pool, Metrics: n.metrics, Registry: n.registry,
		Queues: queues, Logger: n.log})
	if err != nil {
		return nil, n.closeOnError(err)
	}
	n.services = []backgroundService{labels, rescuer, n.remote, n.horizon}
	leaderOnly := []cluster.Service{cleaner, monitor, n.scheduler, ring}
	if vacuumer != nil {
		leaderOnly = append(leaderOnly, vacuumer)
	}
	if n.cluster != nil {
		// Leader-only: started and stopped by the cluster with leadership.
		n.cluster.LeaderServices(leaderOnly...)
	} else {
		for _, s := range leaderOnly {
			n.services = append(n.services, s)
		}
	}
	if cfg.ListenDatabaseURL != "" {
		_, notes, err := store.ListenConfig(cfg.ListenDatabaseURL)
		if err != nil {
			return nil, n.closeOnError(fmt.Errorf("gaffer: Config.ListenDatabaseURL: %w", err))
		}
		for _, note := range notes {
			n.log.Info("listen connection: " + note)
		}
	}
	if cfg.TransactionPooler && cfg.ListenDatabaseURL == "" {
		// LISTEN through the pooler would register on whichever server
		// connection ran it and hear nothing after.
		n.log.Warn("the database URL goes through a transaction pooler, which cannot carry LISTEN, and no listen database URL is set: " +
			"running without a LISTEN connection; new jobs, cancellations, pauses and drain orders are found by polling only (poll interval), " +
			"not at once; set a direct URL for LISTEN (--listen-database-url)")
		return n, nil
	}
	n.listener = n.store.NewListener(store.ListenerConfig{
		Channels: []string{store.ChannelJobs, store.ChannelUnits, store.ChannelControl, store.ChannelCron},
		URL:      cfg.ListenDatabaseURL,
		OnNotify: n.handleNotification,
		OnConnect: func() {
			n.worker.SetListening(true)
			n.worker.WakeAll()
			n.remote.WakeAll()
		},
		OnDisconnect: func() { n.worker.SetListening(false) },
		Logger:       n.log.Named("listener"),
	})
	return n, nil
}

func (n *Node) newCluster(rescuer *maintenance.LeaseRescuer) error {
	host, _ := os.Hostname()
	version := n.cfg.Version
	if version == "" {
		version = "dev"
	}
	c, err := cluster.New(cluster.Config{
		Endpoints: n.cfg.EtcdEndpoints, TLS: n.cfg.EtcdTLS, Username: n.cfg.EtcdUsername, Password: n.cfg.EtcdPassword,
		Prefix: n.cfg.ClusterPrefix, SessionTTL: n.cfg.SessionTTL,
		ReportInterval: n.cfg.ReportInterval, Pool: n.store.Pool(), Worker: n.worker,
		Node: cluster.NodeInfo{ID: n.id, Hostname: host, Version: version, Queues: n.worker.Queues()},
		RescueNode: func(ctx context.Context, fence cluster.Fence, node string) (int, error) {
			return rescuer.RescueNode(ctx, fence, node)
		},
		OnLeave:    n.onLeave,
		Logger:     n.log,
		Registerer: n.cfg.Registerer,
	})
	if err != nil {
		return err
	}
	n.cluster = c
	return nil
}

func (n *Node) handleNotification(channel, payload string) {
	if channel == store.ChannelCron {
		n.scheduler.Wake()
		return
	}
	n.worker.HandleNotification(channel, payload)
	n.remote.HandleNotification(channel, payload)
	if n.cluster != nil {
		n.cluster.HandleNotification(channel, payload)
	}
}

// onLeave runs when a drain has finished and the node left: it stops.
// Its jobs are finished or released already; a handler that ignores its
// cancelled context is not waited for long.
func (n *Node) onLeave() {
	n.mu.Lock()
	before := n.beforeLeave
	n.mu.Unlock()
	if before != nil {
		before()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.Stop(ctx)
}

// OnDrainedStop sets f to run when a drain ordered through the cluster
// has finished, before the node stops and closes its pools: a server
// shuts its HTTP listener down there, so that the requests it is still
// serving — the drain order itself among them, when the node was asked
// to drain itself — finish on open pools.
func (n *Node) OnDrainedStop(f func()) {
	n.mu.Lock()
	n.beforeLeave = f
	n.mu.Unlock()
}

// Done is closed once the node has stopped — after Stop, or after a drain
// ordered through the cluster has finished and the node left.
func (n *Node) Done() <-chan struct{} { return n.done }

// Health says what this node sees degraded beyond its cluster
// membership (Cluster().Status()): a long transaction holding back
// vacuum. identify names the holder: for an operator, not a tenant.
func (n *Node) Health(identify bool) []string { return n.horizon.Health(identify) }

// Cluster is the node's cluster membership, or nil without etcd.
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }

func (n *Node) closeOnError(err error) error {
	if n.ownPool {
		n.store.Close()
		n.leases.Close()
	}
	return err
}

// DefaultNodeID is hostname-<6 hex>, unique per process.
func DefaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	b := make([]byte, 3)
	rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// ID is the node's id.
func (n *Node) ID() string { return n.id }

// Handle registers h for jobs of kind. Register before Start.
func (n *Node) Handle(kind string, h job.Handler, opts ...job.KindOptions) {
	n.registry.Handle(kind, h, opts...)
}

// HandleFunc registers fn for jobs of kind. Register before Start.
func (n *Node) HandleFunc(kind string, fn func(ctx context.Context, j *job.Job) error, opts ...job.KindOptions) {
	n.registry.HandleFunc(kind, fn, opts...)
}

// Registry is the node's handler registry, for job.HandleArgs.
func (n *Node) Registry() *job.Registry { return n.registry }

// Client enqueues and manages jobs through the node's pool.
func (n *Node) Client() *job.Client { return n.client }

// DLQ lists and replays dead letters through the node's pool.
func (n *Node) DLQ() *dlq.Client { return n.dlq }

// Workflows submits and manages workflow runs through the node's pool.
func (n *Node) Workflows() *workflow.Client {
	return workflow.NewClient(n.store.Pool()).WithKinds(n.registry)
}

// Cron manages cron entries through the node's pool.
func (n *Node) Cron() *cron.Client { return cron.NewClient(n.store.Pool()).WithKinds(n.registry) }

// Pool is the node's connection pool: Config.Pool, or the one it opened
// from Config.DatabaseURL (closed by Stop).
func (n *Node) Pool() *pgxpool.Pool { return n.store.Pool() }

// Worker is the node's worker, for drain and inspection.
func (n *Node) Worker() *job.Worker { return n.worker }

// RemoteWorkers serves the remote workers that claim through this node
// (the API's /v1/work endpoints); its waiting claims are woken by the
// node's notifications.
func (n *Node) RemoteWorkers() *remote.Workers { return n.remote }

// Start checks the schema, then starts listening, claiming and the
// background services. It does not block. ctx bounds the schema check
// only: the loops run until Stop (they take ctx's values, not its
// cancellation), so that cancelling a start-up context cannot leave a node
// half running with its jobs' leases unreleased. Stop shuts down cleanly.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return nil
	}
	if n.stopped {
		return errors.New("gaffer: cannot restart a stopped node")
	}
	if !n.cfg.SkipSchemaCheck {
		if err := n.store.CheckSchema(ctx); err != nil {
			return fmt.Errorf("gaffer: %w", err)
		}
	}
	loopCtx := context.WithoutCancel(ctx)
	if n.listener != nil {
		if err := n.listener.Start(loopCtx); err != nil {
			return err
		}
	}
	if n.cluster != nil {
		n.cluster.SetKinds(n.registry.Kinds())
		if err := n.cluster.Start(loopCtx); err != nil {
			return err
		}
	}
	if err := n.worker.Start(loopCtx); err != nil {
		return err
	}
	for _, s := range n.services {
		if err := s.Start(loopCtx); err != nil {
			return err
		}
	}
	n.started = true
	n.log.Info("node started", "queues", n.worker.Queues(), "kinds", n.registry.Kinds())
	return nil
}

// Stop drains the node: it stops claiming at once, waits for running jobs
// until ctx ends, then releases the leases of jobs still running so that
// other nodes run them at once. It then stops every background loop and,
// if the node opened its pool, closes it.
func (n *Node) Stop(ctx context.Context) error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.stopped = true
	started := n.started
	n.mu.Unlock()
	var err error
	if started {
		n.log.Info("node stopping", "in_flight", n.worker.InFlight())
		if n.cluster != nil {
			n.cluster.SetDraining()
		}
		err = n.worker.Stop(ctx)
		for i := len(n.services) - 1; i >= 0; i-- {
			n.services[i].Stop()
		}
		if n.cluster != nil {
			// Recorded as left before the etcd key goes, so that the leader
			// does not take the clean exit for a death.
			n.cluster.Leave(context.Background(), "stopped")
			n.cluster.Stop()
		}
		if n.listener != nil {
			n.listener.Stop()
		}
	}
	if n.ownPool {
		n.store.Close()
		n.leases.Close()
	}
	n.log.Info("node stopped")
	close(n.done)
	return err
}
