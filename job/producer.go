package job

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// producer is one queue's claim loop.
type producer struct {
	w      *Worker
	queue  string
	limit  int
	wakeCh chan struct{}
	runner service.Runner
	// work hands attempts to idle handler goroutines; quit ends them.
	work chan *execution
	quit chan struct{}

	active atomic.Int64
	more   atomic.Bool // the last claim took jobs: there may be more work
	// claimCap bounds the next claim (0: ClaimBatch) after short claims:
	// when limits let only a few of a claim's candidates start, asking
	// for a whole batch locks and weighs many jobs for nothing.
	claimCap  int
	capped    atomic.Bool // claimCap > 0, for other goroutines
	lastClaim time.Time
	// short says the last claim found some due jobs, fewer than it asked
	// for, and no limit refused any: the queue keeps up with a trickle,
	// and the next claim waits TrickleCooldown. (An empty claim, a poll's
	// in a quiet spell, holds nothing back; nor does one a limit cut, with
	// due jobs left for the next slot it frees.)
	short bool
	// cursor is where this loop's claims of the queue stand (the side
	// claims keep none: they read their units from the start).
	cursor store.ClaimCursor
	// reserved counts the slots the claims in flight (this loop's and the
	// side claim's) asked for and have not yet filled.
	reserved atomic.Int64
	side     sideClaims
	// busyWait is how long the claim loop waits before claiming again
	// after a claim a limit's change kept from claiming.
	busyWait time.Duration
	// failures counts the claims in a row that failed and waited before
	// the next; lostInRow those in a row made again at once, their
	// connection lost.
	failures, lostInRow int
	// lostTokens are the lease tokens of failed claims (this loop's and
	// the side claims'), which may have committed with their answer lost
	// on the way: the worker's lostReleaser gives back what they took.
	lostMu     sync.Mutex
	lostTokens []int64
}

// maxLostTokens bounds the failed claims remembered while the database
// stays out of reach; older ones' jobs wait for their leases to expire.
const maxLostTokens = 64

// maxImmediateRetries bounds the claims and writes made again at once,
// in a row, after their connection was lost: one more than the most
// connections a node's pool opens by default, each of which may have
// been terminated at once with the others.
const maxImmediateRetries = 21

// claimRetryWait is the wait before claiming again after the k-th failed
// claim in a row: 10 ms, doubling up to 250 ms. While the database is
// down (a restart, a failover) each queue's loop tries a connection 4
// times a second, and the first jobs after it is back start within one
// such wait (up to a second's wait, they waited 1.2 s).
func claimRetryWait(k int) time.Duration {
	return min(10*time.Millisecond<<min(k-1, 5), 250*time.Millisecond)
}

func (p *producer) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

func (p *producer) loop(ctx context.Context) {
	poll := p.w.cfg.PollInterval
	timer := p.w.clock.NewTimer(0) // look for work at once
	defer timer.Stop()
	sideDone := make(chan struct{})
	go func() {
		defer close(sideDone)
		p.sideLoop(ctx)
	}()
	defer func() { <-sideDone }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wakeCh:
		case <-timer.C():
		}
		if w := p.w; w.deaf.Load() {
			timer.Reset(jitter(min(poll, deafPoll), 0.1))
		} else {
			timer.Reset(jitter(poll, 0.1))
		}
		p.fill(ctx)
	}
}

