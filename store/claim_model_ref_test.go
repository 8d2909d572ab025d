package store_test

// The claim model test's reference model: what the claim promises
// (PRODUCT.md G10, G12, G13), in plain Go, judged against what PostgreSQL
// holds. It computes limit keys from job fields itself and never reads
// the claim's own bookkeeping (limit_buckets).

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/store"
)

// jobState is a job's state as the model knows it.
type jobState int

const (
	waiting   jobState = iota // pending or retrying: claimable once due
	running                   // an attempt is live
	ending                    // its attempt's end (complete, fail, snooze, release) is in flight
	completed                 //
	failed                    //
	cancelled                 //
)

func (s jobState) String() string {
	return [...]string{"waiting", "running", "ending", "completed", "failed", "cancelled"}[s]
}

// mJob is one job as the model knows it: what was enqueued (never
// changes) and where it stands.
type mJob struct {
	id                                  int64
	tenant, kind, queue, fkey, limitKey string
	args                                map[string]any // strings and objects of strings only
	priority                            int
	label                               string // "hostile …" for the jobs built to poison a key

	state       jobState
	attempt     int
	maxAttempts int
	token       int64
	runAt       time.Time // as PostgreSQL last said
	// strikes counts the consecutive short claims that left the job
	// behind while it was due and nothing refused it.
	strikes int
}

func (j *mJob) unit() store.Unit { return store.Unit{Tenant: j.tenant, FairnessKey: j.fkey} }

func (j *mJob) pos() store.ClaimPosition {
	return store.ClaimPosition{Priority: j.priority, RunAt: j.runAt, ID: j.id}
}

func (j *mJob) String() string {
	s := fmt.Sprintf("job %d (tenant %s, fairness key %q, kind %s, queue %s, priority %d, run_at %s, attempt %d",
		j.id, j.tenant, j.fkey, j.kind, j.queue, j.priority, j.runAt.Format("15:04:05.000000"), j.attempt)
	if j.label != "" {
		s += ", " + j.label
	}
	return s + ")"
}

// limitCfg is a limit as the model set it (job.Limit's fields).
type limitCfg struct {
	name, queue, kind, tenant, key string
	conc, rate, burst              int
	period                         time.Duration
}

func (l limitCfg) String() string {
	s := fmt.Sprintf("%s{queue %q kind %q tenant %q key %q", l.name, l.queue, l.kind, l.tenant, l.key)
	if l.conc > 0 {
		s += fmt.Sprintf(" concurrency %d", l.conc)
	}
	if l.rate > 0 {
		s += fmt.Sprintf(" rate %d per %s burst %d", l.rate, l.period, l.burst)
	}
	return s + "}"
}

func (l limitCfg) applies(j *mJob) bool {
	return (l.queue == "" || l.queue == j.queue) && (l.kind == "" || l.kind == j.kind) && (l.tenant == "" || l.tenant == j.tenant)
}

// limitKeyOf is the key a limit keyed by from counts j under, by the
// grammar job.Limit.Key documents: "", tenant, kind, queue, limit_key,
// fairness_key, args.<a.b> (a string in the args) and host(args.<a.b>)
// (the host of that URL as Go's net/url reads it, lower-cased).
func limitKeyOf(from string, j *mJob) string {
	switch {
	case from == "":
		return ""
	case from == "tenant":
		return j.tenant
	case from == "kind":
		return j.kind
	case from == "queue":
		return j.queue
	case from == "limit_key":
		return j.limitKey
	case from == "fairness_key":
		return j.fkey
	case strings.HasPrefix(from, "args."):
		return argText(j.args, strings.Split(strings.TrimPrefix(from, "args."), "."))
	case strings.HasPrefix(from, "host(args.") && strings.HasSuffix(from, ")"):
		u, err := url.Parse(argText(j.args, strings.Split(from[len("host(args."):len(from)-1], ".")))
		if err != nil {
			return ""
		}
		return strings.ToLower(u.Hostname())
	}
	panic("claim model: unknown limit key " + from)
}

