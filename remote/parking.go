package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/store"
)

// Waiting claims cost one look per tenant, not one claim per claim.
//
// A claim that finds nothing parks: it registers a waiter under its
// worker (one per worker: a later claim of the worker replaces it) and
// under its tenant's poller, and sleeps. The poller is the only thing
// that reads the database for the tenant's parked claims on this node:
// one statement (store.RemoteDueQueues) for every queue they wait on,
// every PollInterval, and one for the queues a notification names as it
// comes. It wakes the parked claims of a queue it saw work in, and they
// claim that queue. So K parked claims of a tenant cost one statement a
// PollInterval where each used to claim every one of its queues (up to
// MaxQueues) each: 30 parked claims of one queue drove 973 transactions a
// second, 100 drove 3,013.
//
// What still costs a claim per parked claim: work the poller sees that
// the parked claims do not take (kinds they do not handle, jobs a limit
// holds back) wakes them each poll, as long as it stays. Only the
// tenant's own work does that to the tenant's own claims, and
// MaxWaitingPerTenant bounds them.

// waiter is one parked claim.
type waiter struct {
	worker, tenant string
	queues         []string
	wake           chan struct{} // its poller saw work in one of its queues: see due
	control        chan struct{} // an order for its worker (drain, undrain)
	replaced       chan struct{} // closed when a later claim of the worker parks

	mu  sync.Mutex
	due []string // the queues seen with work since it last claimed
}

// takeDue returns the queues seen with work since the last call.
func (w *waiter) takeDue() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	due := w.due
	w.due = nil
	return due
}

func (w *waiter) markDue(q string) {
	w.mu.Lock()
	if !slices.Contains(w.due, q) {
		w.due = append(w.due, q)
	}
	w.mu.Unlock()
	signal(w.wake)
}

// poller looks for due work for the parked claims of one tenant on this
// node. Its fields but kick, stop and done are guarded by Workers.mu.
type poller struct {
	tenant  string
	claims  int                             // parked claims
	byQueue map[string]map[*waiter]struct{} // parked claims by queue
	pending map[string]struct{}             // queues to look at, named by notifications
	all     bool                            // look at every queue (listener reconnected)
	timer   clock.Timer                     // the next poll of every queue
	kick    chan struct{}                   // pending or all was set
	stop    chan struct{}                   // closed when its last claim leaves
}

// park registers a claim of worker (of tenant, on queues) as waiting.
// A parked claim of the same worker is replaced (it answers Replaced).
// With MaxWaitingPerTenant claims of the tenant parked it parks nothing
// and returns ErrTooManyWaiting; after EndWaits it parks nothing and
// returns nil, nil.
func (r *Workers) park(worker, tenant string, queues []string) (*waiter, error) {
	w := &waiter{worker: worker, tenant: tenant, queues: queues,
		wake: make(chan struct{}, 1), control: make(chan struct{}, 1), replaced: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return nil, nil // EndWaits: it answers after its first look
	}
	if old := r.parked[worker]; old != nil {
		r.unparkLocked(old)
		close(old.replaced)
	} else if p := r.pollers[tenant]; p != nil && p.claims >= r.cfg.MaxWaitingPerTenant {
		return nil, fmt.Errorf("%w: tenant %q has %d claims waiting on this node", ErrTooManyWaiting, tenant, p.claims)
	}
	r.parked[worker] = w
	p := r.pollers[tenant]
	if p == nil {
		// Its first poll's timer is armed here, before the claim's first
		// look: work that becomes due after that look is seen by a poll.
		p = &poller{tenant: tenant, byQueue: map[string]map[*waiter]struct{}{}, pending: map[string]struct{}{},
			timer: r.clock.NewTimer(jitter(r.cfg.PollInterval, 0.1)), kick: make(chan struct{}, 1), stop: make(chan struct{})}
		r.pollers[tenant] = p
		r.polls.Add(1)
		go r.poll(p)
	}
	p.claims++
	for _, q := range queues {
		if p.byQueue[q] == nil {
			p.byQueue[q] = map[*waiter]struct{}{}
		}
		p.byQueue[q][w] = struct{}{}
	}
	return w, nil
}

