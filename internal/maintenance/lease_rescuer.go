package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// LeaseRescuerConfig configures a LeaseRescuer.
type LeaseRescuerConfig struct {
	Pool *pgxpool.Pool // required
	// Metrics counts the rescued attempts. Default: a *job.Metrics
	// registered nowhere.
	Metrics RescueMetrics
	Logger  hclog.Logger
	// Fence guards the rescue writes. Default job.Unfenced.
	Fence Fence
	// Interval between sweeps. Default 5s: a job whose node vanished runs
	// again at most LeaseTTL + Interval after its last heartbeat.
	Interval time.Duration
	// BatchSize caps the attempts one statement rescues. Default 1000.
	BatchSize int
}

// RescueMetrics counts what a LeaseRescuer ends: *job.Metrics, whose
// series the attempts a worker ends share.
type RescueMetrics interface {
	// CountRescued counts an attempt ended as lost, by the job's new
	// state.
	CountRescued(queue, kind, newState string)
}

// LeaseRescuer ends running attempts whose lease expired by the database
// clock: each job retries at once, goes to the DLQ if that was its last
// attempt, or ends cancelled if that was requested. It is safe to run on
// several nodes at once (rows are locked SKIP LOCKED and every write is
// compare-and-set), and every node runs it, unfenced: it must work when
// no leader can be proven (etcd down), since it is then the only thing
// that re-runs the jobs of a node that died.
type LeaseRescuer struct {
	cfg    LeaseRescuerConfig
	store  *store.Store
	log    hclog.Logger
	runner service.Runner
	clock  clock.Clock
}

// NewLeaseRescuer validates cfg and returns a stopped rescuer.
func NewLeaseRescuer(cfg LeaseRescuerConfig) (*LeaseRescuer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("LeaseRescuerConfig.Pool is required")
	}
	if cfg.Interval < 0 || cfg.BatchSize < 0 {
		return nil, errors.New("LeaseRescuerConfig: Interval and BatchSize must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 1000
	}
	if cfg.Metrics == nil {
		cfg.Metrics = job.NewMetrics(nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Fence == nil {
		cfg.Fence = job.Unfenced{Pool: cfg.Pool}
	}
	return &LeaseRescuer{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("lease_rescuer"), clock: clock.Real}, nil
}

// Start begins sweeping in the background; non-blocking and idempotent.
func (r *LeaseRescuer) Start(ctx context.Context) error {
	r.runner.StartEvery(ctx, r.clock, r.cfg.Interval, func(ctx context.Context) error {
		_, err := r.RunOnce(ctx)
		return err
	}, r.log, "rescue expired leases")
	return nil
}

// Stop ends the loop and waits for it.
func (r *LeaseRescuer) Stop() { r.runner.Stop() }

// RunOnce rescues every attempt whose lease has expired now and returns
// how many it rescued.
func (r *LeaseRescuer) RunOnce(ctx context.Context) (int, error) {
	return rescueNode(ctx, r.store, r.cfg.Fence, r.cfg.Metrics, r.log, "", r.cfg.BatchSize)
}

// RescueNode ends every attempt running on node, which the cluster knows
// is gone, and those whose lease expired, through fence (the leader's:
// only the leader acts on the cluster's word that a node left). It
// returns how many it ended.
func (r *LeaseRescuer) RescueNode(ctx context.Context, fence Fence, node string) (int, error) {
	return rescueNode(ctx, r.store, fence, r.cfg.Metrics, r.log, node, r.cfg.BatchSize)
}

// rescueNode ends lost attempts: those whose lease expired and, when node
// is not empty, every attempt running on that node. Each batch is one
// fenced transaction. It returns how many it ended.
func rescueNode(ctx context.Context, st *store.Store, fence Fence, m RescueMetrics, log hclog.Logger, node string, batch int) (int, error) {
	reason := "lost: lease expired"
	if node != "" {
		reason = "lost: node " + node + " left the cluster"
	}
	total := 0
	for {
		var rescued []store.Rescued
		err := fence.Do(ctx, func(q pgx.Tx) error {
			var err error
			rescued, err = st.RescueJobs(ctx, q, node, batch, reason)
			return err
		})
		if err != nil {
			return total, err
		}
		for _, x := range rescued {
			m.CountRescued(x.Queue, x.Kind, x.NewState)
			log.Info("rescued lost attempt", "job_id", x.ID, "node", x.Node, "state", x.NewState)
		}
		total += len(rescued)
		if len(rescued) < batch {
			return total, nil
		}
	}
}
