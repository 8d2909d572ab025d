// Package clock is where Gaffer's long-running loops read the time and
// wait for it: Real in production, a Fake that a test moves by hand.
//
// Only a loop's own timing goes through a Clock — when to poll, heartbeat,
// sweep, report, retry, or stop trusting an etcd session. Due times and
// leases are compared with the database's now(), which no Clock here can
// move: a test that needs a lease to expire still waits for PostgreSQL's
// clock (or moves the row's timestamps).
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers and tickers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on C once d has passed.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on C every d,
	// dropping ticks a slow reader misses, as time.Ticker does.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer that may be fake. As with time.Timer since Go
// 1.23, no stale value is received after Stop or Reset returns.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker that may be fake.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the wall clock: the time package.
var Real Clock = realClock{}

// Since is c.Now().Sub(t).
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Sleep waits d on c. It returns false, at once, when ctx ends first.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

type realTicker struct{ *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.Ticker.C }
