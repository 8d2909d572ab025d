package auth

import "time"

// Tracked is how many addresses the limiter holds, for tests.
func (l *FailureLimiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// SetClock replaces the limiter's clock, for tests.
func (l *FailureLimiter) SetClock(now func() time.Time) { l.now = now }
