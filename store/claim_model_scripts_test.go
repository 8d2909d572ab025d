package store_test

// Interleavings the random concurrent phases reach too rarely to count
// on: each generates its jobs and limits from the run's seed, forces one
// order of lock waits, and leaves the verdict to the model's checks
// (every claim is made and judged as in any other phase).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// scriptDeleteUnderClaim: a limit changes under a claim that waits for
// its bucket. A slow claim holds the buckets of a broad limit X; X is
// deleted (or re-keyed, or given a new rate: both delete its buckets),
// the change waiting on those rows; a claim of a queue under X and a
// binding limit Z (sorted after X) waits behind it; the slow claim ends.
// The claim must still keep Z.
func scriptDeleteUnderClaim(r *run) {
	rng := r.subSeed("delete-under-claim")
	q := "s2q"
	tn := r.tenants[rng.IntN(len(r.tenants))]
	x := limitCfg{name: "a-" + tn, tenant: tn, key: []string{"", "tenant", "kind"}[rng.IntN(3)], conc: 100}
	z := limitCfg{name: "b-" + q, queue: q, conc: 2 + rng.IntN(3)}
	r.applyLimit(x, false)
	r.applyLimit(z, false)
	n := 2*z.conc + 3
	r.enqueueScripted(rng, q, tn, "", n, func(int) string { return r.kinds[rng.IntN(3)] })
	nc := &nodeClaimer{node: "n-script", queue: q}
	r.primeBuckets(claimScope{path: "node n-script", queue: q}, func() (claimView, error) { return claimNode(r.ctx, r.st, nc, 1) })
	if r.broken() {
		return
	}

	slow := r.lockBuckets(x.name)
	if slow == nil {
		return
	}
	change := x
	del := false
	switch rng.IntN(3) {
	case 0:
		del = true
	case 1:
		change.key = map[string]string{"": "kind", "tenant": "", "kind": "tenant"}[x.key]
	default:
		change.rate, change.period, change.burst = 100, time.Second, 100
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.applyLimit(change, del) }()
	r.waitLockWaiters(1)
	claimed := make(chan struct{})
	go func() {
		defer wg.Done()
		defer close(claimed)
		r.claimChecked(claimScope{path: "node n-script", queue: q}, func() (claimView, error) { return claimNode(r.ctx, r.st, nc, n) })
	}()
	r.waitLockWaitersOr(2, claimed)
	if err := slow.Commit(r.ctx); err != nil {
		r.fail("slow claim: %v", err)
	}
	wg.Wait()
}

// scriptFence: a claim in flight across a limit's widening. Limit L
// (queue, kind k1, concurrency c) and limit M (same queue, kind k2,
// roomy) both have buckets with bounds. A slow claim holds L's bucket,
// so that L's widening to every kind waits on it, uncommitted; another
// holds M's, so that a claim A of c+2 k2 jobs, which does not see the
// widening, waits on it in flight. L's widening commits; a claim B of
// one k1 job counts L's bucket while A is in flight; A commits; a claim
// D of c-1 k1 jobs must count A's jobs. Tried a few times: another
// transaction's xid in between closes the window.
func scriptFence(r *run) {
	for attempt := range 3 {
		if r.broken() {
			return
		}
		rng := r.subSeed(fmt.Sprintf("fence-%d", attempt))
		q := fmt.Sprintf("s3q%d", attempt)
		tn := r.tenants[rng.IntN(len(r.tenants))]
		k1, k2 := r.kinds[0], r.kinds[1+rng.IntN(2)]
		c := 2 + rng.IntN(2)
		l := limitCfg{name: "fence-l-" + q, queue: q, kind: k1, key: []string{"", "tenant"}[rng.IntN(2)], conc: c}
		m := limitCfg{name: "fence-m-" + q, queue: q, kind: k2, conc: 100}
		r.applyLimit(l, false)
		r.applyLimit(m, false)
		ua, ub := store.Unit{Tenant: tn, FairnessKey: "a"}, store.Unit{Tenant: tn, FairnessKey: "b"}
		r.enqueueScripted(rng, q, tn, ua.FairnessKey, c+3, func(int) string { return k2 })
		r.enqueueScripted(rng, q, tn, ub.FairnessKey, 2*c+3, func(int) string { return k1 })
		side := func(u store.Unit, n int) (claimScope, func() (claimView, error)) {
			return claimScope{path: "side claim of n-script", queue: q, units: unitSet([]store.Unit{u})},
				func() (claimView, error) { return claimSide(r.ctx, r.st, "n-script", q, []store.Unit{u}, n) }
		}
		r.primeBuckets(side(ua, 1))
		r.primeBuckets(side(ub, 1))
		if r.broken() {
			return
		}

		s1 := r.lockBuckets(l.name)
		if s1 == nil {
			return
		}
		widened := l
		widened.kind = ""
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); r.applyLimit(widened, false) }()
		r.waitLockWaiters(1)
		s2 := r.lockBuckets(m.name)
		if s2 == nil {
			s1.Rollback(r.ctx)
			return
		}
		var inFlight sync.WaitGroup
		inFlight.Add(1)
		claimed := make(chan struct{})
		go func() { defer inFlight.Done(); defer close(claimed); r.claimChecked(side(ua, c+2)) }()
		r.waitLockWaitersOr(2, claimed)
		if err := s1.Commit(r.ctx); err != nil {
			r.fail("slow claim: %v", err)
		}
		wg.Wait()
		r.claimChecked(side(ub, 1))
		if err := s2.Commit(r.ctx); err != nil {
			r.fail("slow claim: %v", err)
		}
		inFlight.Wait()
		r.claimChecked(side(ub, c-1))
		r.settle()
	}
}