// unpark removes a claim that stopped waiting (if a later claim has not
// replaced it already).
func (r *Workers) unpark(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.parked[w.worker] == w {
		r.unparkLocked(w)
	}
}

func (r *Workers) unparkLocked(w *waiter) {
	delete(r.parked, w.worker)
	p := r.pollers[w.tenant]
	for _, q := range w.queues {
		delete(p.byQueue[q], w)
		if len(p.byQueue[q]) == 0 {
			delete(p.byQueue, q)
		}
	}
	if p.claims--; p.claims == 0 {
		delete(r.pollers, w.tenant)
		close(p.stop)
	}
}

// poll is a poller's loop: it looks at every queue of its parked claims
// each PollInterval (±10%), and at the queues notifications name as they
// come (those that come during a look make one more look after it), and
// wakes the claims parked on a queue that has work.
func (r *Workers) poll(p *poller) {
	defer r.polls.Done()
	for {
		r.mu.Lock()
		timer := p.timer
		r.mu.Unlock()
		select {
		case <-p.stop:
			timer.Stop()
			return
		case <-p.kick:
		case <-timer.C():
			r.mu.Lock()
			p.all = true
			p.timer = r.clock.NewTimer(jitter(r.cfg.PollInterval, 0.1))
			r.mu.Unlock()
		}
		r.mu.Lock()
		var queues []string
		for q := range p.byQueue {
			if _, ok := p.pending[q]; ok || p.all {
				queues = append(queues, q)
			}
		}
		clear(p.pending)
		p.all = false
		r.mu.Unlock()
		if len(queues) == 0 {
			continue
		}
		// Not the callers' contexts: the look serves every parked claim of
		// the tenant. Bounded like a claim.
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.LeaseTTL)
		due, err := r.store.RemoteDueQueues(ctx, p.tenant, queues)
		cancel()
		if err != nil {
			// The claims claim every one of these queues themselves: work
			// the look could not see still reaches them, at a claim's cost.
			r.log.Error("look for due work for waiting remote claims", "tenant", p.tenant, "queues", len(queues), "error", err)
			due = queues
		}
		r.mu.Lock()
		for _, q := range due {
			for w := range p.byQueue[q] {
				w.markDue(q)
			}
		}
		r.mu.Unlock()
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// WakeQueue makes the pollers of the claims waiting on queue look at it.
func (r *Workers) WakeQueue(queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pollers {
		if _, ok := p.byQueue[queue]; ok {
			p.pending[queue] = struct{}{}
			signal(p.kick)
		}
	}
}

func (r *Workers) wakeWorker(worker string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.parked[worker]; w != nil {
		signal(w.control)
	}
}

// WakeAll makes every poller look at all its queues, e.g. after
// notifications may have been missed (the listener reconnected).
func (r *Workers) WakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pollers {
		p.all = true
		signal(p.kick)
	}
}

// Waiting returns how many claims wait for work on this node.
func (r *Workers) Waiting() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.parked)
}

// EndWaits makes every waiting claim, and every later one, return at once
// with what it has: for a node that is shutting down, so that its remote
// workers claim from another node. Idempotent.
func (r *Workers) EndWaits() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended {
		r.ended = true
		close(r.ending)
	}
}

// controlMessage is a control notification as remote workers read it.
type controlMessage struct {
	Op    string `json:"op"`
	Node  string `json:"node"`
	Queue string `json:"queue"`
}

// HandleNotification fans a notification out to the waiting claims: a
// queue's due job (store.ChannelJobs) or a queue resumed makes the
// pollers of the claims on that queue look at it; a drain or undrain
// order for a worker (store.ChannelControl) wakes its claim. It does not
// block.
func (r *Workers) HandleNotification(channel, payload string) {
	switch channel {
	case store.ChannelJobs:
		r.WakeQueue(payload)
	case store.ChannelControl:
		var m controlMessage
		if json.Unmarshal([]byte(payload), &m) != nil {
			return
		}
		switch m.Op {
		case "resume":
			r.WakeQueue(m.Queue)
		case "drain", "undrain":
			r.wakeWorker(m.Node)
		}
	}
}
