package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
	"github.com/gafferhq/gaffer/store"
)

// Worker claims jobs of its queues and runs their handlers. See the
// package documentation for the attempt life cycle.
type Worker struct {
	cfg   WorkerConfig
	store *store.Store
	// leases is the store of WorkerConfig.LeasePool (or store): the
	// watcher's heartbeats and checks, and releases.
	leases  *store.Store
	log     hclog.Logger
	metrics *Metrics
	tracer  *attemptTracer // nil: tracing off
	clock   clock.Clock    // the claim, poll and heartbeat timing

	producers map[string]*producer
	claiming  atomic.Bool
	// deaf is set while notifications cannot reach this worker (its
	// node's LISTEN connection is lost): the claim loops poll every
	// deafPoll meanwhile.
	deaf atomic.Bool
	// claimGate is held (read) by each claim from its last look at
	// claiming until its rows are taken, so SetClaiming(false) can wait
	// for the claims already past that look.
	claimGate sync.RWMutex
	watcher   service.Runner
	handlers  sync.WaitGroup
	// lostReleaser gives back, in the background, what failed claims may
	// have started (producer.noteLost); lostWake starts it.
	lostReleaser service.Runner
	lostWake     chan struct{}

	mu        sync.Mutex
	started   bool
	stopped   bool
	executing map[store.Lease]*execution
	completer *completer
	// OnStale, when set, is called for every write refused because the
	// attempt no longer owned its job. Tests use it.
	onStale func(id int64, op string)
}

// NewWorker validates cfg and returns a stopped worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	w := &Worker{
		cfg: cfg, store: store.New(cfg.Pool), leases: store.New(cfg.LeasePool), log: cfg.Logger.Named("worker"), metrics: cfg.Metrics, clock: clock.Real,
		tracer:    newAttemptTracer(cfg.TracerProvider, cfg.NodeID),
		producers: map[string]*producer{}, executing: map[store.Lease]*execution{}, lostWake: make(chan struct{}, 1),
	}
	for q, n := range cfg.Queues {
		p := &producer{w: w, queue: q, limit: n, wakeCh: make(chan struct{}, 1),
			work: make(chan *execution), quit: make(chan struct{})}
		p.side.wake = make(chan struct{}, 1)
		w.producers[q] = p
	}
	w.claiming.Store(true)
	return w, nil
}

// Start begins claiming and running jobs. It does not block; it is
// idempotent. ctx bounds the claim loops (cancelling it stops claiming),
// not the running handlers: use Stop to end those.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	if w.stopped {
		return errors.New("worker: cannot restart a stopped worker")
	}
	w.started = true
	w.completer = newCompleter(w.store, w.metrics, w.log, w.cfg.ClaimBatch, w.wakeAfterWrite, w.forget)
	for _, p := range w.producers {
		p.runner.Start(ctx, p.loop)
	}
	w.watcher.Start(ctx, w.watch)
	w.lostReleaser.Start(ctx, w.releaseLostClaims)
	return nil
}

// SetClaiming turns claiming on or off without stopping running jobs:
// drain turns it off, undrain back on. Turning it off returns once no
// claim is in flight: no job is claimed by this worker after it returns.
func (w *Worker) SetClaiming(on bool) {
	w.claiming.Store(on)
	if on {
		w.WakeAll()
		return
	}
	w.claimGate.Lock() // waits out the claims in flight; later ones see the flag
	w.claimGate.Unlock()
}

// Claiming reports whether the worker claims new jobs.
func (w *Worker) Claiming() bool { return w.claiming.Load() }

// InFlight returns how many attempts are running on this node.
func (w *Worker) InFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.executing)
}

// Wake makes queue's claim loop look for work now.
func (w *Worker) Wake(queue string) {
	if p := w.producers[queue]; p != nil {
		p.wake()
	}
}

// wakeAfterWrite wakes the claim loops of queues whose last claim came
// back short once attempts of theirs are recorded over: the slots those
// attempts held under limits are free only now, not when their handlers
// returned.
func (w *Worker) wakeAfterWrite(queues map[string]bool) {
	for q := range queues {
		if p := w.producers[q]; p != nil && p.capped.Load() {
			p.wake()
		}
	}
}

// SetListening says whether notifications reach this worker (its node's
// LISTEN connection is in place). While they do not, the claim loops poll
// every 50 ms instead of every PollInterval, so that a lost connection
// costs milliseconds, not a poll; the default is that they do.
func (w *Worker) SetListening(on bool) {
	if w.deaf.Swap(!on) != !on && !on {
		w.WakeAll() // re-armed with the short poll
	}
}

