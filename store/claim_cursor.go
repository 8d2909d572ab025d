package store

import "time"

// ClaimCursor is where one claimer's claims of one queue stand: per unit,
// where its last claims ended, so that a deep backlog's claims do not
// walk the dead index entries earlier claims left; and where its next
// claim starts among the units (Claimed.Next), so that a queue with more
// units than one claim serves has them served in turn. A node keeps one
// per queue; a node serving remote workers one per (worker, queue).
// Cursors only save work: a claim with none reads each unit from its
// start. The zero value is ready to use; it is not safe for concurrent
// use.
type ClaimCursor struct {
	units map[Unit]ClaimPosition
	since time.Time
	next  *Unit
}

// MaxClaimCursors bounds the unit cursors a ClaimCursor keeps (and sends
// with each claim); past it they start afresh.
const MaxClaimCursors = 1000

// Prepare fills p's Cursors and After for a claim made at now. Cursors
// kept longer than reset are dropped first: a job that comes before one
// of them (a more urgent priority, an earlier run_at) waits at most that
// long while every claim is full.
func (c *ClaimCursor) Prepare(p *ClaimParams, now time.Time, reset time.Duration) {
	if len(c.units) > 0 && now.Sub(c.since) > reset {
		clear(c.units)
	}
	p.Cursors = make([]UnitCursor, 0, len(c.units))
	for u, pos := range c.units {
		p.Cursors = append(p.Cursors, UnitCursor{Unit: u, ClaimPosition: pos})
	}
	p.After = c.next
}

// Advance records a claim of asked jobs, made at now, that took got: each
// unit's cursor moves to the end of what it took of the unit, and the
// next claim starts where the claim says. A short claim saw everything
// due past the cursors, so the next one reads every unit from its start.
func (c *ClaimCursor) Advance(got Claimed, asked int, now time.Time) {
	c.next = got.Next
	if len(got.Jobs) < asked {
		clear(c.units)
		return
	}
	if len(c.units) == 0 {
		c.since = now
	}
	if c.units == nil {
		c.units = map[Unit]ClaimPosition{}
	}
	for _, j := range got.Jobs {
		u := Unit{Tenant: j.Tenant, FairnessKey: j.FairnessKey}
		pos := ClaimPosition{Priority: j.Priority, RunAt: j.RunAt, ID: j.ID}
		if last, ok := c.units[u]; !ok || last.Less(pos) {
			c.units[u] = pos
		}
	}
	if len(c.units) > MaxClaimCursors {
		clear(c.units)
	}
}
