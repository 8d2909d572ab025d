package job

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/store"
)

// completer batches completions: while one batch is being written, the
// next accumulates, so a busy node writes many completions per statement
// and an idle one writes each at once.
type completer struct {
	store    *store.Store
	metrics  *Metrics
	log      hclog.Logger
	maxBatch int
	// written is called with the queues of each batch written: their
	// attempts are over, so limit slots they held are free now.
	written func(queues map[string]bool)
	// ended is called with each batch's leases once the completer is
	// done with them (written, refused, or given up on): until then
	// their leases are renewed like running attempts'.
	ended func(leases []store.Lease)

	// hold, when set (tests only), is called before each batch is written.
	hold atomic.Pointer[func()]

	mu     sync.Mutex
	closed bool
	in     chan completion
	done   chan struct{}
}

type completion struct {
	c     store.Completion
	queue string
	kind  string
	km    *kindMetrics // queue's and kind's series
	span  trace.Span   // the attempt's, ended once written; nil: tracing off
}

func newCompleter(st *store.Store, m *Metrics, log hclog.Logger, maxBatch int, written func(map[string]bool), ended func([]store.Lease)) *completer {
	c := &completer{store: st, metrics: m, log: log, maxBatch: maxBatch, written: written, ended: ended,
		in: make(chan completion, 4*maxBatch), done: make(chan struct{})}
	go c.loop()
	return c
}

// add queues a completion. After close it writes the completion itself.
func (c *completer) add(x completion) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.flush([]completion{x})
		return
	}
	// Sending under the lock keeps close from racing a send; the channel
	// drains continuously, so the wait is short.
	c.in <- x
	c.mu.Unlock()
}

// close flushes what is queued and stops the loop.
func (c *completer) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.in)
	}
	c.mu.Unlock()
	<-c.done
}

func (c *completer) loop() {
	defer close(c.done)
	batch := make([]completion, 0, c.maxBatch)
	for x := range c.in {
		batch = append(batch[:0], x)
	drain:
		for len(batch) < c.maxBatch {
			select {
			case y, ok := <-c.in:
				if !ok {
					break drain
				}
				batch = append(batch, y)
			default:
				break drain
			}
		}
		c.flush(batch)
	}
}

// flush writes one batch, retrying while the database is unreachable. If
// it never gets through, the leases expire and the jobs run again: that is
// the at-least-once contract, not a loss.
func (c *completer) flush(batch []completion) {
	cs := make([]store.Completion, len(batch))
	for i, x := range batch {
		cs[i] = x.c
	}
	if c.ended != nil {
		defer func() {
			leases := make([]store.Lease, len(cs))
			for i := range cs {
				leases[i] = cs[i].Lease
			}
			c.ended(leases)
		}()
	}
	if hold := c.hold.Load(); hold != nil {
		(*hold)()
	}
	var accepted []int64
	err := retryWrite(func(ctx context.Context) error {
		var err error
		accepted, err = c.store.CompleteJobs(ctx, nil, cs)
		return err
	})
	if err != nil {
		c.log.Error("record completions; their jobs will run again after their leases expire", "jobs", len(batch), "error", err)
		for _, x := range batch {
			endAttempt(x.span, attemptEnd{outcome: OutcomeLost, err: err})
		}
		return
	}
	ok := make(map[int64]bool, len(accepted))
	for _, id := range accepted {
		ok[id] = true
	}
	if c.written != nil {
		queues := map[string]bool{}
		for _, x := range batch {
			queues[x.queue] = true
		}
		c.written(queues)
	}
	for _, x := range batch {
		if ok[x.c.ID] {
			x.km.completed.Inc()
			endAttempt(x.span, attemptEnd{outcome: OutcomeCompleted})
		} else {
			c.metrics.counter(c.metrics.stale, x.queue, x.kind, "complete").Inc()
			c.log.Warn("completion refused: the attempt no longer owns the job", "job_id", x.c.ID, "attempt", x.c.Attempt)
			endAttempt(x.span, attemptEnd{outcome: OutcomeLost, err: store.ErrStale})
		}
	}
}

// retryWrite runs fn with a fresh timeout, retrying with backoff for up to
// about half a minute; at once, a few times in a row, when the server had
// terminated its connection (the pool dropped it; the next is likely
// alive). Outcomes must be written even while the node stops, so fn's
// context does not derive from any caller's.
func retryWrite(fn func(ctx context.Context) error) error {
	delay := 50 * time.Millisecond
	var err error
	for waits, lost := 0, 0; waits < 8; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = fn(ctx)
		cancel()
		if err == nil || isFinal(err) {
			return err
		}
		if store.ConnectionLost(err) && lost < maxImmediateRetries {
			lost++
			continue
		}
		waits++
		time.Sleep(delay)
		delay = min(delay*2, 5*time.Second)
	}
	return err
}

func isFinal(err error) bool {
	return err == store.ErrStale || err == store.ErrNotFound
}
