package cron

import "github.com/gafferhq/gaffer/internal/clock"

// SetClock makes the scheduler wait on c (its sleeps between passes and
// its hourly history cleanup). Due times stay the database's. Call it
// before Start.
func (s *Scheduler) SetClock(c clock.Clock) { s.clock = c }
