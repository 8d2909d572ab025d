package job

import (
	"github.com/gafferhq/gaffer/internal/clock"
)

// SetClock makes the worker's claim loops and heartbeats read c, so that
// a test turns their time by hand. Call it before Start.
func (w *Worker) SetClock(c clock.Clock) { w.clock = c }