// fill claims until the queue's slots are full or it runs dry.
// While it claims, a due job inserted for a unit its last claim did not
// serve is taken by a side claim (sideLoop) instead of waiting for it.
func (p *producer) fill(ctx context.Context) {
	w := p.w
	p.side.filling.Store(true)
	defer p.side.filling.Store(false)
	for ctx.Err() == nil && w.claiming.Load() {
		free := p.free()
		if free <= 0 {
			return // a finishing job wakes the loop
		}
		cooldown := w.cfg.FetchCooldown
		if p.short {
			cooldown = max(cooldown, w.cfg.TrickleCooldown)
		}
		if wait := cooldown - clock.Since(w.clock, p.lastClaim); wait > 0 {
			if !clock.Sleep(ctx, w.clock, wait) {
				return
			}
			// A side claim may have taken the slots meanwhile.
			if free = p.free(); free <= 0 {
				return
			}
		}
		n := min(free, w.cfg.ClaimBatch)
		if p.claimCap > 0 {
			n = min(n, p.claimCap)
		}
		p.lastClaim = w.clock.Now()
		busy := false
		rows, err := p.claimAndLaunch(ctx, n, nil, func(got store.Claimed) {
			if got.Busy {
				busy = true // a limit was being changed: it saw nothing
				return
			}
			// A full claim may have left work behind; so may a short one
			// that limits cut (a slot freeing here may let the next one
			// in). Only an empty claim says the queue has nothing for this
			// node now.
			p.more.Store(len(got.Jobs) > 0)
			p.short = len(got.Jobs) > 0 && len(got.Jobs) < n && !got.Limited
			p.adaptCap(len(got.Jobs), n)
			p.cursor.Advance(got, n, p.lastClaim)
			p.side.served(got.Jobs)
		})
		// The slots this claim held back are free again for a side claim
		// that found none.
		p.side.slotFreed()
		if err != nil {
			if ctx.Err() != nil || !w.claiming.Load() {
				return
			}
			// A claim whose connection the server had terminated (a
			// pooler's recycling, pg_terminate_backend) is made again at
			// once: the pool dropped that connection, and finding that the
			// next one died alike costs no wait (when every connection was
			// terminated at once, each may be met in turn). Other failures
			// (the database down or restarting) are tried again soon,
			// backing off to 250 ms while they last: a lost connection
			// costs milliseconds, not a poll.
			if store.ConnectionLost(err) && p.lostInRow < maxImmediateRetries {
				p.lostInRow++
				continue
			}
			p.failures++
			if !clock.Sleep(ctx, w.clock, jitter(claimRetryWait(p.failures), 0.5)) {
				return
			}
			continue
		}
		p.failures, p.lostInRow = 0, 0
		if busy {
			// The change waits for the claims in flight and commits at
			// once: claim again shortly, a fresh claim, backing off up to
			// the poll interval while one stays in the way.
			p.busyWait = min(max(2*p.busyWait, 10*time.Millisecond), maxBusyWait, w.cfg.PollInterval)
			if !clock.Sleep(ctx, w.clock, jitter(p.busyWait, 0.2)) {
				return
			}
			continue
		}
		p.busyWait = 0
		if rows < n {
			return
		}
	}
}

// free is how many more attempts this queue may start: its concurrency
// less the running ones and the slots the claims in flight asked for.
func (p *producer) free() int {
	return p.limit - int(p.active.Load()) - int(p.reserved.Load())
}

// claimAndLaunch claims up to n jobs (of the units only, for a side
// claim) and starts them, holding n slots reserved meanwhile; taken sees
// the claimed rows before they start. It reports how many it started;
// the claim's error, or errNotClaiming when claiming stopped.
func (p *producer) claimAndLaunch(ctx context.Context, n int, units []store.Unit, taken func(store.Claimed)) (int, error) {
	w := p.w
	p.reserved.Add(int64(n))
	defer p.reserved.Add(-int64(n))
	claimedAt := w.clock.Now()
	w.claimGate.RLock()
	if !w.claiming.Load() {
		w.claimGate.RUnlock()
		return 0, errNotClaiming
	}
	token := rand.Int64()
	got, err := p.claim(ctx, n, units, token)
	rows := got.Jobs
	w.claimGate.RUnlock()
	if err != nil {
		if ctx.Err() == nil {
			w.log.Error("claim jobs", "queue", p.queue, "side_claim", units != nil, "error", err)
		}
		var unknown *store.ClaimUnknownError
		if errors.As(err, &unknown) {
			p.noteLost(token)
		}
		return 0, err
	}
	if ctx.Err() != nil {
		// The worker stopped while the claim was in flight: give the
		// jobs back rather than start them.
		p.release(rows)
		return 0, errNotClaiming
	}
	if taken != nil {
		taken(got)
	}
	for _, row := range rows {
		p.active.Add(1)
		w.launch(p, row, claimedAt)
	}
	return len(rows), nil
}

// errNotClaiming: the worker stopped claiming, or stopped, meanwhile.
var errNotClaiming = errors.New("not claiming")

// claim takes up to n due jobs. The statement is not cancelled with ctx:
// pgx answers a cancelled context by closing the connection, and a claim
// the server commits after that would leave jobs running on a node that
// never heard of them, until their lease ran out (an attempt burnt, or a
// last attempt dead-lettered without running). The claim instead finishes,
// bounded by the lease TTL, and the caller releases what it got if the
// worker stopped meanwhile.
//
// A side claim (units set) takes only those units' jobs, from their start.
func (p *producer) claim(ctx context.Context, n int, units []store.Unit, token int64) (store.Claimed, error) {
	w := p.w
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.LeaseTTL)
	defer cancel()
	params := store.ClaimParams{Queue: p.queue, Limit: n, Token: token, LeaseTTL: w.cfg.LeaseTTL, Node: w.cfg.NodeID, Units: units}
	if units == nil {
		p.cursor.Prepare(&params, w.clock.Now(), w.cfg.CursorReset)
		params.Served, params.Grace = p.side.graceFor()
	}
	return w.store.Claim(claimCtx, params)
}

