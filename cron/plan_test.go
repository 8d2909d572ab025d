package cron

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/store"
)

func describe(p plan) string {
	var parts []string
	for _, o := range p.occurrences {
		parts = append(parts, fmt.Sprintf("%s@%s×%d", o.Status, o.ScheduledAt.Format("15:04"), o.Count))
	}
	return strings.Join(parts, " ") + " next=" + p.next.Format("15:04")
}

// Eleven minutely occurrences fell while no leader ran (10:00 to 10:10);
// now is 10:10:30 and the grace 1 minute, so 10:10 is on time and
// 10:00-10:09 are missed.
func TestPlanMissedPolicies(t *testing.T) {
	t.Parallel()
	sched := mustParse(t, "* * * * *", "UTC")
	now := utc("2026-05-01T10:10:30Z")
	entry := func(policy string, cap int) store.CronEntry {
		return store.CronEntry{Name: "e", Missed: policy, MissedCap: cap, NextRunAt: utc("2026-05-01T10:00:00Z")}
	}
	cases := []struct {
		policy string
		cap    int
		want   string
	}{
		{MissedSkip, 100, "missed@10:00×10 fired@10:10×1 next=10:11"},
		{MissedOnce, 100, "missed@10:00×9 fired@10:09×1 fired@10:10×1 next=10:11"},
		{MissedAll, 100, "fired@10:00×1 fired@10:01×1 fired@10:02×1 fired@10:03×1 fired@10:04×1 fired@10:05×1 fired@10:06×1 fired@10:07×1 fired@10:08×1 fired@10:09×1 fired@10:10×1 next=10:11"},
		{MissedAll, 3, "missed@10:00×7 fired@10:07×1 fired@10:08×1 fired@10:09×1 fired@10:10×1 next=10:11"},
	}
	for _, c := range cases {
		got := describe(planOccurrences(sched, entry(c.policy, c.cap), now, time.Minute))
		if got != c.want {
			t.Errorf("%s cap %d:\n got  %s\n want %s", c.policy, c.cap, got, c.want)
		}
	}
	// Everything within the grace fires whatever the policy: a failover
	// of a few seconds loses nothing, even under skip.
	e := store.CronEntry{Missed: MissedSkip, NextRunAt: utc("2026-05-01T10:10:00Z")}
	every := mustParse(t, "@every 1s", "UTC")
	p := planOccurrences(every, e, utc("2026-05-01T10:10:12Z"), time.Minute)
	if len(p.occurrences) != 13 || p.occurrences[0].Status != "fired" || p.occurrences[12].Status != "fired" {
		t.Fatalf("failover gap under skip: %s", describe(p))
	}
	if !p.next.Equal(utc("2026-05-01T10:10:13Z")) {
		t.Fatalf("next %s", p.next)
	}
	// Not yet due: nothing, cursor unchanged.
	p = planOccurrences(every, e, utc("2026-05-01T10:09:59Z"), time.Minute)
	if len(p.occurrences) != 0 || !p.next.Equal(e.NextRunAt) {
		t.Fatalf("not due: %s", describe(p))
	}
}

func TestPlanLongOutageIsBounded(t *testing.T) {
	t.Parallel()
	every := mustParse(t, "@every 1s", "UTC")
	e := store.CronEntry{Missed: MissedSkip, NextRunAt: utc("2026-05-01T00:00:00Z")}
	now := utc("2026-05-08T00:00:00Z") // a week: 604,800 occurrences
	start := time.Now()
	p := planOccurrences(every, e, now, time.Minute)
	// 604,801 instants: the 61 within the last minute fire, the rest are
	// one "missed" row.
	if len(p.occurrences) != 62 || p.occurrences[0].Count != 604740 || p.occurrences[1].Status != "fired" {
		t.Fatalf("week-long outage: %d rows, first %+v", len(p.occurrences), p.occurrences[0])
	}
	if !p.next.Equal(now.Add(time.Second)) {
		t.Fatalf("next %s", p.next)
	}
	t.Logf("planned a week of @every 1s in %s", time.Since(start))
}
