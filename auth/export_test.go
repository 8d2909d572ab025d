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

// SetClock replaces the tokens' clock, for tests.
func (t *Tokens) SetClock(now func() time.Time) { t.now = now }

// Cached is how many tokens each cache holds, for tests.
func (t *Tokens) Cached() (known, bad int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cache), len(t.bad)
}
