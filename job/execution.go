package job

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/store"
)

// execution is one running attempt on this node.
type execution struct {
	job      *Job
	lease    store.Lease
	ctx      context.Context
	cancel   context.CancelCauseFunc
	started  time.Time
	producer *producer
	// span is the attempt's span (nil: tracing off), ended once its
	// outcome is written.
	span trace.Span
	// km are the metric series of the job's queue and kind, looked up
	// once per attempt.
	km *kindMetrics

	mu        sync.Mutex
	renewedAt time.Time // monotonic: when the lease was last set
	finished  bool      // the handler returned; its outcome is being written (the lease still renewed)
	released  bool      // the node gave the lease back; drop the outcome
	lost      bool      // a heartbeat was refused: another attempt owns the job
}

func (w *Worker) launch(p *producer, row store.Job, claimedAt time.Time) {
	j := FromRow(row)
	j.st = w.store
	ctx, cancel := context.WithCancelCause(context.Background())
	var span trace.Span
	if w.tracer != nil {
		_, known := w.cfg.Registry.lookup(j.Kind)
		ctx, span = w.tracer.start(ctx, j, known)
	}
	e := &execution{job: j, lease: store.Lease{ID: row.ID, Attempt: row.Attempt, Token: row.LeaseToken},
		cancel: cancel, started: w.clock.Now(), renewedAt: claimedAt, producer: p, span: span, km: w.metrics.forKind(j.Queue, j.Kind)}
	if j.AttemptedAt != nil {
		e.km.queueWait.Observe(max(0, j.AttemptedAt.Sub(j.RunAt).Seconds()))
	}
	e.ctx = ctx
	w.mu.Lock()
	w.executing[e.lease] = e
	w.mu.Unlock()
	w.handlers.Add(1)
	// Hand the attempt to an idle handler goroutine, or start one: they
	// outlive their jobs, so a busy queue does not pay for a new goroutine
	// (and its stack growth) per job.
	select {
	case p.work <- e:
	default:
		go p.serve(e)
	}
}

// serve runs attempts, one after another, until the worker stops.
func (p *producer) serve(e *execution) {
	for {
		p.w.execute(e)
		select {
		case e = <-p.work:
		case <-p.quit:
			return
		}
	}
}

func (w *Worker) execute(e *execution) {
	defer w.handlers.Done()
	defer e.producer.finished()
	defer e.cancel(nil)
	w.run(e.ctx, e)
}

// run executes one attempt and records its outcome.
func (w *Worker) run(ctx context.Context, e *execution) {
	j := e.job
	reg, known := w.cfg.Registry.lookup(j.Kind)
	timeout := j.Timeout
	if timeout == 0 {
		timeout = reg.opts.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, ErrTimeout)
		defer cancel()
	}
	var (
		err     error
		stack   string
		errKind = "error"
	)
	start := time.Now()
	if !known {
		err, errKind = fmt.Errorf("no handler for kind %q on node %s", j.Kind, w.cfg.NodeID), "unknown_kind"
	} else if err, stack = callHandler(ctx, reg.handler, j); stack != "" {
		errKind = "panic"
	}
	e.km.runDuration.Observe(time.Since(start).Seconds())

	e.mu.Lock()
	released := e.released
	e.finished = true
	e.mu.Unlock()
	// The attempt stays in executing, its lease renewed, until its outcome
	// is written: a completion queued behind a slow database must not lose
	// the lease it completes (an attempt spent, a last attempt dead-lettered
	// after its handler succeeded). The completer forgets those it takes.
	queued := false
	defer func() {
		if !queued {
			w.forget([]store.Lease{e.lease})
		}
	}()
	if released {
		// The lease went back at the drain deadline; another attempt owns the job.
		endAttempt(e.span, attemptEnd{outcome: OutcomeReleased})
		return
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrLeaseLost) {
		w.log.Debug("attempt ended after losing its lease; outcome discarded", "job_id", j.ID, "attempt", j.Attempt)
		endAttempt(e.span, attemptEnd{outcome: OutcomeLost, err: ErrLeaseLost})
		return
	}
	if err != nil && errors.Is(cause, ErrTimeout) && errKind == "error" {
		errKind = "timeout"
	}
	queued = w.record(e, err, errKind, stack, cause, backoffFor(reg, known))
}

func backoffFor(reg registration, known bool) Backoff {
	if known && reg.opts.Backoff != nil {
		return reg.opts.Backoff
	}
	return DefaultBackoff
}

// callHandler runs the handler, turning a panic into an error and a stack.
func callHandler(ctx context.Context, h Handler, j *Job) (err error, stack string) {
	defer func() {
		if r := recover(); r != nil {
			err, stack = fmt.Errorf("panic: %v", r), string(debug.Stack())
		}
	}()
	return h.Work(ctx, j), ""
}