// deafPoll is the claim loops' poll while notifications cannot arrive.
const deafPoll = 50 * time.Millisecond

// WakeAll wakes every queue's claim loop, e.g. after notifications may
// have been missed.
func (w *Worker) WakeAll() {
	for _, p := range w.producers {
		p.wake()
	}
}

// CancelLocal cancels the handler of job id if it runs here, with cause
// ErrCancelled. It reports whether it did. (One node can briefly run two
// attempts of a job: one that lost its lease and the one that took over.)
func (w *Worker) CancelLocal(id int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	found := false
	for l, e := range w.executing {
		if l.ID == id {
			e.cancel(ErrCancelled)
			found = true
		}
	}
	return found
}

type controlMessage struct {
	Op    string `json:"op"`
	ID    int64  `json:"id"`
	Queue string `json:"queue"`
}

// HandleNotification reacts to a NOTIFY on store.ChannelJobs,
// store.ChannelUnits or store.ChannelControl. It does not block.
func (w *Worker) HandleNotification(channel, payload string) {
	switch channel {
	case store.ChannelJobs:
		w.Wake(payload)
	case store.ChannelUnits:
		if q, u, ok := store.ParseUnitNotification(payload); ok {
			w.unitNotified(q, u)
		}
	case store.ChannelControl:
		var m controlMessage
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			w.log.Warn("ignoring malformed control message", "payload", payload, "error", err)
			return
		}
		switch m.Op {
		case "cancel":
			w.CancelLocal(m.ID)
		case "resume":
			w.Wake(m.Queue)
		}
	}
}

// Stop stops claiming, waits for running handlers until ctx ends, then
// cancels the handlers still running (cause ErrStopping) and releases
// their leases so that another node can claim those jobs at once, without
// using up an attempt. Completions are flushed before Stop returns.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.stopped {
		w.stopped = true
		w.mu.Unlock()
		return nil
	}
	w.stopped = true
	w.mu.Unlock()

	w.claiming.Store(false)
	for _, p := range w.producers {
		p.runner.Stop()
	}
	drained := waitGroupDone(&w.handlers)
	var releaseErr error
	select {
	case <-drained:
	case <-ctx.Done():
		releaseErr = w.ReleaseRunning()
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			w.log.Warn("handlers still running after their jobs were released; not waiting for them")
		}
	}
	// The completions still queued are written with their leases renewed:
	// the watcher stops after them.
	w.completer.close()
	w.watcher.Stop()
	w.lostReleaser.Stop()
	for _, p := range w.producers {
		close(p.quit)
	}
	return releaseErr
}

// ReleaseRunning cancels every handler still running (cause ErrStopping)
// and gives its lease back, so that another node claims the job at once
// without it using up an attempt. Drain calls it at the deadline.
func (w *Worker) ReleaseRunning() error {
	w.mu.Lock()
	var leases []store.Lease
	for _, e := range w.executing {
		e.mu.Lock()
		if !e.finished {
			e.released = true
			leases = append(leases, e.lease)
			e.cancel(ErrStopping)
		}
		e.mu.Unlock()
	}
	w.mu.Unlock()
	if len(leases) == 0 {
		return nil
	}
	var released []int64
	err := retryWrite(func(ctx context.Context) error {
		var err error
		released, err = w.leases.ReleaseJobs(ctx, leases, "released: node "+w.cfg.NodeID+" stopped before the job finished")
		return err
	})
	if err != nil {
		return fmt.Errorf("release %d running jobs: %w", len(leases), err)
	}
	w.log.Info("released running jobs at the drain deadline", "released", len(released), "running", len(leases))
	return nil
}

// forget stops tracking attempts whose outcomes the completer is done
// with: their leases are no longer renewed.
func (w *Worker) forget(leases []store.Lease) {
	w.mu.Lock()
	for _, l := range leases {
		delete(w.executing, l)
	}
	w.mu.Unlock()
}

func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

// RunningJobs lists the ids of attempts running on this node, sorted.
func (w *Worker) RunningJobs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, 0, len(w.executing))
	for l := range w.executing {
		ids = append(ids, l.ID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Queues returns the queues this worker claims from, with concurrency.
func (w *Worker) Queues() map[string]int {
	out := make(map[string]int, len(w.cfg.Queues))
	for q, n := range w.cfg.Queues {
		out[q] = n
	}
	return out
}
