package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Lease names one attempt of a job as its holder knows it: every write a
// remote worker makes for the attempt carries it.
type Lease struct {
	JobID   int64
	Attempt int
	Token   int64
}

func (l Lease) store() store.Lease {
	return store.Lease{ID: l.JobID, Attempt: l.Attempt, Token: l.Token}
}

// Claim asks for jobs for a remote worker.
type Claim struct {
	// Tenant is the caller's tenant: a tenant's token may claim only for
	// its own workers; "" (a spanning token) for any worker.
	Tenant string
	Worker string
	// Max is the most jobs to take, 1 to Config.MaxClaim.
	Max int
	// Wait is how long to wait for a job when none is due: 0 answers at
	// once, at most Config.MaxWait.
	Wait time.Duration
	// MaxBytes bounds the jobs returned (store.Job.WireBytes, summed;
	// 0: no bound): the first job is always returned, and jobs claimed
	// past the bound are released in their claim's transaction, due again
	// at once for the next claim (store.ClaimParams.MaxBytes).
	MaxBytes int
}

// ClaimedJob is a job a remote worker claimed: its attempt is running
// under Lease until LeaseExpiresAt (database clock) unless heartbeated.
type ClaimedJob struct {
	*job.Job
	Lease          Lease
	LeaseExpiresAt time.Time
}

// ClaimResult is what a claim took.
type ClaimResult struct {
	Jobs []ClaimedJob
	// Draining: the worker was drained. It gets no more jobs; it should
	// finish (or fail) those it runs, then stop (Leave). Its running jobs
	// are released at the drain deadline.
	Draining bool
	// Replaced: a later claim of the same worker came to wait on this
	// node, and this one answered at once, empty (one claim of a worker
	// waits at a time). A worker that sees it has a second claim loop, or
	// a claim it gave up on that the node still held.
	Replaced bool
}

