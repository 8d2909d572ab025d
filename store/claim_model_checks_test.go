package store_test

// The claim model's checks: limits and rates over what PostgreSQL holds,
// and liveness and fairness of each claim made alone.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/store"
)

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
// one of its changes are left out). A configuration is checked once it
// and the next one settled, and then never again.
func (m *model) checkRates() {
	m.mu.Lock()
	defer m.mu.Unlock()
	slices.SortStableFunc(m.starts, func(a, b attemptStart) int { return a.at.Compare(b.at) })
	for _, l := range m.limits {
		for i, c := range l.changes {
			if !c.exists || c.cfg.rate == 0 || !c.settled() || c.rateChecked {
				continue
			}
			lo, hi, last := c.excuseUntil, time.Time{}, true
			if i+1 < len(l.changes) {
				if !l.changes[i+1].settled() {
					continue
				}
				hi, last = l.changes[i+1].spanFrom, false
			}
			from, _ := slices.BinarySearchFunc(m.starts, lo, func(s attemptStart, t time.Time) int {
				if s.at.After(t) {
					return 1
				}
				return -1
			})
			byKey := map[string][]time.Time{}
			for _, st := range m.starts[from:] {
				if !hi.IsZero() && !st.at.Before(hi) {
					break
				}
				if c.cfg.applies(st.job) {
					k := limitKeyOf(c.cfg.key, st.job)
					byKey[k] = append(byKey[k], st.at)
				}
			}
			for k, ts := range byKey {
				m.stats.rateStarts += len(ts)
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
			c.rateChecked = !last
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

	// A claim made while a limit was being changed takes nothing, by
	// design, and says so: it is no claim round.
	if v.busy {
		if len(v.rows) > 0 {
			m.failf("%s said it was busy (a limit being changed) but took %d jobs", sc, len(v.rows))
		}
		m.stats.busy++
		return
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
				m.failf("due job left behind: %s asked for %d and got %d, the second short claim in a row that left %s due since %s; no limit holds it back (claimed: %s)\n%s%s",
					sc, n, len(v.rows), j, pre.t1.Sub(j.runAt).Round(time.Millisecond), describeRows(v.rows), m.explain(sc, v, pre.t1), m.dbView(j.id))
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

// dbView is what the database holds of the jobs, for a report.
func (m *model) dbView(ids ...int64) string {
	if m.inspect == nil {
		return ""
	}
	return "\n  in the database: " + m.inspect(ids...)
}
