package cron

import (
	"time"

	"golang.org/x/time/rate"
)

// fireBudget meters the jobs each tenant's entries make: a token bucket
// per tenant, held by the scheduler (so by the leader: one budget for the
// whole cluster, since only the leader fires). A tenant whose bucket is
// empty is left out of the scheduler's passes until it refills; its due
// entries wait, and fire late, while other tenants' fire on time.
//
// It is used only from the scheduler's loop: no lock.
type fireBudget struct {
	limit   rate.Limit
	burst   int
	tenants map[string]*rate.Limiter
}

// newFireBudget returns a budget of perSecond jobs per tenant, burst at
// once; nil (unmetered) when perSecond is negative.
func newFireBudget(perSecond float64, burst int) *fireBudget {
	if perSecond < 0 {
		return nil
	}
	return &fireBudget{limit: rate.Limit(perSecond), burst: burst, tenants: map[string]*rate.Limiter{}}
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
	tokens := l.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(b.limit) * float64(time.Second))
}

// spend takes n jobs, made at now, from tenant's budget. It may leave the
// bucket in debt — a catch-up under policy "all" makes up to missed_cap
// jobs at once — which the tenant then waits out.
func (b *fireBudget) spend(tenant string, n int, now time.Time) {
	if b == nil || n <= 0 {
		return
	}
	l := b.tenants[tenant]
	if l == nil {
		l = rate.NewLimiter(b.limit, b.burst)
		b.tenants[tenant] = l
	}
	for n > 0 {
		// ReserveN refuses more than the burst at once: take it in
		// pieces, each going into debt as needed.
		k := min(n, b.burst)
		l.ReserveN(now, k)
		n -= k
	}
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
