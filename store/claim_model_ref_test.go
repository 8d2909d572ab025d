package store_test

// The claim model test's reference model: what the claim promises
// (PRODUCT.md G10, G12, G13), in plain Go, judged against what PostgreSQL
// holds. It computes limit keys from job fields itself and never reads
// the claim's own bookkeeping (limit_buckets).

import (
	"context"
	"fmt"
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
	// rateChecked: its starts were checked against its rate, for good.
	rateChecked bool
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
	// inspect, when set, tells what the database holds of jobs, for a
	// report (the model never decides by it).
	inspect func(ids ...int64) string
}

// modelStats counts what the checks judged, so that a run that checked
// little shows it.
type modelStats struct {
	claims, short, fairness, buckets, rateStarts int
	// busy counts claims that took nothing because a limit was being
	// changed.
	busy int
	// changeDeadlocks counts limit changes PostgreSQL aborted as
	// deadlocked with claims (and the model sent again).
	changeDeadlocks int
	// turns of the ready ring asked for, made, and the rows they moved
	turns, turned, moved int
}

func (s modelStats) String() string {
	return fmt.Sprintf("%d claims judged (%d short, %d busy), %d fairness checks, %d bucket checks, %d starts under rate limits, %d limit changes deadlocked with claims, "+
		"ready ring: %d turns asked, %d made, %d rows moved",
		s.claims, s.short, s.busy, s.fairness, s.buckets, s.rateStarts, s.changeDeadlocks, s.turns, s.turned, s.moved)
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

// dbJob is a job's row as a snapshot read it.
type dbJob struct {
	id          int64
	state       string
	attempt     int
	token       int64
	runAt       time.Time
	attemptedAt time.Time
}

// dbSnap is what one statement saw of the jobs table, with now() before
// its snapshot (t1) and clock_timestamp() after it (t2): the rows its
// kind asks for, and (snapOpen) how many finished jobs it holds by state.
type dbSnap struct {
	t1, t2   time.Time
	jobs     []dbJob
	finished map[string]int
}

// snapKind says which rows a snapshot reads.
type snapKind int

const (
	snapRunning snapKind = iota // running rows only
	snapOpen                    // unfinished rows, and finished ones counted
	snapAll                     // every row
)

func readSnap(ctx context.Context, pool *pgxpool.Pool, kind snapKind) (dbSnap, error) {
	rows, err := pool.Query(ctx, `
		SELECT 'row', t.n, t.c, j.id, j.state, j.attempt, coalesce(j.lease_token, 0), j.run_at, j.attempted_at
		FROM (SELECT now() AS n, clock_timestamp() AS c) t
		LEFT JOIN gaffer.jobs j ON j.state = 'running' OR ($1 > 0 AND j.state IN ('pending', 'retrying')) OR $1 = 2
		UNION ALL
		SELECT 'finished', NULL, NULL, count(*), f.state, NULL, NULL, NULL, NULL
		FROM gaffer.jobs f
		WHERE $1 = 1 AND f.state IN ('completed', 'failed', 'cancelled')
		GROUP BY f.state`, int(kind))
	if err != nil {
		return dbSnap{}, err
	}
	defer rows.Close()
	s := dbSnap{}
	if kind == snapOpen {
		s.finished = map[string]int{}
	}
	for rows.Next() {
		var what string
		var t1, t2, runAt, attemptedAt *time.Time
		var id, token *int64
		var state *string
		var attempt *int
		if err := rows.Scan(&what, &t1, &t2, &id, &state, &attempt, &token, &runAt, &attemptedAt); err != nil {
			return dbSnap{}, err
		}
		switch {
		case what == "finished":
			s.finished[*state] = int(*id)
		case id == nil:
			s.t1, s.t2 = *t1, *t2
		default:
			s.t1, s.t2 = *t1, *t2
			d := dbJob{id: *id, state: *state, attempt: *attempt, token: *token, runAt: *runAt}
			if attemptedAt != nil {
				d.attemptedAt = *attemptedAt
			}
			s.jobs = append(s.jobs, d)
		}
	}
	return s, rows.Err()
}

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

// reconcile compares a snapshot taken while nothing else runs with the
// model, and takes run_at (set by the database's clock) from it: no job
// lost, none unknown, every state and attempt number as the model
// expects (G2, G3). A snapOpen snapshot holds finished jobs as counts.
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
	finished := map[string]int{}
	for _, id := range m.ids {
		j := m.jobs[id]
		if s.finished != nil && j.state >= completed {
			finished[j.state.String()]++
			continue
		}
		if !seen[id] {
			m.failf("job lost: %s is %s in the model, and not among the database's %s jobs", j, j.state,
				map[bool]string{true: "unfinished", false: ""}[s.finished != nil])
		}
	}
	for _, st := range []string{"completed", "failed", "cancelled"} {
		if s.finished != nil && s.finished[st] != finished[st] {
			m.failf("the database holds %d %s jobs, the model %d", s.finished[st], st, finished[st])
		}
	}
}