// argText is the string at path in args ("" when there is none).
func argText(args map[string]any, path []string) string {
	var v any = args
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// limitChange is one change of a limit (made, changed or deleted), and
// the claims that may not have seen it: those in flight while it was
// made. Their attempts, and those of every claim that started before
// they all returned (it may have counted without them), are excused from
// the limit as it became.
type limitChange struct {
	cfg    limitCfg
	exists bool
	// begin and end are database clock readings before the change was
	// sent and after it returned.
	begin, end time.Time
	done       bool
	// watching counts the claims in flight during the change that have
	// not returned yet; excuseUntil is the latest database clock reading
	// after one of them returned (at least end); spanFrom the earliest
	// start of one of their attempts (at most begin).
	watching    int
	excuseUntil time.Time
	spanFrom    time.Time
}

func (c *limitChange) settled() bool { return c.done && c.watching == 0 }

type mLimit struct {
	name     string
	changes  []*limitChange
	changing int // changes sent, not yet returned
}

// at returns the change that made the limit as a snapshot taken between
// t1 and t2 saw it (nil: no limit yet); ok is false when a change may
// have been under way.
func (l *mLimit) at(t1, t2 time.Time) (cur *limitChange, ok bool) {
	if l.changing > 0 {
		return nil, false
	}
	for _, c := range l.changes {
		if !c.end.Before(t1) && !c.begin.After(t2) {
			return nil, false
		}
		if c.end.Before(t1) {
			cur = c
		}
	}
	return cur, true
}

// last is the limit as the model last set it, or nil when deleted.
func (l *mLimit) last() *limitCfg {
	if len(l.changes) == 0 || !l.changes[len(l.changes)-1].exists {
		return nil
	}
	return &l.changes[len(l.changes)-1].cfg
}

// flight is a claim in flight, and the changes made meanwhile.
type flight struct {
	changes []*limitChange
}

// attemptStart is one attempt a claim started.
type attemptStart struct {
	job *mJob
	at  time.Time // attempted_at: the claim transaction's now()
}

// model is the reference model. Its methods lock mu.
type model struct {
	mu      sync.Mutex
	jobs    map[int64]*mJob
	ids     []int64
	limits  map[string]*mLimit
	weights map[string]int
	starts  []attemptStart
	flights map[*flight]bool
	active  []*limitChange
	// broken is the first invariant found broken ("" while none).
	broken string
	// phase and step say where the run is, for the report.
	phase    string
	step     int
	brokenAt string
	stats    modelStats
}

// modelStats counts what the checks judged, so that a run that checked
// little shows it.
type modelStats struct {
	claims, short, fairness, buckets, rateStarts int
	// changeDeadlocks counts limit changes PostgreSQL aborted as
	// deadlocked with claims (and the model sent again).
	changeDeadlocks int
}

func (s modelStats) String() string {
	return fmt.Sprintf("%d claims judged (%d short), %d fairness checks, %d bucket checks, %d starts under rate limits, %d limit changes deadlocked with claims",
		s.claims, s.short, s.fairness, s.buckets, s.rateStarts, s.changeDeadlocks)
}

func newModel() *model {
	return &model{jobs: map[int64]*mJob{}, limits: map[string]*mLimit{}, weights: map[string]int{}, flights: map[*flight]bool{}}
}

func (m *model) failf(format string, args ...any) {
	if m.broken == "" {
		m.broken = fmt.Sprintf(format, args...)
		m.brokenAt = fmt.Sprintf("step %d (%s phase)", m.step, m.phase)
	}
}

func (m *model) violation() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.broken
}

func (m *model) weight(tenant string) int {
	if w := m.weights[tenant]; w > 0 {
		return w
	}
	return 1
}

func (m *model) addJob(j *mJob) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs[j.id] = j
	m.ids = append(m.ids, j.id)
}

// --- limits and the claims that may have missed their changes ---

// beginFlight registers a claim about to be sent.
func (m *model) beginFlight() *flight {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := &flight{changes: slices.Clone(m.active)}
	for _, c := range f.changes {
		c.watching++
	}
	m.flights[f] = true
	return f
}

