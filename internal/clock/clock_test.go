package clock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gafferhq/gaffer/internal/clock"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-c:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresWhenItsTimeComes(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(time.Second)
	f.Advance(999 * time.Millisecond)
	if _, ok := received(tm.C()); ok {
		t.Fatal("fired early")
	}
	f.Advance(time.Millisecond)
	if at, ok := received(tm.C()); !ok || !at.Equal(epoch.Add(time.Second)) {
		t.Fatalf("at 1s: fired %v at %s", ok, at)
	}
	f.Advance(time.Hour)
	if _, ok := received(tm.C()); ok {
		t.Fatal("a timer fired twice")
	}
	if f.Armed() != 0 {
		t.Fatalf("%d armed after firing", f.Armed())
	}
}

func TestFakeTimerStopAndResetDropStaleTicks(t *testing.T) {
	f := clock.NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported false")
	}
	f.Advance(time.Minute)
	if _, ok := received(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	tm.Reset(time.Second)
	f.Advance(time.Second) // fired, not read
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reported it armed")
	}
	if _, ok := received(tm.C()); ok {
		t.Fatal("a tick from before Reset was received after it")
	}
	f.Advance(time.Second)
	if _, ok := received(tm.C()); !ok {
		t.Fatal("a reset timer did not fire")
	}
	if tm.Reset(0); f.Armed() != 0 {
		t.Fatal("a zero timer stayed armed")
	}
	if _, ok := received(tm.C()); !ok {
		t.Fatal("a zero timer did not fire at once")
	}
}

func TestFakeTickerDropsMissedTicks(t *testing.T) {
	f := clock.NewFake(epoch)
	tk := f.NewTicker(time.Second)
	defer tk.Stop()
	f.Advance(10 * time.Second)
	if at, ok := received(tk.C()); !ok || !at.Equal(epoch.Add(time.Second)) {
		t.Fatalf("first tick %v at %s", ok, at)
	}
	if _, ok := received(tk.C()); ok {
		t.Fatal("missed ticks were queued")
	}
	// The next tick is on the ticker's own beat: 11s.
	f.Advance(500 * time.Millisecond)
	if _, ok := received(tk.C()); ok {
		t.Fatal("ticked off its beat")
	}
	f.Advance(500 * time.Millisecond)
	if at, ok := received(tk.C()); !ok || !at.Equal(epoch.Add(11*time.Second)) {
		t.Fatalf("second tick %v at %s", ok, at)
	}
}

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := clock.NewFake(epoch)
	late, early := f.NewTimer(2*time.Second), f.NewTimer(time.Second)
	f.Advance(time.Minute)
	a, _ := received(early.C())
	b, _ := received(late.C())
	if !a.Equal(epoch.Add(time.Second)) || !b.Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("fired at %s and %s", a, b)
	}
	if !f.Now().Equal(epoch.Add(time.Minute)) {
		t.Fatalf("now %s", f.Now())
	}
}

func TestWaitForTimersSeesALoopPark(t *testing.T) {
	f := clock.NewFake(epoch)
	woke := make(chan struct{})
	go func() {
		clock.Sleep(context.Background(), f, time.Hour)
		close(woke)
	}()
	if !f.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the sleeper never armed its timer")
	}
	f.Advance(time.Hour)
	<-woke
	if f.WaitForTimers(1, 10*time.Millisecond) {
		t.Fatal("a timer still armed after the sleeper woke")
	}
}

// Sleep on the real clock, in a synctest bubble: the bubble's fake time
// passes at once when every goroutine in it is blocked.
func TestSleepRealClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !clock.Sleep(context.Background(), clock.Real, time.Hour) {
			t.Fatal("Sleep reported a cancelled context")
		}
		if d := time.Since(start); d != time.Hour {
			t.Fatalf("slept %s", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start = time.Now()
		if clock.Sleep(ctx, clock.Real, time.Hour) {
			t.Fatal("Sleep outlived its context")
		}
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("returned after %s, want at the context's end", d)
		}
	})
}
