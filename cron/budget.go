package cron

import (
	"time"

	"golang.org/x/time/rate"
)

// fireBudget meters the jobs each tenant's entries make: a token bucket
// per tenant, held by the scheduler (so by the leader: one budget for the
// whole cluster, since only the leader fires). An entry fires only when
// its tenant's bucket holds every job the firing makes (a catch-up under
// policy "all" makes several; one larger than the burst waits for a full
// bucket and leaves it in debt). A tenant whose bucket cannot pay for its
// next firing is left out of the scheduler's passes until it refills; its
// due entries wait, and fire late, while other tenants' fire on time. So
// over any t seconds a tenant's entries make at most burst + rate×t jobs,
// but for a catch-up larger than the burst.
//
// It is used only from the scheduler's loop: no lock.
type fireBudget struct {
	limit   rate.Limit
	burst   int
	tenants map[string]*rate.Limiter
	// need is, for a tenant whose last firing could not be paid for,
	// the jobs it waits for (at most the burst); 1 otherwise.
	need map[string]int
}

// newFireBudget returns a budget of perSecond jobs per tenant, burst at
// once; nil (unmetered) when perSecond is negative.
func newFireBudget(perSecond float64, burst int) *fireBudget {
	if perSecond < 0 {
		return nil
	}
	return &fireBudget{limit: rate.Limit(perSecond), burst: burst, tenants: map[string]*rate.Limiter{}, need: map[string]int{}}
}

// wait is how long until tenant may fire again: 0 when it may now.
func (b *fireBudget) wait(tenant string, now time.Time) time.Duration {
	if b == nil {
		return 0
	}
	l := b.tenants[tenant]
	if l == nil {
		return 0
	}
	need := float64(max(1, b.need[tenant]))
	tokens := l.TokensAt(now)
	if tokens >= need {
		return 0
	}
	return time.Duration((need - tokens) / float64(b.limit) * float64(time.Second))
}

// take pays for a firing of tenant's that makes n jobs at now, and
// reports whether it could: the bucket must hold n tokens, or be full
// for a firing larger than the burst (which leaves it in debt, waited
// out). A firing it cannot pay for is remembered (need), so that the
// tenant is left out until the bucket holds enough, not looked at again
// and again meanwhile.
func (b *fireBudget) take(tenant string, n int, now time.Time) bool {
	if b == nil || n <= 0 {
		return true
	}
	l := b.tenants[tenant]
	if l == nil {
		l = rate.NewLimiter(b.limit, b.burst)
		b.tenants[tenant] = l
	}
	need := min(n, b.burst)
	if l.TokensAt(now) < float64(need) {
		b.need[tenant] = need
		return false
	}
	delete(b.need, tenant)
	for n > 0 {
		// ReserveN refuses more than the burst at once: take it in
		// pieces, each going into debt as needed.
		k := min(n, b.burst)
		l.ReserveN(now, k)
		n -= k
	}
	return true
}

// spent lists the tenants that may not fire at now, and how long until
// the first of them may; it forgets the tenants whose bucket is full
// again, so the map holds only tenants that fired lately.
func (b *fireBudget) spent(now time.Time) ([]string, time.Duration) {
	if b == nil {
		return nil, 0
	}
	var out []string
	var first time.Duration
	for t, l := range b.tenants {
		if l.TokensAt(now) >= float64(b.burst) {
			delete(b.tenants, t)
			delete(b.need, t)
			continue
		}
		if w := b.wait(t, now); w > 0 {
			out = append(out, t)
			if first == 0 || w < first {
				first = w
			}
		}
	}
	return out, first
}
