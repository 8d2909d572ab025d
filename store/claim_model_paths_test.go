package store_test

// The claim model test's only contact with the claim's Go API: the three
// claim paths (a node's claim of a queue, its side claim of named units,
// a remote worker's claim), each with the claimer's own state as the
// real claimer keeps it. When the claim's API changes, this file changes
// and the model (claim_model_*_test.go) does not.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// modelLeaseTTL outlives any run: no lease expires, so every attempt ends
// by the model's own hand.
const modelLeaseTTL = time.Hour

// claimGrace is the side claims' grace a node's claim of the queue passes
// (job.sideClaimGrace): fresh jobs of a unit its last claim did not serve
// are left to the side claim their insert asked for.
const claimGrace = 25 * time.Millisecond

// cursorReset is how long a claimer keeps its unit cursors
// (WorkerConfig.CursorReset and RemoteConfig.CursorReset, default 1 s).
const cursorReset = time.Second

// claimView is what one claim took, and what it could not see by design:
// the reference model judges the claim by it.
type claimView struct {
	rows []store.Job
	// cursors are the positions the claim scanned each listed unit past
	// (a job before its unit's cursor is hidden from this claim).
	cursors map[store.Unit]store.ClaimPosition
	// served and grace: while the queue has due jobs of a served unit, a
	// unit outside served whose due jobs all came due less than grace
	// ago may be left to a side claim.
	served []store.Unit
	grace  time.Duration
	// below is the unit the claim rotated below (nil: from the top).
	below *store.Unit
}

var leaseTokens atomic.Int64

// unitCursors is a claimer's record of where its claims of one queue
// stopped, as job/claim_cursor.go (producer.advanceCursors) and
// job/remote_claim.go (claimCursor) keep it.
type unitCursors struct {
	cursors map[store.Unit]store.ClaimPosition
	since   time.Time
	below   *store.Unit
}

// params returns the cursors and rotation for the next claim, dropping
// cursors kept longer than cursorReset.
func (c *unitCursors) params() ([]store.UnitCursor, *store.Unit, map[store.Unit]store.ClaimPosition) {
	if len(c.cursors) > 0 && time.Since(c.since) > cursorReset {
		clear(c.cursors)
	}
	out := make([]store.UnitCursor, 0, len(c.cursors))
	seen := make(map[store.Unit]store.ClaimPosition, len(c.cursors))
	for u, pos := range c.cursors {
		out = append(out, store.UnitCursor{Unit: u, ClaimPosition: pos})
		seen[u] = pos
	}
	return out, c.below, seen
}

// advance is advanceCursors: a short claim starts the next one over; a
// full one continues each unit past what it took, and one that took a
// job per unit rotates below the last unit it served.
func (c *unitCursors) advance(rows []store.Job, asked int) {
	c.below = nil
	if len(rows) < asked {
		clear(c.cursors)
		return
	}
	if len(c.cursors) == 0 {
		c.since = time.Now()
	}
	if c.cursors == nil {
		c.cursors = map[store.Unit]store.ClaimPosition{}
	}
	var lowest *store.Unit
	units := map[store.Unit]bool{}
	for _, r := range rows {
		u := store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}
		units[u] = true
		pos := store.ClaimPosition{Priority: r.Priority, RunAt: r.RunAt, ID: r.ID}
		if last, ok := c.cursors[u]; !ok || last.Less(pos) {
			c.cursors[u] = pos
		}
		if lowest == nil || u.Tenant < lowest.Tenant || (u.Tenant == lowest.Tenant && u.FairnessKey < lowest.FairnessKey) {
			lowest = &u
		}
	}
	if len(c.cursors) > 1000 {
		clear(c.cursors)
	}
	if len(units) == len(rows) {
		c.below = lowest
	}
}

// nodeClaimer is one node's producer for one queue: its cursors, and the
// units its last claim that took jobs served.
type nodeClaimer struct {
	node, queue string
	cur         unitCursors
	served      []store.Unit
}

// claimNode is the node's claim of its queue (producer.claim with no
// units), up to n jobs.
func claimNode(ctx context.Context, st *store.Store, nc *nodeClaimer, n int) (claimView, error) {
	cursors, below, seen := nc.cur.params()
	v := claimView{cursors: seen, served: append([]store.Unit(nil), nc.served...), grace: claimGrace, below: below}
	rows, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: nc.queue, Limit: n, Token: leaseTokens.Add(1), LeaseTTL: modelLeaseTTL,
		Node: nc.node, Cursors: cursors, Below: below, Served: v.served, Grace: claimGrace})
	if err != nil {
		return v, err
	}
	v.rows = rows
	nc.cur.advance(rows, n)
	if len(rows) > 0 {
		nc.served = nc.served[:0]
		seenUnit := map[store.Unit]bool{}
		for _, r := range rows {
			u := store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}
			if !seenUnit[u] {
				seenUnit[u] = true
				nc.served = append(nc.served, u)
			}
		}
	}
	return v, nil
}

// claimSide is a node's side claim of the named units of queue, up to n
// jobs, each unit from its start.
func claimSide(ctx context.Context, st *store.Store, node, queue string, units []store.Unit, n int) (claimView, error) {
	rows, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: queue, Limit: n, Token: leaseTokens.Add(1), LeaseTTL: modelLeaseTTL,
		Node: node, Units: units})
	return claimView{rows: rows}, err
}

// remoteClaimer is a registered remote worker: its tenant ("*" for
// all), the kinds it handles (none: all) and its cursors per queue.
type remoteClaimer struct {
	id, tenant string
	kinds      []string
	cur        map[string]*unitCursors
}

// newRemoteClaimer registers a remote worker for queues.
func newRemoteClaimer(ctx context.Context, st *store.Store, id, tenant string, queues, kinds []string) (*remoteClaimer, error) {
	err := st.RegisterRemoteWorker(ctx, store.RemoteWorkerParams{ID: id, Name: id, Version: "model", Tenant: tenant,
		Queues: queues, Kinds: kinds, MaxPerTenant: 100})
	return &remoteClaimer{id: id, tenant: tenant, kinds: kinds, cur: map[string]*unitCursors{}}, err
}

// claimRemote is the worker's claim of queue (RemoteWorkers.claimOnce
// for one queue), up to n jobs.
func claimRemote(ctx context.Context, st *store.Store, rc *remoteClaimer, queue string, n int) (claimView, error) {
	cur := rc.cur[queue]
	if cur == nil {
		cur = &unitCursors{}
		rc.cur[queue] = cur
	}
	cursors, below, seen := cur.params()
	rows, err := st.ClaimJobsRemote(ctx, store.RemoteClaimParams{
		ClaimParams: store.ClaimParams{Queue: queue, Limit: n, Token: leaseTokens.Add(1), LeaseTTL: modelLeaseTTL,
			Node: rc.id, Cursors: cursors, Below: below},
		Tenant: rc.tenant, Kinds: rc.kinds,
	})
	if err != nil {
		return claimView{cursors: seen, below: below}, err
	}
	cur.advance(rows, n)
	return claimView{rows: rows, cursors: seen, below: below}, nil
}