// endFlight records that a claim returned (its transaction committed
// before the database clock read clock) with rows.
func (m *model) endFlight(f *flight, rows []store.Job, clock time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.flights, f)
	for _, c := range f.changes {
		c.watching--
		c.excuseUntil = later(c.excuseUntil, clock)
		for _, r := range rows {
			if r.AttemptedAt != nil {
				c.spanFrom = earlier(c.spanFrom, *r.AttemptedAt)
			}
		}
	}
}

// beginChange registers a change of limit name about to be sent: every
// claim in flight, and every claim sent until it returns, may miss it.
func (m *model) beginChange(name string) *limitChange {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.limits[name]
	if l == nil {
		l = &mLimit{name: name}
		m.limits[name] = l
	}
	l.changing++
	c := &limitChange{}
	for f := range m.flights {
		f.changes = append(f.changes, c)
		c.watching++
	}
	m.active = append(m.active, c)
	return c
}

// endChange records a change that returned: the limit is cfg (exists
// false: deleted), as of the database clock readings begin and end.
func (m *model) endChange(c *limitChange, cfg limitCfg, exists bool, begin, end time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c.cfg, c.exists, c.begin, c.end, c.done = cfg, exists, begin, end, true
	c.excuseUntil = later(c.excuseUntil, end)
	c.spanFrom = earlier(c.spanFrom, begin)
	m.active = slices.DeleteFunc(m.active, func(a *limitChange) bool { return a == c })
	l := m.limits[cfg.name]
	l.changing--
	l.changes = append(l.changes, c)
}

// setInitialLimit records a limit that exists before the run (the
// migrations' http-per-host).
func (m *model) setInitialLimit(cfg limitCfg) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limits[cfg.name] = &mLimit{name: cfg.name, changes: []*limitChange{{cfg: cfg, exists: true, done: true}}}
}

// currentLimits are the limits as the model last set them, by name.
func (m *model) currentLimits() []limitCfg {
	var out []limitCfg
	for _, l := range m.limits {
		if c := l.last(); c != nil {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].name < out[k].name })
	return out
}

func later(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// --- what PostgreSQL holds ---

// dbJob is a job's row as a snapshot read it.
type dbJob struct {
	id          int64
	state       string
	attempt     int
	token       int64
	runAt       time.Time
	attemptedAt time.Time
}

// dbSnap is the jobs table (or its running rows) as one statement saw
// it, with now() before its snapshot (t1) and clock_timestamp() after
// (t2).
type dbSnap struct {
	t1, t2 time.Time
	jobs   []dbJob
}

func readSnap(ctx context.Context, pool *pgxpool.Pool, runningOnly bool) (dbSnap, error) {
	rows, err := pool.Query(ctx, `
		SELECT t.n, t.c, j.id, j.state, j.attempt, coalesce(j.lease_token, 0), j.run_at, j.attempted_at
		FROM (SELECT now() AS n, clock_timestamp() AS c) t
		LEFT JOIN gaffer.jobs j ON NOT $1 OR j.state = 'running'
		ORDER BY j.id`, runningOnly)
	if err != nil {
		return dbSnap{}, err
	}
	defer rows.Close()
	var s dbSnap
	for rows.Next() {
		var id, token *int64
		var state *string
		var attempt *int
		var runAt, attemptedAt *time.Time
		if err := rows.Scan(&s.t1, &s.t2, &id, &state, &attempt, &token, &runAt, &attemptedAt); err != nil {
			return dbSnap{}, err
		}
		if id == nil {
			continue
		}
		d := dbJob{id: *id, state: *state, attempt: *attempt, token: *token, runAt: *runAt}
		if attemptedAt != nil {
			d.attemptedAt = *attemptedAt
		}
		s.jobs = append(s.jobs, d)
	}
	return s, rows.Err()
}

// --- the checks ---

// recordClaim takes what a claim returned into the model: no job may be
// claimed while its previous attempt is live, nor out of the claim's
// scope, nor before it is due (G2, G12).
func (m *model) recordClaim(sc claimScope, rows []store.Job) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rows {
		j := m.jobs[r.ID]
		switch {
		case j == nil:
			m.failf("%s claimed job %d, which the model never enqueued", sc, r.ID)
			continue
		case j.state == running:
			m.failf("no job run twice at once: %s claimed %s while its attempt %d is live", sc, j, j.attempt)
		case j.state != waiting && j.state != ending:
			m.failf("%s claimed %s, which is %s", sc, j, j.state)
		case r.Attempt != j.attempt+1:
			m.failf("%s claimed %s as attempt %d, want %d", sc, j, r.Attempt, j.attempt+1)
		case !sc.covers(j):
			m.failf("%s claimed %s, outside its scope", sc, j)
		case r.AttemptedAt == nil || r.RunAt.After(*r.AttemptedAt):
			m.failf("%s claimed %s before it was due (attempted_at %v)", sc, j, r.AttemptedAt)
		}
		j.state, j.attempt, j.token, j.runAt, j.strikes = running, r.Attempt, r.LeaseToken, r.RunAt, 0
		if r.AttemptedAt != nil {
			m.starts = append(m.starts, attemptStart{job: j, at: *r.AttemptedAt})
		}
	}
}

