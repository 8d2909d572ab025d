package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gafferhq/gaffer/internal/store"
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

// NewAdmin returns an Admin on st.
func NewAdmin(st *store.Store) *Admin { return &Admin{store: st} }

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

// Nodes lists every node the nodes table holds, dead ones included.
func (a *Admin) Nodes(ctx context.Context) ([]store.NodeRow, error) { return a.store.ListNodes(ctx) }

// Fence reads the leader fence: the current epoch and who raised it.
func (a *Admin) Fence(ctx context.Context) (store.Fence, error) { return a.store.ReadFence(ctx) }
