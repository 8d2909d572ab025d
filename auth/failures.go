package auth

import (
	"math"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// FailureLimiterConfig configures a FailureLimiter. Zero values take the
// defaults shown.
type FailureLimiterConfig struct {
	// Burst is how many failed authentications an address may make in a
	// row before it is refused. Default 10.
	Burst int
	// Every is how often one more failure is allowed once the burst is
	// spent: the bucket's refill. Default 6s (10 a minute).
	Every time.Duration
	// MaxAddresses caps how many addresses are tracked, so that an
	// attacker with many addresses cannot grow the node's memory. Once it
	// is reached, new addresses share one overflow bucket. Default 10,000.
	MaxAddresses int
}

// FailureLimiter limits failed authentications — unknown or revoked API
// tokens, failed dashboard sign-ins, unknown session ids — per client
// address, with a token bucket per address. Every failure takes a token;
// an address whose bucket is empty is refused before its credentials are
// even looked up, until the bucket refills. Successful requests cost
// nothing. IPv6 clients are counted per /64, the block one subscriber
// usually holds. It is safe for concurrent use.
type FailureLimiter struct {
	cfg FailureLimiterConfig
	now func() time.Time

	mu        sync.Mutex
	buckets   map[netip.Prefix]failureBucket
	overflow  failureBucket
	lastPrune time.Time
}

// failureBucket holds the tokens left at a moment; tokens refill from
// there.
type failureBucket struct {
	tokens float64
	at     time.Time
}

// NewFailureLimiter returns a limiter with cfg's budget.
func NewFailureLimiter(cfg FailureLimiterConfig) *FailureLimiter {
	if cfg.Burst <= 0 {
		cfg.Burst = 10
	}
	if cfg.Every <= 0 {
		cfg.Every = 6 * time.Second
	}
	if cfg.MaxAddresses <= 0 {
		cfg.MaxAddresses = 10000
	}
	l := &FailureLimiter{cfg: cfg, now: time.Now, buckets: map[netip.Prefix]failureBucket{}}
	l.overflow = failureBucket{tokens: float64(cfg.Burst)}
	return l
}

// addrKey is the block an address is counted in: itself, or its /64 for
// IPv6. An invalid address (no TCP peer) is one key of its own.
func addrKey(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// refilled is b's tokens at now.
func (l *FailureLimiter) refilled(b failureBucket, now time.Time) failureBucket {
	if b.at.IsZero() {
		return failureBucket{tokens: float64(l.cfg.Burst), at: now}
	}
	b.tokens = min(float64(l.cfg.Burst), b.tokens+float64(now.Sub(b.at))/float64(l.cfg.Every))
	b.at = now
	return b
}

// Blocked reports whether a has no failures left, and if so how long
// until it has one. A blocked address must not be authenticated at all:
// answer 429 with Retry-After.
func (l *FailureLimiter) Blocked(a netip.Addr) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, tracked := l.buckets[addrKey(a)]
	if !tracked {
		if len(l.buckets) < l.cfg.MaxAddresses {
			return 0, false
		}
		b = l.overflow
	}
	b = l.refilled(b, now)
	if b.tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - b.tokens) * float64(l.cfg.Every)), true
}

// Fail records a failed authentication from a.
func (l *FailureLimiter) Fail(a netip.Addr) {
	now := l.now()
	k := addrKey(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	b, tracked := l.buckets[k]
	if !tracked && len(l.buckets) >= l.cfg.MaxAddresses {
		l.prune(now)
	}
	if !tracked && len(l.buckets) >= l.cfg.MaxAddresses {
		l.overflow = l.refilled(l.overflow, now)
		l.overflow.tokens = max(l.overflow.tokens-1, 0)
		return
	}
	b = l.refilled(b, now)
	b.tokens = max(b.tokens-1, 0)
	l.buckets[k] = b
}

// prune forgets addresses whose buckets have refilled: they are as good
// as new. It runs at most once a second, so that a full map under attack
// does not cost a scan per failure.
func (l *FailureLimiter) prune(now time.Time) {
	if now.Sub(l.lastPrune) < time.Second {
		return
	}
	l.lastPrune = now
	for k, b := range l.buckets {
		if l.refilled(b, now).tokens >= float64(l.cfg.Burst) {
			delete(l.buckets, k)
		}
	}
}

// RetryAfter formats wait as a Retry-After header value: whole seconds,
// rounded up, at least 1.
func RetryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
}