// reconcile compares a whole-table snapshot, taken while nothing else
// runs, with the model, and takes run_at (set by the database's clock)
// from it: no job lost, none unknown, every state and attempt number as
// the model expects (G2, G3).
func (m *model) reconcile(s dbSnap) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[int64]bool, len(s.jobs))
	for _, d := range s.jobs {
		seen[d.id] = true
		j := m.jobs[d.id]
		if j == nil {
			m.failf("job %d (%s) is in the database but the model never enqueued it", d.id, d.state)
			continue
		}
		ok := false
		switch j.state {
		case waiting:
			ok = d.state == "pending" || d.state == "retrying"
			j.runAt = d.runAt
		case running:
			ok = d.state == "running" && d.token == j.token
		case ending:
			ok = true
		default:
			ok = d.state == j.state.String()
		}
		if !ok {
			m.failf("%s is %s in the model but %s (token %d) in the database", j, j.state, d.state, d.token)
		}
		if d.attempt != j.attempt {
			m.failf("%s: the database says attempt %d", j, d.attempt)
		}
	}
	for _, id := range m.ids {
		if !seen[id] {
			m.failf("job lost: %s is not in the database", m.jobs[id])
		}
	}
}

// bucket names a limit's key.
type bucket struct{ limit, key string }

// checkLimits checks a snapshot of the running attempts against every
// limit (G10): running attempts per (limit, key) never exceed its
// concurrency, except those excused by the limit's last change (started
// before it, or before every claim that may have missed it returned).
func (m *model) checkLimits(s dbSnap, where string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.limits {
		c, ok := l.at(s.t1, s.t2)
		if !ok || c == nil || !c.exists || c.cfg.conc == 0 || !c.settled() {
			continue
		}
		running, excused := map[string][]int64{}, map[string]int{}
		for _, d := range s.jobs {
			j := m.jobs[d.id]
			if d.state != "running" || j == nil || !c.cfg.applies(j) {
				continue
			}
			k := limitKeyOf(c.cfg.key, j)
			running[k] = append(running[k], j.id)
			if d.attemptedAt.Before(c.excuseUntil) {
				excused[k]++
			}
		}
		for k, ids := range running {
			m.stats.buckets++
			if len(ids) > max(c.cfg.conc, excused[k]) {
				m.failf("limit exceeded %s: %d running under %s key %q (jobs %v), %d of them excused by the limit's last change at %s",
					where, len(ids), c.cfg, shortKey(k), ids, excused[k], c.end.Format("15:04:05.000000"))
			}
		}
	}
}

