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
// (WorkerConfig.CursorReset and remote.Config.CursorReset, default 1 s).
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
	// busy: the claim took nothing because a limit was being changed
	// (by design: it is no claim round).
	busy bool
}

var leaseTokens atomic.Int64

// prepared is what a claimer's store.ClaimCursor sent with a claim: the
// cursors, as the model reads them, and the unit it started below.
func prepared(p store.ClaimParams) (map[store.Unit]store.ClaimPosition, *store.Unit) {
	seen := make(map[store.Unit]store.ClaimPosition, len(p.Cursors))
	for _, c := range p.Cursors {
		seen[c.Unit] = c.ClaimPosition
	}
	return seen, p.After
}

// nodeClaimer is one node's producer for one queue: its cursor, and the
// units its last claim that took jobs served.
type nodeClaimer struct {
	node, queue string
	cur         store.ClaimCursor
	served      []store.Unit
}

// claimNode is the node's claim of its queue (producer.claim with no
// units), up to n jobs.
func claimNode(ctx context.Context, st *store.Store, nc *nodeClaimer, n int) (claimView, error) {
	p := store.ClaimParams{Queue: nc.queue, Limit: n, Token: leaseTokens.Add(1), LeaseTTL: modelLeaseTTL,
		Node: nc.node, Served: append([]store.Unit(nil), nc.served...), Grace: claimGrace}
	nc.cur.Prepare(&p, time.Now(), cursorReset)
	v := claimView{served: p.Served, grace: claimGrace}
	v.cursors, v.below = prepared(p)
	got, err := st.Claim(ctx, p)
	if err != nil {
		return v, err
	}
	v.rows, v.busy = got.Jobs, got.Busy
	nc.cur.Advance(got, n, time.Now())
	if len(got.Jobs) > 0 {
		nc.served = nc.served[:0]
		seenUnit := map[store.Unit]bool{}
		for _, r := range got.Jobs {
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
	got, err := st.Claim(ctx, store.ClaimParams{Queue: queue, Limit: n, Token: leaseTokens.Add(1), LeaseTTL: modelLeaseTTL,
		Node: node, Units: units})
	return claimView{rows: got.Jobs, busy: got.Busy}, err
}

// remoteClaimer is a registered remote worker: its tenant ("*" for
// all), the kinds it handles (none: all) and its cursor per queue.
type remoteClaimer struct {
	id, tenant string
	kinds      []string
	cur        map[string]*store.ClaimCursor
}

// newRemoteClaimer registers a remote worker for queues.
func newRemoteClaimer(ctx context.Context, st *store.Store, id, tenant string, queues, kinds []string) (*remoteClaimer, error) {
	err := st.RegisterRemoteWorker(ctx, store.RemoteWorkerParams{ID: id, Name: id, Version: "model", Tenant: tenant,
		Queues: queues, Kinds: kinds, MaxPerTenant: 100})
	return &remoteClaimer{id: id, tenant: tenant, kinds: kinds, cur: map[string]*store.ClaimCursor{}}, err
}

// claimRemote is the worker's claim of queue (remote.Workers.claimOnce
// for one queue), up to n jobs.
func claimRemote(ctx context.Context, st *store.Store, rc *remoteClaimer, queue string, n int) (claimView, error) {
	cur := rc.cur[queue]
	if cur == nil {
		cur = &store.ClaimCursor{}
		rc.cur[queue] = cur
	}
	p := store.ClaimParams{Queue: queue, Limit: n, Token: leaseTokens.Add(1), LeaseTTL: modelLeaseTTL,
		Node: rc.id, Remote: true, Tenant: rc.tenant, Kinds: rc.kinds}
	cur.Prepare(&p, time.Now(), cursorReset)
	var v claimView
	v.cursors, v.below = prepared(p)
	got, err := st.Claim(ctx, p)
	if err != nil {
		return v, err
	}
	cur.Advance(got, n, time.Now())
	v.rows, v.busy = got.Jobs, got.Busy
	return v, nil
}
