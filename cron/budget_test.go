package cron_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
)

// G13: cron-made jobs draw from their tenant's fire budget. Tenant hog's
// 60 per-second entries would make 60 jobs a second; with a budget of 20
// a second (burst 40) they make at most 20 per second plus the burst,
// and tenant victim's entry, whose budget is its own, fires every second.
func TestCronFireBudgetPerTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	for i := range 60 {
		if _, err := c.Create(ctx, cron.Entry{Tenant: "hog", Name: fmt.Sprintf("hog-%02d", i), Schedule: "* * * * * *",
			Job: cron.JobTemplate{Kind: "noop"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(ctx, cron.Entry{Tenant: "victim", Name: "tick", Schedule: "* * * * * *", Job: cron.JobTemplate{Kind: "noop"}}); err != nil {
		t.Fatal(err)
	}
	s, err := cron.NewScheduler(cron.SchedulerConfig{Pool: st.Pool(), Fence: job.Unfenced{Pool: st.Pool()}, TenantFireRate: 20})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	s.Stop()
	took := time.Since(start).Seconds()
	hog := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE tenant = 'hog'`)
	victim := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE tenant = 'victim'`)
	t.Logf("in %.1fs: hog %d jobs (budget 20/s, burst 40), victim %d", took, hog, victim)
	if limit := int(20*took) + 40; hog > limit {
		t.Fatalf("tenant hog made %d jobs in %.1fs; its budget allows %d", hog, took, limit)
	}
	if hog < 60 {
		t.Fatalf("tenant hog made only %d jobs: its budget was not used", hog)
	}
	if victim < 4 {
		t.Fatalf("tenant victim's per-second entry made %d jobs in %.1fs", victim, took)
	}
}
