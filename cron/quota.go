package cron

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/store"
)

// Quota bounds what one tenant's entries may cost the cluster: how many
// there are, how often one may fire, and how often all of them together
// may. The API holds a tenant's tokens to it (a client from WithQuota);
// operators — the Go library, a token spanning every tenant — are not,
// and their entries still take their turn in the scheduler and count in
// the tenant's load. Zero fields take the defaults; a negative one is
// no limit.
type Quota struct {
	// MaxEntries: entries per tenant, done one-shots included. Default
	// 1000.
	MaxEntries int
	// MinInterval: the shortest gap an entry's schedule may leave between
	// two fires. Default 10s.
	MinInterval time.Duration
	// MaxFiresPerMinute bounds a tenant's fire rate: the sum, over its
	// entries, of each one's fastest rate (one fire per its shortest gap;
	// a one-shot counts for none). Default 600 (10 a second).
	MaxFiresPerMinute float64
}

// Quota defaults.
const (
	DefaultMaxEntries        = 1000
	DefaultMinInterval       = 10 * time.Second
	DefaultMaxFiresPerMinute = 600
)

func (q Quota) withDefaults() Quota {
	if q.MaxEntries == 0 {
		q.MaxEntries = DefaultMaxEntries
	}
	if q.MinInterval == 0 {
		q.MinInterval = DefaultMinInterval
	}
	if q.MaxFiresPerMinute == 0 {
		q.MaxFiresPerMinute = DefaultMaxFiresPerMinute
	}
	return q
}

// The limits a QuotaError names.
const (
	LimitEntries        = "max_entries"
	LimitInterval       = "min_interval"
	LimitFiresPerMinute = "max_fires_per_minute"
)

// QuotaError refuses an entry its tenant's quota does not allow; nothing
// was written.
type QuotaError struct {
	Limit   string // LimitEntries, LimitInterval or LimitFiresPerMinute
	Message string
}

func (e *QuotaError) Error() string { return e.Message }

// WithQuota returns a client that holds each tenant to q when it creates
// an entry or changes a schedule or zone (edits that leave them alone
// are not checked: an entry over a quota lowered since keeps working,
// and can still be paused, resumed or given other args).
func (c *Client) WithQuota(q Quota) *Client {
	cp := *c
	q = q.withDefaults()
	cp.quota = &q
	return &cp
}

// gapSamples bounds the fires minGap looks at, and gapHorizon how far
// ahead: a year of a daily schedule, a few days of a per-minute one.
const (
	gapSamples = 1000
	gapHorizon = 366 * 24 * time.Hour
)

// minGap is the shortest gap between two consecutive fires of sched
// after from, among its next gapSamples fires within gapHorizon of the
// first (however far ahead that is: a burst on the next 29 February
// counts); 0 for a schedule that fires at most once.
func minGap(sched Schedule, from time.Time) time.Duration {
	if _, ok := oneShotAt(sched); ok {
		return 0
	}
	if d, ok := sched.(every); ok {
		return time.Duration(d)
	}
	var gap time.Duration
	first := sched.Next(from)
	t := first
	for range gapSamples {
		n := sched.Next(t)
		if n.IsZero() || n.Sub(first) > gapHorizon {
			break
		}
		if d := n.Sub(t); gap == 0 || d < gap {
			gap = d
		}
		if gap <= time.Second {
			break // the fastest a schedule fires
		}
		t = n
	}
	return gap
}

// admit checks, within tx, that the tenant of row may hold row (new, or
// replacing its entry of that name) under c's quota. It locks the
// tenant's quota until tx ends: call it before taking an entry's row
// lock in tx. row.MinGap must be measured.
func (c *Client) admit(ctx context.Context, tx pgx.Tx, row store.CronEntry, isNew bool, now time.Time) error {
	if c.quota == nil {
		return nil
	}
	q := *c.quota
	if q.MinInterval > 0 && row.MinGap > 0 && row.MinGap < q.MinInterval {
		return &QuotaError{Limit: LimitInterval, Message: fmt.Sprintf("schedule %q fires every %s at its fastest; this tenant's entries may fire at most every %s (%s)",
			row.Schedule, row.MinGap, q.MinInterval, LimitInterval)}
	}
	load, err := c.store.CronTenantLoad(ctx, tx, row.Tenant, row.Name)
	if err != nil {
		return err
	}
	if isNew && q.MaxEntries > 0 && load.Entries >= q.MaxEntries {
		return &QuotaError{Limit: LimitEntries, Message: fmt.Sprintf("tenant %q has %d cron entries, as many as it may (%s %d); delete some first",
			row.Tenant, load.Entries, LimitEntries, q.MaxEntries)}
	}
	if q.MaxFiresPerMinute < 0 {
		return nil
	}
	rate := load.FiresPerMinute
	for _, e := range load.Unmeasured {
		// Written before gaps were recorded: measure it once, and keep it.
		sched, err := Parse(e.Schedule, e.Timezone)
		if err != nil {
			continue // it cannot fire either; the scheduler reports it
		}
		gap := minGap(sched, now)
		if err := c.store.SetCronMinGap(ctx, tx, e, gap); err != nil {
			return err
		}
		if gap > 0 {
			rate += float64(time.Minute) / float64(gap)
		}
	}
	if row.MinGap > 0 && row.DoneAt.IsZero() {
		own := float64(time.Minute) / float64(row.MinGap)
		if rate+own > q.MaxFiresPerMinute {
			return &QuotaError{Limit: LimitFiresPerMinute, Message: fmt.Sprintf("schedule %q fires up to %.4g times a minute; with the tenant's other entries (%.4g a minute) that is more than it may (%s %.4g)",
				row.Schedule, own, rate, LimitFiresPerMinute, q.MaxFiresPerMinute)}
		}
	}
	return nil
}