// checkRates checks every start against the rate limits (G10): within
// any window of one period, at most rate + burst starts per key, over
// the starts a limit's configuration admitted alone (windows that span
// one of its changes are left out).
func (m *model) checkRates() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.limits {
		for i, c := range l.changes {
			if !c.exists || c.cfg.rate == 0 || !c.settled() {
				continue
			}
			lo, hi := c.excuseUntil, time.Time{}
			if i+1 < len(l.changes) {
				if !l.changes[i+1].settled() {
					continue
				}
				hi = l.changes[i+1].spanFrom
			}
			byKey := map[string][]time.Time{}
			for _, st := range m.starts {
				if st.at.After(lo) && (hi.IsZero() || st.at.Before(hi)) && c.cfg.applies(st.job) {
					k := limitKeyOf(c.cfg.key, st.job)
					byKey[k] = append(byKey[k], st.at)
				}
			}
			for k, ts := range byKey {
				m.stats.rateStarts += len(ts)
				slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
				for a, b := 0, 0; a < len(ts); a++ {
					for b < len(ts) && !ts[b].After(ts[a].Add(c.cfg.period)) {
						b++
					}
					if b-a > c.cfg.rate+c.cfg.burst {
						m.failf("rate exceeded: %d starts under %s key %q within %s from %s (at most rate+burst = %d)",
							b-a, c.cfg, shortKey(k), c.cfg.period, ts[a].Format("15:04:05.000000"), c.cfg.rate+c.cfg.burst)
						return
					}
				}
			}
		}
	}
}

func shortKey(k string) string {
	if len(k) > 40 {
		return fmt.Sprintf("%s…(%d bytes)", k[:20], len(k))
	}
	return k
}

// claimScope is what one claim may take: a queue, and for a remote
// worker its tenant and kinds, for a side claim its units.
type claimScope struct {
	path   string // for messages: "node n1", "side claim of n1", "remote w-all"
	queue  string
	tenant string          // "" or "*": any
	kinds  map[string]bool // nil: any
	units  map[store.Unit]bool
}

func (sc claimScope) String() string { return fmt.Sprintf("%s (queue %s)", sc.path, sc.queue) }

func (sc claimScope) covers(j *mJob) bool {
	return j.queue == sc.queue && (sc.tenant == "" || sc.tenant == "*" || sc.tenant == j.tenant) &&
		(sc.kinds == nil || sc.kinds[j.kind]) && (sc.units == nil || sc.units[j.unit()])
}

// eligible returns the jobs a claim in scope sc, made as v says, should
// see at now: waiting, due, in scope and past the claim's cursor of
// their unit. A node's claim may leave a unit it did not serve whose due
// jobs all came due within its grace to a side claim: such units are
// left out (grace reports there were some).
func (m *model) eligible(sc claimScope, v claimView, now time.Time) (out []*mJob, grace bool) {
	keep := map[store.Unit]bool{}
	if v.grace > 0 {
		served := map[store.Unit]bool{}
		for _, u := range v.served {
			served[u] = true
		}
		for _, id := range m.ids {
			j := m.jobs[id]
			if j.state == waiting && j.queue == sc.queue && (served[j.unit()] || !j.runAt.After(now.Add(-v.grace))) {
				keep[j.unit()] = true
			}
		}
	}
	for _, id := range m.ids {
		j := m.jobs[id]
		if j.state != waiting || j.runAt.After(now) || !sc.covers(j) {
			continue
		}
		if c, ok := v.cursors[j.unit()]; ok && !c.Less(j.pos()) {
			continue
		}
		if v.grace > 0 && !keep[j.unit()] {
			grace = true
			continue
		}
		out = append(out, j)
	}
	return out, grace
}

// refuses reports which limit, as the model last set it, holds j back
// after a claim: one with a rate (the model does not keep tokens), or
// one whose bucket for j is at its concurrency.
func (m *model) refuses(j *mJob, running map[bucket]int) string {
	for _, l := range m.currentLimits() {
		if !l.applies(j) {
			continue
		}
		k := limitKeyOf(l.key, j)
		if l.rate > 0 || (l.conc > 0 && running[bucket{l.name, k}] >= l.conc) {
			return l.String()
		}
	}
	return ""
}

// runningByBucket counts a snapshot's running attempts per bucket of the
// current limits.
func (m *model) runningByBucket(s dbSnap) map[bucket]int {
	out := map[bucket]int{}
	limits := m.currentLimits()
	for _, d := range s.jobs {
		j := m.jobs[d.id]
		if d.state != "running" || j == nil {
			continue
		}
		for _, l := range limits {
			if l.conc > 0 && l.applies(j) {
				out[bucket{l.name, limitKeyOf(l.key, j)}]++
			}
		}
	}
	return out
}

