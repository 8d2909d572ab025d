package job

import (
	"sync"

	"github.com/gafferhq/gaffer/internal/clock"
)

// SetClock makes the worker's claim loops and heartbeats read c, so that
// a test turns their time by hand. Call it before Start.
func (w *Worker) SetClock(c clock.Clock) { w.clock = c }

// HoldCompletions makes the worker's completer wait, before each batch it
// writes, until release is called: a database too slow to take them.
// Call it after Start.
func (w *Worker) HoldCompletions() (release func()) {
	ch := make(chan struct{})
	hold := func() { <-ch }
	w.completer.hold.Store(&hold)
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}