// Claim takes up to c.Max due jobs of the worker's tenant, queues and
// kinds, each under a new lease, through the same fairness and limit
// admission as a node's claim. With none due it waits up to c.Wait for
// one: it parks, and the tenant's poller on this node looks for due work
// in its queues for every parked claim of the tenant at once, woken by
// the notifications that wake nodes (an insert, a retry, a queue resumed)
// and every PollInterval; a claim claims again only from a queue the
// poller saw work in. One claim of a worker waits at a time: a later one
// replaces it (it answers Replaced, empty). It returns early, empty, when
// ctx ends or EndWaits is called. Jobs claimed after ctx ended are
// released, not returned. Errors: *job.ValidationError, ErrUnknownWorker,
// ErrWorkerGone, ErrTooManyWaiting (the tenant has MaxWaitingPerTenant
// claims waiting on this node, and none of the worker's queues had a job
// for this one).
func (r *Workers) Claim(ctx context.Context, c Claim) (ClaimResult, error) {
	switch {
	case c.Max < 1 || c.Max > r.cfg.MaxClaim:
		return ClaimResult{}, &job.ValidationError{Field: "max", Message: fmt.Sprintf("must be between 1 and %d, got %d", r.cfg.MaxClaim, c.Max)}
	case c.Wait < 0 || c.Wait > r.cfg.MaxWait:
		return ClaimResult{}, &job.ValidationError{Field: "wait", Message: fmt.Sprintf("must be between 0 and %s, got %s", r.cfg.MaxWait, c.Wait)}
	}
	w, err := r.worker(ctx, c.Tenant, c.Worker)
	if err != nil || w.Draining {
		return ClaimResult{Draining: w.Draining}, err
	}
	deadline := r.clock.Now().Add(c.Wait)
	var wt *waiter
	var tooMany error
	if c.Wait > 0 {
		// Parked before the first look, so that a job inserted between the
		// look and the wait still wakes it.
		wt, tooMany = r.park(c.Worker, w.Tenant, w.Queues)
		if wt != nil {
			defer r.unpark(wt)
		}
	}
	queues := w.Queues
	if len(queues) > 1 {
		// One look for all its queues rather than a claim of each: a
		// claim of a worker whose queues are empty costs one statement.
		if queues, err = r.store.RemoteDueQueues(ctx, w.Tenant, queues); err != nil {
			return ClaimResult{}, err
		}
	}
	busyWait := time.Duration(0)
	for {
		jobs, busy, err := r.claimOnce(c.Worker, w, queues, c.Max, c.MaxBytes)
		if err != nil {
			return ClaimResult{}, err
		}
		if len(jobs) > 0 {
			if ctx.Err() != nil {
				// The caller went away while the claim ran: nobody will work
				// these jobs, so give them back now rather than at lease expiry.
				r.release(jobs, "released: remote worker "+c.Worker+" went away while claiming")
				return ClaimResult{}, ctx.Err()
			}
			return ClaimResult{Jobs: jobs}, nil
		}
		if tooMany != nil {
			return ClaimResult{}, tooMany
		}
		left := deadline.Sub(r.clock.Now())
		if wt == nil || left <= 0 {
			return ClaimResult{}, nil
		}
		next := left
		if busy {
			// A limit was being changed: it commits at once, so claim
			// again shortly, backing off while it stays in the way.
			busyWait = min(max(2*busyWait, 10*time.Millisecond), maxBusyWait, r.cfg.PollInterval)
			next = min(left, busyWait)
		} else {
			busyWait = 0
		}
		timer := r.clock.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ClaimResult{}, nil
		case <-r.ending:
			timer.Stop()
			return ClaimResult{}, nil
		case <-wt.replaced:
			timer.Stop()
			return ClaimResult{Replaced: true}, nil
		case <-wt.wake:
			queues = wt.takeDue()
		case <-wt.control:
			// A drain (or undrain) order for this worker: read it again.
			if w, err = r.worker(ctx, c.Tenant, c.Worker); err != nil || w.Draining {
				timer.Stop()
				return ClaimResult{Draining: w.Draining}, err
			}
			queues = w.Queues
		case <-timer.C():
			if !busy {
				return ClaimResult{}, nil // its wait is over
			}
			queues = w.Queues // claim again after a limit's change
		}
		timer.Stop()
	}
}

// worker reads remote worker id for a claim, recording the call.
func (r *Workers) worker(ctx context.Context, tenant, id string) (store.RemoteWorkerRow, error) {
	w, err := r.store.TouchRemoteWorker(ctx, id, tenant)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return w, fmt.Errorf("%w %q", ErrUnknownWorker, id)
	case err != nil:
		return w, err
	case w.State == "dead" && w.LeftReason == "drained":
		// Drained to the end: it is told what a draining worker is, and
		// stops.
		return store.RemoteWorkerRow{Draining: true}, nil
	case w.State == "dead":
		return store.RemoteWorkerRow{}, fmt.Errorf("%w: %q left or was lost; register again", ErrWorkerGone, id)
	}
	slices.Sort(w.Queues)
	return w, nil
}