// checkQuiescentClaim judges a claim of n made while nothing else ran,
// from the snapshot before it (pre, whose now() is the claim's "now")
// and after it (post):
//
//   - liveness (G12): a claim that came back short leaves no job that
//     was eligible when it started, unless a limit holds it back; a job
//     may survive one short claim (a cursor, a rotation), not two in a row;
//   - limits (G10): a claim that started attempts under a bucket leaves
//     it at most at its concurrency;
//   - fairness (G10): with no more units with eligible jobs than n, and
//     no limit on them, each gets a job and none more than its weighted
//     share while another with jobs left got less than its own.
func (m *model) checkQuiescentClaim(sc claimScope, n int, v claimView, pre, post dbSnap) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// eligible reads the jobs as they were before the claim: the claimed
	// ones are running now, so judge them from pre's states.
	claimed := map[int64]bool{}
	for _, r := range v.rows {
		claimed[r.ID] = true
	}
	for id := range claimed {
		m.jobs[id].state = waiting
	}
	elig, grace := m.eligible(sc, v, pre.t1)
	for id := range claimed {
		m.jobs[id].state = running
	}
	running := m.runningByBucket(post)

	// Limits: a bucket the claim started attempts under ends within it.
	for _, r := range v.rows {
		j := m.jobs[r.ID]
		for _, l := range m.currentLimits() {
			if l.conc > 0 && l.applies(j) {
				if got := running[bucket{l.name, limitKeyOf(l.key, j)}]; got > l.conc {
					m.failf("limit exceeded: %s started %s under %s key %q, leaving %d running",
						sc, j, l, shortKey(limitKeyOf(l.key, j)), got)
				}
			}
		}
	}

	// Liveness.
	short := len(v.rows) < n
	m.stats.claims++
	if short {
		m.stats.short++
	}
	for _, j := range elig {
		switch {
		case claimed[j.id] || !short:
			j.strikes = 0
		case m.refuses(j, running) != "":
			j.strikes = 0
		default:
			j.strikes++
			if j.strikes >= 2 {
				m.failf("due job left behind: %s asked for %d and got %d, the second short claim in a row that left %s due since %s; no limit holds it back (claimed: %s)\n%s",
					sc, n, len(v.rows), j, pre.t1.Sub(j.runAt).Round(time.Millisecond), describeRows(v.rows), m.explain(sc, v, pre.t1))
			}
		}
	}

	// Fairness.
	if grace || m.cameDue(sc.queue, pre.t1, post.t1, claimed) {
		return
	}
	units := map[store.Unit]int{} // eligible jobs per unit
	for _, j := range elig {
		if m.limitedAtAll(j) {
			return
		}
		units[j.unit()]++
	}
	if len(units) == 0 || len(units) > n {
		return
	}
	m.stats.fairness++
	got := map[store.Unit]int{}
	for _, r := range v.rows {
		got[store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}]++
	}
	weights := 0
	for u := range units {
		weights += m.weight(u.Tenant)
	}
	var over, under []string
	sorted := make([]store.Unit, 0, len(units))
	for u := range units {
		sorted = append(sorted, u)
	}
	sort.Slice(sorted, func(i, k int) bool {
		return sorted[i].Tenant < sorted[k].Tenant || (sorted[i].Tenant == sorted[k].Tenant && sorted[i].FairnessKey < sorted[k].FairnessKey)
	})
	for _, u := range sorted {
		have := units[u]
		if got[u] == 0 {
			m.failf("unfair claim: %s asked for %d with %d units holding eligible jobs, and unit %s/%q (%d eligible) got none (claimed: %s)\n%s",
				sc, n, len(units), u.Tenant, u.FairnessKey, have, describeRows(v.rows), m.explain(sc, v, pre.t1))
			return
		}
		share := int(math.Ceil(float64(n*m.weight(u.Tenant)) / float64(weights)))
		if got[u] > share {
			over = append(over, fmt.Sprintf("%s/%q got %d of share %d", u.Tenant, u.FairnessKey, got[u], share))
		}
		if got[u] < share && have > got[u] {
			under = append(under, fmt.Sprintf("%s/%q got %d of share %d with %d eligible", u.Tenant, u.FairnessKey, got[u], share, have))
		}
	}
	if len(over) > 0 && len(under) > 0 {
		sort.Strings(over)
		sort.Strings(under)
		m.failf("unfair claim: %s asked for %d: %s while %s\n%s", sc, n, strings.Join(over, ", "), strings.Join(under, ", "), m.explain(sc, v, pre.t1))
	}
}

