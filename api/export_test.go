package api

import (
	"slices"
	"time"
)

// ProblemCodes lists every problem code the API answers with, sorted.
func ProblemCodes() []string {
	codes := make([]string, 0, len(titles))
	for c := range titles {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// Tracked is how many addresses the limiter holds, for tests.
func (l *FailureLimiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// SetClock replaces the limiter's clock, for tests.
func (l *FailureLimiter) SetClock(now func() time.Time) { l.now = now }
