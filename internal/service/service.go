// Package service is the start/stop plumbing shared by Gaffer's long-running
// loops: Start is non-blocking and idempotent, Stop cancels the loop and
// waits for it to return.
package service

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/internal/clock"
)

// ErrNotLeader is returned by leader-only work attempted by a node that
// cannot prove it leads. Periodic loops treat it as a pause, not a fault.
var ErrNotLeader = errors.New("not the leader")

// Runner runs one loop function in a goroutine. The zero value is ready.
type Runner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs loop in a new goroutine with a context that Stop cancels (and
// that ends with ctx). It does nothing if the loop is already running.
func (r *Runner) Start(ctx context.Context, loop func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	r.done = done
	go func() {
		defer close(done)
		loop(ctx)
	}()
}

// Stop cancels the loop and waits for it to return. Stop is idempotent;
// the runner can be started again afterwards.
func (r *Runner) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel, r.done = nil, nil
	r.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// Running reports whether the loop is running.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done != nil
}

// StartEvery starts a loop that calls fn at once and then every interval
// of clk, jittered by ±10% so that nodes started together spread out,
// until Stop. A non-nil error from fn (other than the loop's own
// cancellation) is logged as onError, at the loop boundary.
func (r *Runner) StartEvery(ctx context.Context, clk clock.Clock, interval time.Duration, fn func(ctx context.Context) error, log hclog.Logger, onError string) {
	r.Start(ctx, func(ctx context.Context) {
		for {
			switch err := fn(ctx); {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, ErrNotLeader):
				log.Debug(onError+": not the leader now", "error", err)
			default:
				log.Error(onError, "error", err)
			}
			if !clock.Sleep(ctx, clk, interval+time.Duration((rand.Float64()*0.2-0.1)*float64(interval))) {
				return
			}
		}
	})
}