// scriptNewBucketOfDeletedLimit: a limit is deleted while a claim makes
// its first bucket for a key. Limit X (keyed by kind) has a bucket for
// kind k1, which a slow claim holds, so that X's delete waits on it with
// X's row locked; a side claim of a k2 job lists X's bucket for k2 and
// inserts it, its foreign key check waiting on X's row; the slow claim
// ends, the delete commits. The claim must not fail.
func scriptNewBucketOfDeletedLimit(r *run) {
	rng := r.subSeed("new-bucket-of-deleted-limit")
	q := "s6q"
	tn := r.tenants[rng.IntN(len(r.tenants))]
	k1, k2 := r.kinds[0], r.kinds[1+rng.IntN(2)]
	x := limitCfg{name: "x-" + q, queue: q, key: "kind", conc: 100}
	r.applyLimit(x, false)
	ua, ub := store.Unit{Tenant: tn, FairnessKey: "a"}, store.Unit{Tenant: tn, FairnessKey: "b"}
	r.enqueueScripted(rng, q, tn, ua.FairnessKey, 2, func(int) string { return k1 })
	r.enqueueScripted(rng, q, tn, ub.FairnessKey, 2, func(int) string { return k2 })
	side := func(u store.Unit, n int) (claimScope, func() (claimView, error)) {
		return claimScope{path: "side claim of n-script", queue: q, units: unitSet([]store.Unit{u})},
			func() (claimView, error) { return claimSide(r.ctx, r.st, "n-script", q, []store.Unit{u}, n) }
	}
	r.primeBuckets(side(ua, 1))
	if r.broken() {
		return
	}
	slow := r.lockBuckets(x.name)
	if slow == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.applyLimit(x, true) }()
	r.waitLockWaiters(1)
	claimed := make(chan struct{})
	go func() { defer wg.Done(); defer close(claimed); r.claimChecked(side(ub, 1)) }()
	r.waitLockWaitersOr(2, claimed)
	if err := slow.Commit(r.ctx); err != nil {
		r.fail("slow claim: %v", err)
	}
	wg.Wait()
}

// scriptKindsStarve: hole 1 for a remote worker. Tenant zzz (the units
// claims find first) has jobs of a kind the worker does not handle in
// more units than the worker asks for jobs; another tenant has one it
// handles. The worker's claims, judged alone, must take that one.
func scriptKindsStarve(r *run) {
	rng := r.subSeed("kinds-starve")
	q := "s7q"
	handled, other := r.kinds[0], r.kinds[2]
	w, err := newRemoteClaimer(r.ctx, r.st, "w-kinds", store.AllTenants, []string{q}, []string{handled})
	if err != nil {
		r.fail("register remote worker: %v", err)
		return
	}
	n := 1 + rng.IntN(2)
	for u := range n + 1 + rng.IntN(3) {
		r.enqueueScripted(rng, q, "zzz", fmt.Sprintf("z%02d", u), 1, func(int) string { return other })
	}
	tn := r.tenants[rng.IntN(len(r.tenants)-1)]
	r.enqueueScripted(rng, q, tn, "", 1, func(int) string { return handled })
	sc := claimScope{path: "remote w-kinds", queue: q, kinds: kindSet(w.kinds)}
	for range 3 {
		r.quiescentClaim(sc, n, func() (claimView, error) { return claimRemote(r.ctx, r.st, w, q, n) })
		r.settle()
	}
}

