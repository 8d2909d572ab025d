package cron_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

func quotaLimit(err error) string {
	var qe *cron.QuotaError
	if errors.As(err, &qe) {
		return qe.Limit
	}
	return ""
}

// G13: a tenant's client (WithQuota) cannot create an entry firing more
// often than MinInterval, more than MaxEntries entries, nor entries that
// together fire more than MaxFiresPerMinute; each refusal names its
// limit and writes nothing. An operator's client is not held to it, and
// an entry over the quota keeps firing and can still be paused, resumed
// and edited, only not rescheduled beyond it.
func TestCronQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	op := cron.NewClient(st.Pool())
	c := op.WithQuota(cron.Quota{MaxEntries: 5, MinInterval: 10 * time.Second, MaxFiresPerMinute: 20})
	tmpl := cron.JobTemplate{Kind: "k"}
	entries := func(tenant string) int {
		return count(t, st, `SELECT count(*) FROM gaffer.cron_entries WHERE tenant = $1`, tenant)
	}

	// Too frequent, in each schedule form, by create, put and update.
	for _, spec := range []string{"* * * * * *", "*/5 * * * * *", "@every 9s", "0,5 0 * * * *", "0-4 0 0 * * *", "* * * 29 2 *"} {
		_, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: "fast", Schedule: spec, Job: tmpl})
		if quotaLimit(err) != cron.LimitInterval {
			t.Fatalf("create %q: %v, want a %s refusal", spec, err, cron.LimitInterval)
		}
		t.Logf("create %q: %v", spec, err)
		if _, _, err := c.Put(ctx, cron.Entry{Tenant: "acme", Name: "fast", Schedule: spec, Job: tmpl}, cron.PutOptions{DryRun: true}); quotaLimit(err) != cron.LimitInterval {
			t.Fatalf("dry-run put %q: %v", spec, err)
		}
	}
	if n := entries("acme"); n != 0 {
		t.Fatalf("refused creates wrote %d entries", n)
	}
	// 10s is allowed: 6 fires a minute. Three of them are 18 a minute;
	// a fourth would be 24, over 20.
	for i := range 3 {
		if _, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: fmt.Sprintf("ten-%d", i), Schedule: "*/10 * * * * *", Job: tmpl}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: "ten-3", Schedule: "@every 10s", Job: tmpl})
	if quotaLimit(err) != cron.LimitFiresPerMinute {
		t.Fatalf("fourth 10s entry: %v, want a %s refusal", err, cron.LimitFiresPerMinute)
	}
	t.Logf("fourth: %v", err)
	// Hourly ones fit; a changed schedule that would pass the rate is refused
	// and leaves the entry as it was.
	if _, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: "hourly", Schedule: "@hourly", Job: tmpl}); err != nil {
		t.Fatal(err)
	}
	fast := "@every 15s" // 4 a minute: 22 in all
	if _, err := c.Update(ctx, "acme", "hourly", cron.Update{Schedule: &fast}); quotaLimit(err) != cron.LimitFiresPerMinute {
		t.Fatalf("update to %q: %v", fast, err)
	}
	if e, _ := c.Get(ctx, "acme", "hourly"); e.Schedule != "@hourly" {
		t.Fatalf("a refused update changed the schedule to %q", e.Schedule)
	}
	// Replacing an entry counts its new schedule instead of its old one.
	slower := "*/20 * * * * *"
	if _, err := c.Update(ctx, "acme", "ten-0", cron.Update{Schedule: &slower}); err != nil {
		t.Fatalf("slowing an entry down: %v", err)
	}
	// Entries: 4 now, one more fits, then the sixth is refused.
	if _, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: "daily", Schedule: "@daily", Job: tmpl}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(ctx, cron.Entry{Tenant: "acme", Name: "daily-2", Schedule: "@daily", Job: tmpl})
	if quotaLimit(err) != cron.LimitEntries {
		t.Fatalf("sixth entry: %v, want a %s refusal", err, cron.LimitEntries)
	}
	t.Logf("sixth: %v", err)
	if n := entries("acme"); n != 5 {
		t.Fatalf("acme has %d entries, want 5", n)
	}
	// Another tenant's quota is its own.
	if _, err := c.Create(ctx, cron.Entry{Tenant: "other", Name: "daily", Schedule: "@daily", Job: tmpl}); err != nil {
		t.Fatal(err)
	}

	// The operator's client is not held to it: a per-second entry in
	// acme, beyond every limit — as an entry from before the quota would
	// be. The tenant can still pause, resume and edit its args; it cannot
	// make it faster or give it another per-second schedule.
	if _, err := op.Create(ctx, cron.Entry{Tenant: "acme", Name: "legacy", Schedule: "* * * * * *", Job: tmpl}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(ctx, "acme", "legacy"); err != nil {
		t.Fatalf("pause an entry over the quota: %v", err)
	}
	if _, err := c.Resume(ctx, "acme", "legacy"); err != nil {
		t.Fatalf("resume an entry over the quota: %v", err)
	}
	other := cron.JobTemplate{Kind: "k", Args: []byte(`{"v":2}`)}
	if _, err := c.Update(ctx, "acme", "legacy", cron.Update{Job: &other}); err != nil {
		t.Fatalf("edit the args of an entry over the quota: %v", err)
	}
	if _, _, err := c.Put(ctx, cron.Entry{Tenant: "acme", Name: "legacy", Schedule: "* * * * * *", Job: other}, cron.PutOptions{KeepPaused: true}); err != nil {
		t.Fatalf("put an entry over the quota unchanged: %v", err)
	}
	every2 := "*/2 * * * * *"
	if _, err := c.Update(ctx, "acme", "legacy", cron.Update{Schedule: &every2}); quotaLimit(err) != cron.LimitInterval {
		t.Fatalf("reschedule an entry over the quota to %q: %v", every2, err)
	}
	// And it fires.
	s := newScheduler(t, st, time.Minute)
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE tenant = 'acme' AND cron_entry = 'legacy'`); n == 0 {
		t.Fatal("the entry over the quota did not fire")
	}
}

// Entries written before gaps were recorded (min_gap_ms NULL, as after
// the upgrade to 0036) count in the tenant's fire rate: the check
// measures them, and records what it measured.
func TestCronQuotaCountsEntriesFromBeforeIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	op := cron.NewClient(st.Pool())
	for i := range 3 {
		if _, err := op.Create(ctx, cron.Entry{Tenant: "acme", Name: fmt.Sprintf("old-%d", i), Schedule: "*/10 * * * * *", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET min_gap_ms = NULL`); err != nil {
		t.Fatal(err)
	}
	c := op.WithQuota(cron.Quota{MinInterval: 10 * time.Second, MaxFiresPerMinute: 20})
	_, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: "new", Schedule: "@every 10s", Job: cron.JobTemplate{Kind: "k"}})
	if quotaLimit(err) != cron.LimitFiresPerMinute {
		t.Fatalf("a fourth 10s entry beside three unmeasured ones: %v, want a %s refusal", err, cron.LimitFiresPerMinute)
	}
	// The refusal rolled back; a check that passes keeps the measures.
	if _, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: "new", Schedule: "@hourly", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_entries WHERE tenant = 'acme' AND min_gap_ms = 10000`); n != 3 {
		t.Fatalf("%d of the 3 older entries have their gap recorded", n)
	}
}
