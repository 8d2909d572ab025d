package job

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// sideClaims is a queue's side claim state. A claim of the queue takes
// its units' first jobs, so a due job inserted while one is in flight
// waits for it to end and for the next claim, which with a large backlog
// of another tenant is two rounds of up to a claim batch each. Instead,
// while the claim loop is busy, the insert's notification of the job's
// unit (store.ChannelUnits) starts a side claim of that unit's jobs only,
// small and at once, unless the last claim served the unit: then the
// unit has a backlog the claims of the queue already share their slots
// with, and the job waits its turn there.
type sideClaims struct {
	// filling is set while the claim loop claims and starts jobs.
	filling atomic.Bool
	wake    chan struct{}

	mu sync.Mutex
	// last holds the units the last claim that took jobs served; lastList
	// the same, for the next claim (read by the claim loop only).
	last     map[store.Unit]bool
	lastList []store.Unit
	// waiting holds the units notified for a side claim, not yet made;
	// pending says it is not empty.
	waiting map[store.Unit]bool
	pending atomic.Bool
	// unrequested is set when a notification asked for no side claim (the
	// claim loop was idle, or too many units waited): the next claim of
	// the queue then leaves no fresh job to a side claim (graceFor).
	unrequested atomic.Bool
}

// sideClaimGrace is how long a claim of the queue leaves the fresh jobs of
// a unit its last claim did not serve to the side claim their insert asks
// for (store.ClaimParams.Grace): without it, a claim that starts between
// the insert and the side claim takes the job, which then waits for that
// claim to end. A job no side claim takes (no free slot, no LISTEN, due by
// its run_at rather than by an insert) waits this long at most.
const sideClaimGrace = 25 * time.Millisecond

// maxSideUnits bounds the units one side claim names (and waiting holds).
const maxSideUnits = 16

// served records the units a claim of the queue took rows of, if any.
func (s *sideClaims) served(rows []store.Job) {
	if len(rows) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.last)
	if s.last == nil {
		s.last = map[store.Unit]bool{}
	}
	s.lastList = s.lastList[:0]
	for _, r := range rows {
		u := store.Unit{Tenant: r.Tenant, FairnessKey: r.FairnessKey}
		if !s.last[u] {
			s.last[u] = true
			s.lastList = append(s.lastList, u)
		}
		delete(s.waiting, u)
	}
	s.pending.Store(len(s.waiting) > 0)
}

// notified asks for a side claim of u, if the claim loop is busy and its
// last claim did not serve u. It does not block.
func (s *sideClaims) notified(u store.Unit) {
	if !s.filling.Load() {
		// The notification on ChannelJobs wakes the claim loop, whose
		// claim must then take the job itself.
		s.unrequested.Store(true)
		return
	}
	s.mu.Lock()
	if s.last[u] || s.waiting[u] {
		s.mu.Unlock()
		return
	}
	if len(s.waiting) >= maxSideUnits {
		s.mu.Unlock()
		s.unrequested.Store(true)
		return
	}
	if s.waiting == nil {
		s.waiting = map[store.Unit]bool{}
	}
	s.waiting[u] = true
	s.pending.Store(true)
	s.mu.Unlock()
	s.signal()
}

func (s *sideClaims) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// graceFor returns the units the last claim served and the grace for
// the next claim of the queue (store.ClaimParams.Served and Grace): none
// when a notification since the last claim asked for no side claim, for
// then no side claim would take the job the grace leaves (the claim loop
// was idle when its insert came, or too many units waited). Called by
// the claim loop only.
func (s *sideClaims) graceFor() ([]store.Unit, time.Duration) {
	if s.unrequested.Swap(false) {
		return nil, 0
	}
	return s.lastList, sideClaimGrace
}

// slotFreed lets a side claim that found no free slot try again.
func (s *sideClaims) slotFreed() {
	if s.pending.Load() {
		s.signal()
	}
}

// take returns the units waiting for a side claim and forgets them, if
// ok(len(units)) says the claim can be made now.
func (s *sideClaims) take(ok func(units int) bool) []store.Unit {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiting) == 0 || !ok(len(s.waiting)) {
		return nil
	}
	units := make([]store.Unit, 0, len(s.waiting))
	for u := range s.waiting {
		units = append(units, u)
	}
	clear(s.waiting)
	s.pending.Store(false)
	return units
}

// sideLoop makes the side claims of p's queue until ctx ends: each takes
// up to minClaim jobs per unit waiting, within the queue's free slots.
// Units wait while no slot is free (the claim in flight may have asked
// for them all), until one frees or a claim of the queue serves them.
func (p *producer) sideLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.side.wake:
		}
		var n int
		units := p.side.take(func(units int) bool {
			n = min(p.free(), p.w.cfg.ClaimBatch, minClaim*units)
			return n > 0
		})
		if len(units) == 0 || !p.w.claiming.Load() {
			continue
		}
		p.claimAndLaunch(ctx, n, units, func(got store.Claimed) {
			if got.Busy {
				// A limit was being changed and the side claim saw
				// nothing: the queue's next claim takes its units' jobs,
				// leaving none to a side claim.
				p.side.unrequested.Store(true)
			}
		})
	}
}

// unitNotified passes a notified unit of queue to its side claims.
func (w *Worker) unitNotified(queue string, u store.Unit) {
	if p := w.producers[queue]; p != nil {
		p.side.notified(u)
	}
}