// noteLost remembers the lease token of a claim that failed and may have
// committed, its answer lost when the connection broke (a restart, a
// network cut; store.ClaimUnknownError), leaving jobs running under a
// lease this node never heard of until the lease ran out.
func (p *producer) noteLost(token int64) {
	p.lostMu.Lock()
	if len(p.lostTokens) == maxLostTokens {
		p.lostTokens = p.lostTokens[1:]
	}
	p.lostTokens = append(p.lostTokens, token)
	p.lostMu.Unlock()
	select {
	case p.w.lostWake <- struct{}{}:
	default:
	}
}

// releaseLost gives back what the failed claims noteLost remembered took,
// if anything, and reports whether any are left to try again (the
// database out of reach). It runs off the claim path, on the lease pool,
// and only for claims that may have committed: run before each claim
// after every failed one, it doubled pickup p50 under bench pressure
// backend-kill (31-47 ms without it, 56-96 ms with it).
func (p *producer) releaseLost(ctx context.Context) (left bool) {
	p.lostMu.Lock()
	tokens := append([]int64(nil), p.lostTokens...)
	p.lostMu.Unlock()
	if len(tokens) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w := p.w
	released, err := w.leases.ReleaseLostClaims(ctx, w.cfg.NodeID, tokens, "released: node "+w.cfg.NodeID+" never got the answer of the claim that started it")
	if err != nil {
		return true
	}
	p.lostMu.Lock()
	// Drop those tried; a side claim may have added one meanwhile (or
	// pushed the oldest out).
	p.lostTokens = slices.DeleteFunc(p.lostTokens, func(t int64) bool { return slices.Contains(tokens, t) })
	p.lostMu.Unlock()
	if len(released) > 0 {
		w.log.Info("gave back jobs a claim had started whose answer never arrived", "queue", p.queue, "jobs", len(released))
	}
	return false
}

// releaseLostClaims is the lostReleaser's loop: woken by a failed claim,
// it gives back what the failed claims of every queue started, trying
// again every 100 ms while the database is out of reach.
func (w *Worker) releaseLostClaims(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.lostWake:
		}
		for {
			left := false
			for _, p := range w.producers {
				left = p.releaseLost(ctx) || left
			}
			if !left {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// release gives back jobs claimed after the worker began to stop, without
// using up their attempt.
func (p *producer) release(rows []store.Job) {
	if len(rows) == 0 {
		return
	}
	leases := make([]store.Lease, len(rows))
	for i, r := range rows {
		leases[i] = store.Lease{ID: r.ID, Attempt: r.Attempt, Token: r.LeaseToken}
	}
	err := retryWrite(func(ctx context.Context) error {
		_, err := p.w.leases.ReleaseJobs(ctx, leases, "released: node "+p.w.cfg.NodeID+" stopped while claiming")
		return err
	})
	if err != nil {
		// Their leases expire and the lease rescuer retries them.
		p.w.log.Error("release jobs claimed while stopping", "queue", p.queue, "jobs", len(rows), "error", err)
	}
}

// adaptCap sizes the next claim from this one: a claim that got what it
// asked for lets the next ask for twice as many (up to the batch); a
// short one caps the next at twice what it got (at least minClaim). A
// queue that ran dry pays nothing for it: the next claim, woken by an
// insert, still asks for at least minClaim, and grows from there.
func (p *producer) adaptCap(got, asked int) {
	switch {
	case got >= asked:
		if p.claimCap > 0 {
			p.claimCap *= 2
			if p.claimCap >= p.w.cfg.ClaimBatch {
				p.claimCap = 0
			}
		}
	default:
		p.claimCap = max(2*got, minClaim)
	}
	p.capped.Store(p.claimCap > 0)
}

// minClaim is the least a capped claim asks for.
const minClaim = 16

// maxBusyWait bounds the wait before claiming again after a claim a
// limit's change kept from claiming (store.Claimed.Busy): a change
// commits in milliseconds, so the next claim comes soon after it.
const maxBusyWait = 100 * time.Millisecond

// finished frees a slot; if the queue had more work, claim again.
func (p *producer) finished() {
	p.active.Add(-1)
	if p.more.Load() {
		p.wake()
	}
	p.side.slotFreed()
}

func jitter(d time.Duration, frac float64) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*frac*float64(d))
}
