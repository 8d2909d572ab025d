package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// LabelRefresherConfig configures a LabelRefresher.
type LabelRefresherConfig struct {
	Pool     *pgxpool.Pool // required
	Metrics  LabelSetter   // required: the metrics whose labels it bounds
	Registry KindLister    // required: this node's kinds
	// Queues are the queues this node works.
	Queues []string
	Logger hclog.Logger
	// Interval between refreshes from the nodes table. Default 30s.
	Interval time.Duration
}

// LabelSetter is told which label values metrics may carry: *job.Metrics.
type LabelSetter interface {
	// SetKnown sets the kinds and queues that may be label values.
	SetKnown(kinds, queues []string)
}

// KindLister lists the kinds this node handles: *job.Registry.
type KindLister interface {
	Kinds() []string
}

// LabelRefresher keeps the metrics' label values bounded: it tells
// job.Metrics.SetKnown the kinds and queues this node handles, those the
// other live nodes reported, and a few the live remote workers registered
// (job.RemoteLabelBound), so that a kind or queue a tenant made up is
// counted under job.OtherLabel instead of becoming a series of its own.
type LabelRefresher struct {
	cfg    LabelRefresherConfig
	store  *store.Store
	log    hclog.Logger
	runner service.Runner
	clock  clock.Clock
}

// NewLabelRefresher validates cfg and returns a stopped refresher.
func NewLabelRefresher(cfg LabelRefresherConfig) (*LabelRefresher, error) {
	if cfg.Pool == nil || cfg.Metrics == nil || cfg.Registry == nil {
		return nil, errors.New("LabelRefresherConfig.Pool, .Metrics and .Registry are required")
	}
	if cfg.Interval < 0 {
		return nil, errors.New("LabelRefresherConfig.Interval must not be negative")
	}
	if cfg.Interval == 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &LabelRefresher{cfg: cfg, store: store.New(cfg.Pool), log: cfg.Logger.Named("metric_labels"), clock: clock.Real}, nil
}

// Start sets the local labels at once, then refreshes in the background;
// non-blocking and idempotent.
func (r *LabelRefresher) Start(ctx context.Context) error {
	r.cfg.Metrics.SetKnown(r.cfg.Registry.Kinds(), r.cfg.Queues)
	r.runner.StartEvery(ctx, r.clock, r.cfg.Interval, r.RunOnce, r.log, "refresh metric labels")
	return nil
}

// Stop ends the loop and waits for it.
func (r *LabelRefresher) Stop() { r.runner.Stop() }

// RunOnce reads the other nodes' kinds and queues and sets the labels.
// On error the labels stay as they were.
func (r *LabelRefresher) RunOnce(ctx context.Context) error {
	kinds, queues, err := r.store.KnownLabels(ctx, job.RemoteLabelBound)
	if err != nil {
		return err
	}
	r.cfg.Metrics.SetKnown(append(kinds, r.cfg.Registry.Kinds()...), append(queues, r.cfg.Queues...))
	return nil
}