// scriptLimitHeld: hole 1 behind a saturated limit. A limit holds tenant
// zzz to one running job, which runs; zzz has due jobs in more units than
// a node asks for; another tenant has one due job no limit holds back.
// The node's claims, judged alone, must take that one.
func scriptLimitHeld(r *run) {
	rng := r.subSeed("limit-held")
	q := "s8q"
	r.applyLimit(limitCfg{name: "held-" + q, queue: q, tenant: "zzz", conc: 1}, false)
	n := 1 + rng.IntN(2)
	units := n + 1 + rng.IntN(3)
	for u := range units {
		r.enqueueScripted(rng, q, "zzz", fmt.Sprintf("z%02d", u), 2, func(int) string { return r.kinds[rng.IntN(3)] })
	}
	// zzz's one slot taken.
	first := store.Unit{Tenant: "zzz", FairnessKey: "z00"}
	r.quiescentClaim(claimScope{path: "side claim of n-script", queue: q, units: unitSet([]store.Unit{first})}, 1,
		func() (claimView, error) { return claimSide(r.ctx, r.st, "n-script", q, []store.Unit{first}, 1) })
	r.settle()
	tn := r.tenants[rng.IntN(len(r.tenants)-1)]
	r.enqueueScripted(rng, q, tn, "", 1, func(int) string { return r.kinds[rng.IntN(3)] })
	// Past the side claims' grace, which would leave it to a side claim
	// for 25 ms.
	if _, err := r.pool.Exec(r.ctx, `UPDATE gaffer.jobs SET run_at = now() - interval '1 second' WHERE queue = $1 AND tenant = $2`, q, tn); err != nil {
		r.fail("age the job: %v", err)
	}
	r.settle()
	nc := &nodeClaimer{node: "n-script", queue: q}
	sc := claimScope{path: "node n-script", queue: q}
	for range 3 {
		r.quiescentClaim(sc, n, func() (claimView, error) { return claimNode(r.ctx, r.st, nc, n) })
		r.settle()
	}
}

// enqueueScripted enqueues n due jobs of one unit for a script.
func (r *run) enqueueScripted(rng *rand.Rand, q, tn, fkey string, n int, kind func(int) string) {
	reqs := make([]job.Request, n)
	jobs := make([]*mJob, n)
	for i := range n {
		j := &mJob{tenant: tn, fkey: fkey, kind: kind(i), queue: q, maxAttempts: maxAttempts,
			args: map[string]any{"acct": fmt.Sprintf("a%d", rng.IntN(4))}}
		reqs[i], jobs[i] = r.request(j), j
		reqs[i].Delay, reqs[i].RunAt = 0, time.Time{}
	}
	ids, err := r.client.EnqueueMany(r.ctx, reqs)
	if err != nil {
		r.fail("enqueue: %v", err)
		return
	}
	for i, id := range ids {
		jobs[i].id = id
		r.m.addJob(jobs[i])
	}
	r.settle()
}

// primeBuckets makes a claim (of one job) so that the limits over it
// have buckets, with bounds, and completes what it took.
func (r *run) primeBuckets(sc claimScope, claim func() (claimView, error)) {
	v := r.claimChecked(sc, claim)
	if len(v.rows) == 0 {
		r.fail("script: %s claimed nothing to prime the buckets with", sc)
		return
	}
	leases := make([]store.Lease, len(v.rows))
	for i, row := range v.rows {
		leases[i] = store.Lease{ID: row.ID, Attempt: row.Attempt, Token: row.LeaseToken}
	}
	if _, err := r.st.CompleteJobs(r.ctx, nil, completions(leases)); err != nil {
		r.fail("complete: %v", err)
	}
	r.m.mu.Lock()
	for _, row := range v.rows {
		r.m.jobs[row.ID].state = completed
	}
	r.m.mu.Unlock()
	r.settle()
}

// lockBuckets begins a slow claim holding every bucket row of limit name.
func (r *run) lockBuckets(name string) pgx.Tx {
	tx, err := r.pool.Begin(r.ctx)
	if err != nil {
		r.fail("slow claim: %v", err)
		return nil
	}
	var n int
	// As a claim does, it holds the limits lock while it holds buckets; a
	// claim that starts while a limit's change waits takes nothing, and
	// holds nothing: the script goes on with an idle transaction.
	var held bool
	if err := tx.QueryRow(r.ctx, `SELECT gaffer.limits_hold()`).Scan(&held); err != nil {
		tx.Rollback(r.ctx)
		r.fail("slow claim: %v", err)
		return nil
	}
	if !held {
		return tx
	}
	if err := tx.QueryRow(r.ctx, `SELECT count(*) FROM (SELECT 1 FROM gaffer.limit_buckets WHERE limit_name = $1 ORDER BY key FOR UPDATE) b`, name).Scan(&n); err != nil || n == 0 {
		tx.Rollback(r.ctx)
		r.fail("slow claim: limit %s has %d buckets to hold: %v", name, n, err)
		return nil
	}
	return tx
}

// waitLockWaiters waits until n sessions of the run's database wait on a
// lock (the orders the scripts force), polling PostgreSQL.
func (r *run) waitLockWaiters(n int) { r.waitLockWaitersOr(n, nil) }

// waitLockWaitersOr is waitLockWaiters that also returns when done is
// closed: a claim the script meant to wait behind a limit's change may
// instead return at once (a claim made while a limit changes takes
// nothing and says it was busy), which is an order of its own.
func (r *run) waitLockWaitersOr(n int, done <-chan struct{}) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	for {
		var got int
		err := r.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got)
		if err == nil && got >= n {
			return
		}
		select {
		case <-done:
			return
		default:
		}
		if ctx.Err() != nil {
			r.fail("script: %d sessions wait on a lock, want %d: %v", got, n, err)
			return
		}
		time.Sleep(time.Millisecond)
	}
}
