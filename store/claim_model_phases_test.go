package store_test

// The claim model's concurrent phases (claimers side by side with limit
// changes and slow claims holding bucket locks) and the drain that ends
// every run.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/store"
)

// concurrentPhase runs claimers side by side (each node with its side
// claims, the remote workers) for perClaimer claims each, while other
// goroutines end attempts, change limits and hold limit buckets' row
// locks a few milliseconds at a time (a slow claim), and checks the
// limits after every claim commits.
func (r *run) concurrentPhase(perClaimer int) {
	r.at("concurrent")
	ctx, stop := context.WithCancel(r.ctx)
	defer stop()
	ticks := []chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)}
	tick := func() {
		for _, c := range ticks {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
	locked := make(chan string, 1)
	var claimers, others sync.WaitGroup
	for i := range len(r.nodes) + 1 {
		rng := rand.New(rand.NewPCG(r.seed+uint64(r.step), uint64(i)))
		claimers.Add(1)
		go func() {
			defer claimers.Done()
			for range perClaimer {
				if r.broken() {
					return
				}
				r.concurrentClaim(rng, i)
				tick()
			}
		}()
	}
	r.step += perClaimer * (len(r.nodes) + 1)
	others.Add(4)
	go func() { // turns the ready ring under the claims
		defer others.Done()
		rng := rand.New(rand.NewPCG(r.seed+uint64(r.step), 13))
		for waitTick(ctx, ticks[3]) {
			r.turnRing(rng)
		}
	}()
	go func() { // ends attempts, so that slots free
		defer others.Done()
		rng := rand.New(rand.NewPCG(r.seed+uint64(r.step), 10))
		for waitTick(ctx, ticks[0]) {
			r.endSome(rng, 1+rng.IntN(3))
		}
	}()
	go func() { // changes limits, often the one whose buckets are locked
		defer others.Done()
		rng := rand.New(rand.NewPCG(r.seed+uint64(r.step), 11))
		for r.prof.limits && waitTick(ctx, ticks[1]) {
			select {
			case name := <-locked:
				if rng.IntN(2) == 0 {
					r.changeNamed(rng, name)
					continue
				}
			default:
			}
			if rng.IntN(3) == 0 {
				r.changeLimit(rng)
			}
		}
	}()
	go func() { // a slow claim: holds a limit's bucket rows a few ms
		defer others.Done()
		rng := rand.New(rand.NewPCG(r.seed+uint64(r.step), 12))
		for waitTick(ctx, ticks[2]) {
			r.holdBuckets(ctx, rng, locked)
		}
	}()
	claimers.Wait()
	stop()
	others.Wait()
	r.at("quiescent")
	r.m.checkRates()
}

func waitTick(ctx context.Context, c chan struct{}) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c:
		return true
	}
}

// concurrentClaim is one claim of claimer i (node i, or the remote
// workers after the nodes), checked against the limits once committed.
func (r *run) concurrentClaim(rng *rand.Rand, i int) {
	q := r.queues[rng.IntN(len(r.queues))]
	var sc claimScope
	var claim func() (claimView, error)
	switch {
	case i < len(r.nodes) && rng.IntN(4) > 0:
		nc := r.nodes[i][slices.Index(r.queues, q)]
		n := 1 + rng.IntN(10)
		sc = claimScope{path: "node " + nc.node, queue: q}
		claim = func() (claimView, error) { return claimNode(r.ctx, r.st, nc, n) }
	case i < len(r.nodes):
		units := r.someUnits(rng, q, 1+rng.IntN(3))
		if len(units) == 0 {
			return
		}
		node := r.nodes[i][0].node
		n := len(units) * (1 + rng.IntN(3))
		sc = claimScope{path: "side claim of " + node, queue: q, units: unitSet(units)}
		claim = func() (claimView, error) { return claimSide(r.ctx, r.st, node, q, units, n) }
	case len(r.remotes) > 0:
		rc := r.remotes[rng.IntN(len(r.remotes))]
		n := 1 + rng.IntN(3)
		sc = claimScope{path: "remote " + rc.id, queue: q, tenant: rc.tenant, kinds: kindSet(rc.kinds)}
		claim = func() (claimView, error) { return claimRemote(r.ctx, r.st, rc, q, n) }
	default:
		return
	}
	r.claimChecked(sc, claim)
}

// claimChecked makes a claim while others may run, records it and
// checks the limits against the running attempts once it committed.
func (r *run) claimChecked(sc claimScope, claim func() (claimView, error)) claimView {
	f := r.m.beginFlight()
	v, err := claim()
	if err != nil {
		r.m.endFlight(f, nil, r.clock())
		r.fail("%s failed: a claim must not fail (G12, G13): %v", sc, err)
		return v
	}
	s, err := readSnap(r.ctx, r.pool, snapRunning)
	if err != nil {
		r.fail("read running jobs: %v", err)
		return v
	}
	r.m.endFlight(f, v.rows, s.t2)
	r.m.recordClaim(sc, v.rows)
	r.m.checkLimits(s, fmt.Sprintf("after a claim by %s committed", sc))
	return v
}