// claimOnce claims up to max jobs from queues (the worker's, or those of
// them its poller saw work in), starting at a rotating queue so that each
// gets its turn to fill a claim. The statements do not follow the
// caller's context: a claim the server commits after pgx gave up on it
// would leave jobs running for a worker that never heard of them. They
// are bounded by the lease TTL instead. The claims of the queues share
// one budget of maxBytes (0: none).
func (r *Workers) claimOnce(worker string, w store.RemoteWorkerRow, queues []string, limit, maxBytes int) (out []ClaimedJob, busy bool, err error) {
	if len(queues) == 0 {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.LeaseTTL)
	defer cancel()
	token := rand.Int64()
	start := int(r.rotor.Add(1))
	used := 0
	for i := range queues {
		n := limit - len(out)
		if n <= 0 || maxBytes > 0 && used >= maxBytes {
			break
		}
		q := queues[(start+i)%len(queues)]
		cur := r.cursor(worker, q)
		params := store.ClaimParams{Queue: q, Limit: n, Token: token, LeaseTTL: r.cfg.LeaseTTL, Node: worker,
			Remote: true, Tenant: w.Tenant, Kinds: w.Kinds, MaxBytes: maxBytes, BytesUsed: used}
		cur.mu.Lock()
		cur.Prepare(&params, r.clock.Now(), r.cfg.CursorReset)
		cur.mu.Unlock()
		got, err := r.store.Claim(ctx, params)
		if err != nil {
			if len(out) > 0 {
				r.release(out, "released: the remote worker's claim failed part way")
			}
			return nil, false, err
		}
		if got.Busy {
			busy = true // a limit was being changed: this queue saw nothing
			continue
		}
		cur.mu.Lock()
		cur.Advance(got, n, r.clock.Now())
		cur.mu.Unlock()
		rows := got.Jobs
		for _, row := range rows {
			used += row.WireBytes()
			j := job.FromRow(row)
			if j.AttemptedAt != nil {
				r.metrics.ObserveQueueWait(j.Queue, j.Kind, max(0, j.AttemptedAt.Sub(j.RunAt)))
			}
			cj := ClaimedJob{Job: j, Lease: Lease{JobID: row.ID, Attempt: row.Attempt, Token: row.LeaseToken}}
			if row.LeaseExpiresAt != nil {
				cj.LeaseExpiresAt = *row.LeaseExpiresAt
			}
			out = append(out, cj)
		}
	}
	return out, busy, nil
}

// release gives claimed jobs back without using up their attempts.
func (r *Workers) release(jobs []ClaimedJob, reason string) {
	leases := make([]store.Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = j.Lease.store()
	}
	err := r.retryWrite(func(ctx context.Context) error {
		_, err := r.store.ReleaseJobs(ctx, leases, reason)
		return err
	})
	if err != nil {
		// Their leases expire and the lease rescuer runs them again.
		r.log.Error("release claimed jobs", "jobs", len(jobs), "error", err)
	}
}

// retryWrite runs fn with a fresh timeout, retrying with backoff for up to
// about half a minute, as job's worker does for its outcomes: a release
// must be written even while the node stops, so fn's context does not
// derive from any caller's.
func (r *Workers) retryWrite(fn func(ctx context.Context) error) error {
	delay := 50 * time.Millisecond
	var err error
	for attempt := 0; attempt < 8; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = fn(ctx)
		cancel()
		if err == nil || err == store.ErrStale || err == store.ErrNotFound {
			return err
		}
		clock.Sleep(context.Background(), r.clock, delay)
		delay = min(delay*2, 5*time.Second)
	}
	return err
}

func jitter(d time.Duration, frac float64) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*frac*float64(d))
}

// cursorKey names a remote worker's claims of one queue.
type cursorKey struct{ worker, queue string }

// maxCursorKeys bounds the claim cursors a node keeps for remote
// workers; beyond it they start afresh (a cursor only saves work).
const maxCursorKeys = 10000

// maxBusyWait bounds the wait before claiming again after a claim a
// limit's change kept from claiming (store.Claimed.Busy): a change
// commits in milliseconds, so the next claim comes soon after it.
const maxBusyWait = 100 * time.Millisecond

func (r *Workers) cursor(worker, queue string) *claimCursor {
	k := cursorKey{worker, queue}
	r.cursorMu.Lock()
	defer r.cursorMu.Unlock()
	c := r.cursors[k]
	if c == nil {
		if len(r.cursors) >= maxCursorKeys {
			clear(r.cursors)
		}
		c = &claimCursor{}
		r.cursors[k] = c
	}
	return c
}

// claimCursor is a remote worker's store.ClaimCursor for one queue, on
// the node its claims come to: a hint, as claims that come over HTTP may
// alternate between nodes (they then only read more). Claims of one
// worker may run at once, hence the lock.
type claimCursor struct {
	mu sync.Mutex
	store.ClaimCursor
}