// explain describes what a claim in sc faced at now: the queue's units
// with waiting jobs (due in scope, due out of scope, not due), the
// claim's cursors and rotation, the limits.
func (m *model) explain(sc claimScope, v claimView, now time.Time) string {
	type counts struct{ due, outOfScope, later int }
	units := map[store.Unit]*counts{}
	for _, j := range m.jobs {
		if j.queue != sc.queue || (j.state != waiting && j.state != running) {
			continue
		}
		if j.state == running && !slices.ContainsFunc(v.rows, func(r store.Job) bool { return r.ID == j.id }) {
			continue
		}
		c := units[j.unit()]
		if c == nil {
			c = &counts{}
			units[j.unit()] = c
		}
		switch {
		case j.runAt.After(now):
			c.later++
		case sc.covers(j):
			c.due++
		default:
			c.outOfScope++
		}
	}
	keys := make([]store.Unit, 0, len(units))
	for u := range units {
		keys = append(keys, u)
	}
	// Claims serve units from the last in (tenant, fairness key) order.
	sort.Slice(keys, func(i, k int) bool {
		if keys[i].Tenant != keys[k].Tenant {
			return keys[i].Tenant > keys[k].Tenant
		}
		return keys[i].FairnessKey > keys[k].FairnessKey
	})
	var b strings.Builder
	fmt.Fprintf(&b, "  the queue's units with waiting jobs, in the order claims find them (due in scope / due out of scope / not due; weight):")
	for _, u := range keys {
		c := units[u]
		fmt.Fprintf(&b, " %s/%q %d/%d/%d w%d;", u.Tenant, u.FairnessKey, c.due, c.outOfScope, c.later, m.weight(u.Tenant))
	}
	if v.below != nil {
		fmt.Fprintf(&b, "\n  rotated below %s/%q", v.below.Tenant, v.below.FairnessKey)
	}
	for u, c := range v.cursors {
		fmt.Fprintf(&b, "\n  cursor %s/%q at (%d, %s, %d)", u.Tenant, u.FairnessKey, c.Priority, c.RunAt.Format("15:04:05.000000"), c.ID)
	}
	if len(v.served) > 0 {
		fmt.Fprintf(&b, "\n  served before: %v", v.served)
	}
	for _, l := range m.currentLimits() {
		fmt.Fprintf(&b, "\n  limit %s", l)
	}
	return b.String()
}

// cameDue reports whether a job of queue (waiting, or claimed by the
// claim judged) came due between the snapshots before and after the
// claim: the claim may have seen it, and its unit, where the model did
// not.
func (m *model) cameDue(queue string, before, after time.Time, claimed map[int64]bool) bool {
	for _, j := range m.jobs {
		if (j.state == waiting || claimed[j.id]) && j.queue == queue && j.runAt.After(before) && !j.runAt.After(after) {
			return true
		}
	}
	return false
}

// limitedAtAll reports whether any current limit applies to j.
func (m *model) limitedAtAll(j *mJob) bool {
	for _, l := range m.currentLimits() {
		if l.applies(j) {
			return true
		}
	}
	return false
}

func describeRows(rows []store.Job) string {
	if len(rows) == 0 {
		return "nothing"
	}
	per := map[string]int{}
	for _, r := range rows {
		per[fmt.Sprintf("%s/%q", r.Tenant, r.FairnessKey)]++
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, per[k])
	}
	return strings.Join(parts, " ")
}