// changeNamed changes or deletes the limit name (whose buckets a slow
// claim holds): a delete, a new key or rate deletes its buckets.
func (r *run) changeNamed(rng *rand.Rand, name string) {
	r.m.mu.Lock()
	var cur *limitCfg
	if l := r.m.limits[name]; l != nil {
		cur = l.last()
	}
	r.m.mu.Unlock()
	if cur == nil {
		return
	}
	next := *cur
	switch rng.IntN(3) {
	case 0:
		r.applyLimit(next, true)
		return
	case 1:
		next.key = limitKeys[rng.IntN(len(limitKeys))]
	default:
		next.conc = 1 + rng.IntN(6)
	}
	r.applyLimit(next, false)
}

// holdBuckets is a slow claim: it locks the bucket rows of one limit, as
// limit_admit does, says which, and holds them a few milliseconds of
// PostgreSQL's time.
func (r *run) holdBuckets(ctx context.Context, rng *rand.Rand, locked chan<- string) {
	var names []string
	rows, err := r.pool.Query(ctx, `SELECT DISTINCT limit_name FROM gaffer.limit_buckets ORDER BY 1`)
	if err == nil {
		names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(names) == 0 {
		return
	}
	name := names[rng.IntN(len(names))]
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// As a claim does, it holds the limits lock while it holds buckets.
	// (A claim that starts while a limit's change waits takes nothing.)
	var held bool
	if err := tx.QueryRow(ctx, `SELECT gaffer.limits_hold()`).Scan(&held); err != nil || !held {
		return
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM gaffer.limit_buckets WHERE limit_name = $1 ORDER BY key FOR UPDATE`, name); err != nil {
		return
	}
	select {
	case locked <- name:
	default:
	}
	time.Sleep(time.Duration(2+rng.IntN(8)) * time.Millisecond)
	tx.Commit(ctx)
}

// drain deletes every limit, makes every job due, and claims and
// completes until nothing is left: every job must end completed, failed
// or cancelled, with the attempts the model counted (G3).
func (r *run) drain() {
	for _, l := range r.m.currentLimits() {
		r.applyLimit(l, true)
	}
	if _, err := r.pool.Exec(r.ctx, `UPDATE gaffer.jobs SET run_at = now() - interval '1 second' WHERE state IN ('pending', 'retrying')`); err != nil {
		r.fail("drain: %v", err)
	}
	r.settle()
	var drainers []*nodeClaimer
	r.m.mu.Lock()
	queues := map[string]bool{}
	for _, j := range r.m.jobs {
		if !queues[j.queue] {
			queues[j.queue] = true
			drainers = append(drainers, &nodeClaimer{node: "n-drain", queue: j.queue})
		}
	}
	r.m.mu.Unlock()
	slices.SortFunc(drainers, func(a, b *nodeClaimer) int { return strings.Compare(a.queue, b.queue) })
	for round := 0; !r.broken(); round++ {
		left := 0
		r.m.mu.Lock()
		for _, j := range r.m.jobs {
			if j.state == waiting || j.state == running {
				left++
			}
		}
		r.m.mu.Unlock()
		if left == 0 {
			break
		}
		if round > 200 {
			r.fail("drain: %d jobs still unfinished after %d rounds", left, round)
			return
		}
		for _, nc := range drainers {
			r.step++
			sc := claimScope{path: "node " + nc.node, queue: nc.queue}
			r.quiescentClaim(sc, 50, func() (claimView, error) { return claimNode(r.ctx, r.st, nc, 50) })
		}
		r.m.mu.Lock()
		var leases []store.Lease
		var done []*mJob
		for _, j := range r.m.jobs {
			if j.state == running {
				leases = append(leases, store.Lease{ID: j.id, Attempt: j.attempt, Token: j.token})
				done = append(done, j)
			}
		}
		r.m.mu.Unlock()
		if len(leases) > 0 {
			ids, err := r.st.CompleteJobs(r.ctx, nil, completions(leases))
			if err != nil || len(ids) != len(leases) {
				r.fail("drain: completed %d of %d live attempts: %v", len(ids), len(leases), err)
				return
			}
			r.m.mu.Lock()
			for _, j := range done {
				j.state = completed
			}
			r.m.mu.Unlock()
		}
		r.settle()
	}
	// Every row, finished ones too: states and attempt numbers.
	s, err := readSnap(r.ctx, r.pool, snapAll)
	if err != nil {
		r.fail("read jobs: %v", err)
		return
	}
	r.m.reconcile(s)
	r.m.checkRates()
}
