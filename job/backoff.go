package job

import (
	"math/rand/v2"
	"time"
)

// Backoff computes how long a job waits before its next attempt.
type Backoff interface {
	// Delay is the wait after failed attempt number attempt (1-based).
	Delay(attempt int) time.Duration
}

// ExponentialBackoff waits Base·2^(attempt-1), capped at Max, then moves
// it by up to ±Jitter (a fraction) so that jobs failing together spread
// out. Zero fields take the defaults below.
type ExponentialBackoff struct {
	Base   time.Duration // default 1s
	Max    time.Duration // default 1h
	Jitter float64       // default 0.2; negative means none
}

// DefaultBackoff is the policy for kinds that set none: 1s, 2s, 4s, …
// capped at one hour, ±20%. With the default 25 attempts a job keeps
// retrying for about 15 hours before it is dead-lettered.
var DefaultBackoff Backoff = ExponentialBackoff{}

// Delay implements Backoff.
func (b ExponentialBackoff) Delay(attempt int) time.Duration {
	base, ceiling, jitter := b.Base, b.Max, b.Jitter
	if base <= 0 {
		base = time.Second
	}
	if ceiling <= 0 {
		ceiling = time.Hour
	}
	if jitter == 0 {
		jitter = 0.2
	}
	d := ceiling
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 62 {
		if x := base << (attempt - 1); x > 0 && x < ceiling && x>>(attempt-1) == base {
			d = x
		}
	}
	if jitter > 0 {
		spread := float64(d) * jitter
		d += time.Duration((rand.Float64()*2 - 1) * spread)
	}
	return max(d, 0)
}

// ConstantBackoff always waits the same time.
type ConstantBackoff time.Duration

// Delay implements Backoff.
func (b ConstantBackoff) Delay(int) time.Duration { return time.Duration(b) }
