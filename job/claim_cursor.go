package job

import (
	"github.com/gafferhq/gaffer/store"
)

// advanceCursors moves each unit's cursor to the end of what this claim
// took of it. A short claim saw everything due past the cursors, so the
// next one starts over. A claim that served as many units as it took jobs
// may have left units out: the next one starts below the last it served.
func (p *producer) advanceCursors(rows []store.Job, asked int) {
	p.below = nil
	if len(rows) < asked {
		clear(p.cursors)
		return
	}
	if len(p.cursors) == 0 {
		p.cursorSince = p.lastClaim
	}
	if p.cursors == nil {
		p.cursors = map[store.Unit]store.ClaimPosition{}
	}
	var lowest *store.Unit
	for _, r := range rows {
		u := store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}
		pos := store.ClaimPosition{Priority: r.Priority, RunAt: r.RunAt, ID: r.ID}
		if last, ok := p.cursors[u]; !ok || last.Less(pos) {
			p.cursors[u] = pos
		}
		if lowest == nil || u.Tenant < lowest.Tenant || (u.Tenant == lowest.Tenant && u.FairnessKey < lowest.FairnessKey) {
			lowest = &u
		}
	}
	if len(p.cursors) > maxCursors {
		clear(p.cursors)
	}
	// Units are served from the last in (tenant, fairness key) order down,
	// at most as many as the claim takes jobs: one job per unit means the
	// claim may have stopped for want of room, and the next starts below
	// the last it served (wrapping around).
	if countUnits(rows) == len(rows) {
		p.below = lowest
	}
}

// maxCursors bounds the cursors a producer keeps (and sends per claim).
const maxCursors = 1000

func countUnits(rows []store.Job) int {
	seen := map[store.Unit]bool{}
	for _, r := range rows {
		seen[store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}] = true
	}
	return len(seen)
}
