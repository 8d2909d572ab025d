package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gafferhq/gaffer/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUnknownNode: no live node has that id.
var ErrUnknownNode = errors.New("unknown node")

// MaxDrainDeadline bounds a drain's deadline.
const MaxDrainDeadline = 24 * time.Hour

// Admin drains and lists nodes. It needs only PostgreSQL: a drain order
// is stored in the nodes table and announced by NOTIFY, and the node acts
// on it even while etcd is down.
type Admin struct {
	store *store.Store
}

// NewAdmin returns an Admin of the nodes recorded in pool's database.
func NewAdmin(pool *pgxpool.Pool) *Admin { return &Admin{store: store.New(pool)} }

// Drain asks node id to drain: it stops claiming within a second, lets
// its running jobs finish until deadline (from now, by the database
// clock), releases those still running, and leaves. Asking again moves
// the deadline. Errors: ErrUnknownNode for an unknown or dead node.
func (a *Admin) Drain(ctx context.Context, id string, deadline time.Duration) error {
	if deadline < 0 || deadline > MaxDrainDeadline {
		return fmt.Errorf("drain deadline must be between 0 and %s, got %s", MaxDrainDeadline, deadline)
	}
	err := a.store.RequestDrain(ctx, id, deadline)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w %q", ErrUnknownNode, id)
	}
	return err
}

// Undrain withdraws a drain order from a node that has not left yet: it
// claims again. Errors: ErrUnknownNode.
func (a *Admin) Undrain(ctx context.Context, id string) error {
	err := a.store.CancelDrain(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w %q", ErrUnknownNode, id)
	}
	return err
}

// NodeRecord is a node as the nodes table records it.
type NodeRecord struct {
	ID       string
	Hostname string
	Version  string
	// TZData is the IANA release of the zone rules in the node's binary;
	// "" for a binary too old to report it.
	TZData string
	Queues map[string]int
	// State is active, draining or dead; LeftReason says why a dead node
	// left (drained, stopped, or lost: it vanished). ShownState is what
	// people are shown.
	State            string
	InFlight         int
	StartedAt        time.Time
	LastSeen         time.Time
	DrainRequestedAt *time.Time
	DrainDeadline    *time.Time
	DrainedAt        *time.Time
	LeftAt           *time.Time
	LeftReason       string
	// SinceSeen is how long ago, by the database clock, the node reported.
	SinceSeen time.Duration
	// Kind is "node", or "remote" for a remote worker (one that works
	// jobs over HTTP; see remote.Workers). Tenant is a remote worker's
	// tenant ("*": it works every tenant's jobs) and Kinds the job kinds
	// it named (none: every kind in its queues).
	Kind   string
	Tenant string
	Kinds  []string
}

// Nodes lists every node the nodes table holds, dead ones included.
func (a *Admin) Nodes(ctx context.Context) ([]NodeRecord, error) {
	rows, err := a.store.ListNodes(ctx)
	out := make([]NodeRecord, len(rows))
	for i, r := range rows {
		out[i] = NodeRecord(r)
	}
	return out, err
}

// FenceState is the leader fence: the current epoch, who raised it and
// when (nil before any leader did).
type FenceState struct {
	Epoch    int64
	Leader   string
	RaisedAt *time.Time
}

// Fence reads the leader fence.
func (a *Admin) Fence(ctx context.Context) (FenceState, error) {
	f, err := a.store.ReadFence(ctx)
	return FenceState(f), err
}

// ShownState is a node's state as every view shows it (dashboard, CLI): a
// node that left on its own (drained or stopped) is "left", one that
// vanished is "dead"; otherwise its state.
func ShownState(state, leftReason string) string {
	if state == "dead" && leftReason != "" && leftReason != "lost" {
		return "left"
	}
	return state
}
