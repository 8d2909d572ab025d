package service_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/service"
)

// StartEvery calls at once, then every interval ±10%, through errors, and
// Stop ends it. In a synctest bubble the real clock's time is the
// bubble's: an hour of it passes without waiting.
func TestStartEveryKeepsItsBeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		var (
			mu    sync.Mutex
			calls []time.Time
		)
		var r service.Runner
		start := time.Now()
		r.StartEvery(context.Background(), clock.Real, interval, func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now())
			if len(calls)%2 == 0 {
				return errors.New("a failing run does not end the loop")
			}
			return nil
		}, hclog.NewNullLogger(), "test")
		time.Sleep(time.Hour)
		r.Stop()
		if r.Running() {
			t.Fatal("running after Stop")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(calls) < 55 || len(calls) > 68 {
			t.Fatalf("%d calls in an hour at a %s interval", len(calls), interval)
		}
		if !calls[0].Equal(start) {
			t.Fatalf("first call after %s, want at once", calls[0].Sub(start))
		}
		for i := 1; i < len(calls); i++ {
			if gap := calls[i].Sub(calls[i-1]); gap < interval*9/10 || gap > interval*11/10 {
				t.Fatalf("call %d came %s after the one before", i, gap)
			}
		}
		n := len(calls)
		mu.Unlock()
		time.Sleep(time.Hour)
		mu.Lock()
		if len(calls) != n {
			t.Fatal("called after Stop")
		}
	})
}

// The loop waits on the clock it is given: a fake clock that does not
// move holds it, and moving it runs fn again.
func TestStartEveryWaitsOnItsClock(t *testing.T) {
	f := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	calls := make(chan struct{}, 10)
	var r service.Runner
	r.StartEvery(context.Background(), f, time.Minute, func(ctx context.Context) error {
		calls <- struct{}{}
		return nil
	}, hclog.NewNullLogger(), "test")
	defer r.Stop()
	<-calls
	if !f.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the loop is not waiting on its clock")
	}
	select {
	case <-calls:
		t.Fatal("ran again before the clock moved")
	default:
	}
	f.Advance(66 * time.Second) // past the interval and its jitter
	select {
	case <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("moving the clock did not run the loop")
	}
}
