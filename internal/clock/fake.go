package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a Clock that moves only when a test says so. Advance moves it
// and fires, in deadline order, the timers and tickers whose time came;
// WaitForTimers waits (in real time) until the loops under test have
// armed their timers, that is, until they are waiting for the clock.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	armed   []*fakeTimer
	changed chan struct{} // closed and replaced whenever armed changes
}

// NewFake returns a fake clock reading now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer firing once the clock has moved d on.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// NewTicker returns a ticker firing every d of fake time. Like
// time.NewTicker, it panics if d is not positive.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	t.at = f.now.Add(d)
	f.arm(t)
	f.mu.Unlock()
	return fakeTicker{t}
}

// Advance moves the clock d on, firing every timer and ticker whose
// deadline it passes, earliest first. A ticker fires at most once per
// Advance (a reader that has not taken its last tick misses the rest, as
// with time.Ticker).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	target := f.now.Add(d)
	sort.SliceStable(f.armed, func(i, j int) bool { return f.armed[i].at.Before(f.armed[j].at) })
	due := 0
	for due < len(f.armed) && !f.armed[due].at.After(target) {
		due++
	}
	fired := append([]*fakeTimer(nil), f.armed[:due]...)
	for _, t := range fired {
		if t.at.After(f.now) {
			f.now = t.at
		}
		t.send(f.now)
		if t.period > 0 {
			for !t.at.After(target) {
				t.at = t.at.Add(t.period)
			}
		} else {
			f.disarm(t)
		}
	}
	f.now = target
	if len(fired) > 0 {
		f.signal()
	}
}

// Armed counts the timers and tickers waiting for the clock.
func (f *Fake) Armed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

// WaitForTimers waits, for at most timeout of real time, until at least n
// timers and tickers are waiting for the clock, and reports whether they
// were.
func (f *Fake) WaitForTimers(n int, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ok, changed := len(f.armed) >= n, f.changed
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// arm and disarm change the armed set; f.mu is held.
func (f *Fake) arm(t *fakeTimer) {
	if !t.isArmed {
		t.isArmed = true
		f.armed = append(f.armed, t)
		f.signal()
	}
}

func (f *Fake) disarm(t *fakeTimer) bool {
	if !t.isArmed {
		return false
	}
	t.isArmed = false
	for i, x := range f.armed {
		if x == t {
			f.armed = append(f.armed[:i], f.armed[i+1:]...)
			break
		}
	}
	f.signal()
	return true
}

func (f *Fake) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// fakeTimer is a Fake's timer (period 0) or ticker.
type fakeTimer struct {
	f       *Fake
	c       chan time.Time
	at      time.Time
	period  time.Duration
	isArmed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// send delivers a tick unless one is still waiting to be read.
func (t *fakeTimer) send(now time.Time) {
	select {
	case t.c <- now:
	default:
	}
}

// drain takes back a tick not yet read: none is received after Stop or
// Reset returns.
func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.drain()
	return t.f.disarm(t)
}

// Reset re-arms a timer; tickers are not reset.
func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	t.drain()
	was := f.disarm(t)
	t.at = f.now.Add(d)
	if d <= 0 {
		t.send(f.now)
		return was
	}
	f.arm(t)
	return was
}

// fakeTicker is a ticker's face of a fakeTimer.
type fakeTicker struct{ *fakeTimer }

func (t fakeTicker) Stop() { t.fakeTimer.Stop() }
