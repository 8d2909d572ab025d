package store_test

// The claim model's generated workload: jobs (due now, soon, in an hour;
// hostile ones), the ends of attempts, time moved for the jobs, limits
// and weights changed, all through the public API.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// hostChars are what noise draws from: lower case, so that the key a
// limit lowers stays as long.
var hostChars = "abcdefghijklmnopqrstuvwxyz0123456789"

// noise is n random letters and digits: a key PostgreSQL cannot compress
// into an index entry.
func noise(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = hostChars[rng.IntN(len(hostChars))]
	}
	return string(b)
}

// enqueue inserts a generated batch through the public client, which
// validates it as the API does.
func (r *run) enqueue() {
	n := 1 + r.rng.IntN(8)
	reqs := make([]job.Request, 0, n+1)
	jobs := make([]*mJob, 0, n+1)
	for range n {
		req, j := r.genJob()
		reqs, jobs = append(reqs, req), append(jobs, j)
	}
	if r.rng.Float64() < r.prof.hostile {
		req, j := r.genHostile()
		reqs, jobs = append(reqs, req), append(jobs, j)
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
}

func (r *run) genJob() (job.Request, *mJob) {
	tn := r.tenants[r.rng.IntN(len(r.tenants))]
	j := &mJob{tenant: tn, fkey: r.keys[tn][r.rng.IntN(len(r.keys[tn]))], kind: r.kinds[r.rng.IntN(len(r.kinds))],
		queue: r.queues[r.rng.IntN(len(r.queues))], priority: r.rng.IntN(10), maxAttempts: 1 + r.rng.IntN(maxAttempts)}
	j.args = map[string]any{"acct": fmt.Sprintf("a%d", r.rng.IntN(4))}
	if r.rng.IntN(2) == 0 {
		j.args["dest"] = map[string]any{"region": fmt.Sprintf("r%d", r.rng.IntN(3))}
	}
	if j.kind == "http" {
		// Never called: the model only claims. Hosts differ in case.
		j.args["url"] = []string{"http://127.0.0.1:1/a", "http://H1.test/b", "http://h1.TEST:8080/c", "https://u:p@h2.test/d"}[r.rng.IntN(4)]
	}
	if r.rng.IntN(3) == 0 {
		j.limitKey = fmt.Sprintf("lk%d", r.rng.IntN(3))
	}
	return r.request(j), j
}

// genHostile is a job built to poison a limit key: 8 KB under
// args.blob, or an http URL whose userinfo holds an '@' and 8 KB (Go's
// host is the part after the last '@': 127.0.0.1, never called).
func (r *run) genHostile() (job.Request, *mJob) {
	tn := r.tenants[r.rng.IntN(len(r.tenants))]
	j := &mJob{tenant: tn, fkey: r.keys[tn][0], queue: r.queues[r.rng.IntN(len(r.queues))], maxAttempts: 1}
	if r.rng.IntN(2) == 0 {
		j.kind, j.label = "http", "hostile url"
		j.args = map[string]any{"url": "http://x@" + noise(r.rng, 8000) + "@127.0.0.1/"}
	} else {
		j.kind, j.label = r.kinds[r.rng.IntN(3)], "hostile blob"
		j.args = map[string]any{"acct": "a0", "blob": noise(r.rng, 8000)}
		if !r.hasLimitKeyed("args.blob") {
			// Roomy: it only has to read the key.
			r.applyLimit(limitCfg{name: "lz-blob", key: "args.blob", conc: 100}, false)
		}
	}
	return r.request(j), j
}

func (r *run) hasLimitKeyed(key string) bool {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	for _, l := range r.m.currentLimits() {
		if l.key == key {
			return true
		}
	}
	return false
}

// request is j as an enqueue, with a due time: now (or an earlier
// instant, which the insert takes as now), a few hundred milliseconds
// on, or an hour on.
func (r *run) request(j *mJob) job.Request {
	args, _ := json.Marshal(j.args)
	req := job.Request{Kind: j.kind, Args: json.RawMessage(args), Tenant: j.tenant, Queue: j.queue, Priority: j.priority,
		MaxAttempts: j.maxAttempts, FairnessKey: j.fkey, LimitKey: j.limitKey}
	switch x := r.rng.Float64(); {
	case r.prof.dueOnly:
	case x < r.prof.future:
		req.Delay = time.Hour
	case x < r.prof.future+0.05:
		req.Delay = time.Duration(50+r.rng.IntN(300)) * time.Millisecond
	case x < r.prof.future+0.15:
		req.RunAt = time.Now().Add(-time.Minute)
	}
	return req
}

// someUnits picks up to k units of queue with waiting jobs, for a side
// claim.
func (r *run) someUnits(rng *rand.Rand, queue string, k int) []store.Unit {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	seen := map[store.Unit]bool{}
	var all []store.Unit
	for _, id := range r.m.ids {
		j := r.m.jobs[id]
		if j.state == waiting && j.queue == queue && !seen[j.unit()] {
			seen[j.unit()] = true
			all = append(all, j.unit())
		}
	}
	rng.Shuffle(len(all), func(i, k int) { all[i], all[k] = all[k], all[i] })
	return all[:min(k, len(all))]
}

// endSome ends up to k running attempts: completed, failed (retrying at
// once, soon, or — with future jobs in the profile — in an hour; failed
// for good on the last attempt), snoozed, or released.
func (r *run) endSome(rng *rand.Rand, k int) {
	r.m.mu.Lock()
	var picked []*mJob
	for _, id := range r.m.ids {
		if j := r.m.jobs[id]; j.state == running {
			picked = append(picked, j)
		}
	}
	rng.Shuffle(len(picked), func(i, k int) { picked[i], picked[k] = picked[k], picked[i] })
	picked = picked[:min(k, len(picked))]
	ends := make([]attemptEnd, len(picked))
	for i, j := range picked {
		j.state = ending
		ends[i] = attemptEnd{j: j, lease: store.Lease{ID: j.id, Attempt: j.attempt, Token: j.token}, last: j.attempt >= j.maxAttempts}
	}
	r.m.mu.Unlock()
	for _, e := range ends {
		r.endOne(rng, e)
	}
}

// attemptEnd is a live attempt to end, as the model knew it.
type attemptEnd struct {
	j     *mJob
	lease store.Lease
	last  bool // its last attempt: a failure fails the job
}

func (r *run) endOne(rng *rand.Rand, e attemptEnd) {
	later := []time.Duration{0, 20 * time.Millisecond}
	switch {
	case r.prof.dueOnly:
		later = later[:1]
	case r.prof.future > 0:
		later = append(later, time.Hour)
	}
	var next jobState
	var err error
	giveBack := false
	switch x := rng.IntN(100); {
	case x < 55:
		var ids []int64
		ids, err = r.st.CompleteJobs(r.ctx, nil, []store.Completion{{Lease: e.lease}})
		next = completed
		if err == nil && len(ids) != 1 {
			err = errors.New("the completion of a live attempt was refused as stale")
		}
	case x < 75:
		want := "retrying"
		next = waiting
		if e.last {
			want, next = "failed", failed
		}
		var state string
		state, err = r.st.FailJob(r.ctx, store.Failure{Lease: e.lease, RetryDelay: later[rng.IntN(len(later))], Message: "model failure", Kind: "error"})
		if err == nil && state != want {
			err = fmt.Errorf("the failure left the job %s, want %s", state, want)
		}
	case x < 88:
		var state string
		state, err = r.st.SnoozeJob(r.ctx, e.lease, later[rng.IntN(len(later))])
		next, giveBack = waiting, true
		if err == nil && state != "pending" {
			err = fmt.Errorf("the snooze left the job %s", state)
		}
	default:
		var ids []int64
		ids, err = r.st.ReleaseJobs(r.ctx, []store.Lease{e.lease}, "model release")
		next, giveBack = waiting, true
		if err == nil && len(ids) != 1 {
			err = errors.New("the release of a live attempt was refused as stale")
		}
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if err != nil {
		r.m.failf("end of %s: %v", e.j, err)
		return
	}
	if giveBack {
		e.j.maxAttempts++ // a snooze or a release does not use the attempt up
	}
	// A claim may have taken the job again already.
	if e.j.state == ending && e.j.attempt == e.lease.Attempt {
		e.j.state = next
	}
}

// warp moves time for some jobs the way PostgreSQL's clock would: jobs
// due in the future become due (a second ago), and some fresh ones age
// past the side claims' grace. Their positions in claim order move too.
func (r *run) warp() {
	r.m.mu.Lock()
	var due, aged []int64
	for _, id := range r.m.ids {
		j := r.m.jobs[id]
		if j.state != waiting {
			continue
		}
		if j.runAt.After(r.last.t1) && r.rng.IntN(3) == 0 {
			due = append(due, id)
		} else if j.runAt.After(r.last.t1.Add(-time.Second)) && r.rng.IntN(2) == 0 {
			aged = append(aged, id)
		}
	}
	r.m.mu.Unlock()
	if _, err := r.pool.Exec(r.ctx, `UPDATE gaffer.jobs SET run_at = now() - interval '1 second' WHERE id = ANY($1)`, due); err != nil {
		r.fail("warp: %v", err)
	}
	if _, err := r.pool.Exec(r.ctx, `UPDATE gaffer.jobs SET run_at = run_at - interval '100 milliseconds' WHERE id = ANY($1)`, aged); err != nil {
		r.fail("warp: %v", err)
	}
}

var limitNames = []string{"la", "lb", "lc", "ld", "le"}

// limitKeys are the keys limits are generated with: every form of the
// grammar job.Limit.Key documents.
var limitKeys = []string{"", "tenant", "kind", "queue", "fairness_key", "limit_key", "args.acct", "args.dest.region", "host(args.url)"}

// genLimit generates a limit: a scope, a key, a concurrency, a rate, or
// both.
func (r *run) genLimit(rng *rand.Rand, name string) limitCfg {
	l := limitCfg{name: name, key: limitKeys[rng.IntN(len(limitKeys))]}
	if rng.IntN(2) == 0 {
		l.queue = r.queues[rng.IntN(len(r.queues))]
	}
	if rng.IntN(3) == 0 {
		l.kind = r.kinds[rng.IntN(len(r.kinds))]
	}
	if rng.IntN(3) == 0 {
		l.tenant = r.tenants[rng.IntN(len(r.tenants))]
	}
	if rng.IntN(4) > 0 {
		l.conc = 1 + rng.IntN(6)
	}
	if l.conc == 0 || rng.IntN(4) == 0 {
		l.rate = 2 + rng.IntN(8)
		l.period = time.Duration(200+rng.IntN(800)) * time.Millisecond
		l.burst = 1 + rng.IntN(l.rate+2)
	}
	return l
}

// changeLimit makes, changes (its concurrency, key or rate, or all of
// it) or deletes one of the limits named limitNames, through the public
// client.
func (r *run) changeLimit(rng *rand.Rand) {
	name := limitNames[rng.IntN(len(limitNames))]
	r.m.mu.Lock()
	var cur *limitCfg
	if l := r.m.limits[name]; l != nil {
		cur = l.last()
	}
	r.m.mu.Unlock()
	var next limitCfg
	del := false
	switch x := rng.IntN(10); {
	case cur == nil:
		next = r.genLimit(rng, name)
	case x < 3:
		del = true
		next = *cur
	case x < 5:
		next = *cur
		next.conc = 1 + rng.IntN(6)
	case x < 7:
		next = *cur
		next.key = limitKeys[rng.IntN(len(limitKeys))]
	case x < 8 && cur.rate > 0:
		next = *cur
		next.rate = 2 + rng.IntN(8)
		next.burst = 1 + rng.IntN(next.rate+2)
	default:
		next = r.genLimit(rng, name)
	}
	r.applyLimit(next, del)
}

// applyLimit sets or deletes a limit and records the change with the
// claims it may have been made under.
func (r *run) applyLimit(next limitCfg, del bool) {
	c := r.m.beginChange(next.name)
	begin := r.clock()
	var err error
	for try := 0; try < 5; try++ {
		if del {
			err = r.client.DeleteLimit(r.ctx, next.name)
		} else {
			_, err = r.client.SetLimit(r.ctx, job.Limit{Name: next.name, Queue: next.queue, Kind: next.kind, Tenant: next.tenant,
				Key: next.key, Concurrency: next.conc, Rate: next.rate, Period: next.period, Burst: next.burst})
		}
		// A change that deadlocked with claims changed nothing: an
		// operator would try again. Counted and reported, not failed.
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			break
		}
		r.m.mu.Lock()
		r.m.stats.changeDeadlocks++
		r.m.mu.Unlock()
	}
	end := r.clock()
	if err != nil {
		r.fail("change limit %s (delete %v): %v", next, del, err)
	}
	r.m.endChange(c, next, !del, begin, end)
}

// clock reads the database's clock.
func (r *run) clock() time.Time {
	var t time.Time
	if err := r.pool.QueryRow(r.ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		r.fail("read the clock: %v", err)
	}
	return t
}

func kindSet(kinds []string) map[string]bool {
	if len(kinds) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, k := range kinds {
		out[k] = true
	}
	return out
}

func unitSet(units []store.Unit) map[store.Unit]bool {
	out := map[store.Unit]bool{}
	for _, u := range units {
		out[u] = true
	}
	return out
}

func completions(leases []store.Lease) []store.Completion {
	out := make([]store.Completion, len(leases))
	for i, l := range leases {
		out[i] = store.Completion{Lease: l}
	}
	return out
}
