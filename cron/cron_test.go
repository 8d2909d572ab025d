package cron_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newScheduler(t *testing.T, st *store.Store, grace time.Duration) *cron.Scheduler {
	t.Helper()
	s, err := cron.NewScheduler(cron.SchedulerConfig{Pool: st.Pool(), Fence: job.Unfenced{Pool: st.Pool()}, MisfireGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func count(t *testing.T, st *store.Store, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestEntryLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	e, err := c.Create(ctx, cron.Entry{Name: "nightly-report", Schedule: "30 2 * * *", Timezone: "America/New_York",
		Job: cron.JobTemplate{Kind: "report.build", Args: []byte(`{"full":true}`), Queue: "reports"}})
	if err != nil {
		t.Fatal(err)
	}
	if e.Tenant != "default" || e.Missed != "skip" || e.Overlap != "allow" || e.MissedCap != 100 || e.Job.MaxAttempts != 25 {
		t.Fatalf("defaults: %+v", e)
	}
	ny, _ := cron.LoadLocation("America/New_York")
	if local := e.NextRunAt.In(ny); local.Hour() != 2 || local.Minute() != 30 || !e.NextRunAt.After(time.Now()) {
		t.Fatalf("next run %s (%s local)", e.NextRunAt, local)
	}
	if _, err := c.Create(ctx, cron.Entry{Name: "nightly-report", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}); !errors.Is(err, cron.ErrExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	// Another tenant may use the name.
	if _, err := c.Create(ctx, cron.Entry{Tenant: "acme", Name: "nightly-report", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	times, err := c.NextTimes(ctx, "", "nightly-report", 3)
	if err != nil || len(times) != 3 || !times[0].Equal(e.NextRunAt) || times[1].Sub(times[0]) < 23*time.Hour {
		t.Fatalf("next times %v %v", times, err)
	}
	s := "@hourly"
	up, err := c.Update(ctx, "", "nightly-report", cron.Update{Schedule: &s})
	if err != nil || up.Schedule != "@hourly" || up.NextRunAt.Sub(time.Now()) > time.Hour {
		t.Fatalf("update: %+v %v", up, err)
	}
	bad := "0 0 30 2 *"
	if _, err := c.Update(ctx, "", "nightly-report", cron.Update{Schedule: &bad}); err == nil || !strings.Contains(err.Error(), "never fires") {
		t.Fatalf("bad update: %v", err)
	}
	if got, _ := c.Get(ctx, "", "nightly-report"); got.Schedule != "@hourly" {
		t.Fatalf("a rejected update changed the entry: %+v", got)
	}
	if p, err := c.Pause(ctx, "", "nightly-report"); err != nil || !p.Paused {
		t.Fatalf("pause %v", err)
	}
	id, err := c.Trigger(ctx, "", "nightly-report")
	if err != nil {
		t.Fatal(err)
	}
	j, _ := job.NewClient(st.Pool(), nil).Get(ctx, "", id)
	if j.Kind != "report.build" || j.Queue != "reports" || string(j.Args) != `{"full":true}` {
		t.Fatalf("triggered job %+v", j)
	}
	hist, _ := c.History(ctx, "", "nightly-report", time.Time{}, 10)
	if len(hist) != 1 || hist[0].Status != "triggered" || hist[0].JobID != id {
		t.Fatalf("history %+v", hist)
	}
	list, _ := c.List(ctx, "default", cron.Cursor{}, 10)
	if len(list) != 1 {
		t.Fatalf("list %+v", list)
	}
	if all, _ := c.List(ctx, "", cron.Cursor{}, 10); len(all) != 2 {
		t.Fatalf("list all %d", len(all))
	}
	if err := c.Delete(ctx, "", "nightly-report"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "", "nightly-report"); !errors.Is(err, cron.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := c.Delete(ctx, "", "nightly-report"); !errors.Is(err, cron.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestEntryValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	ok := cron.JobTemplate{Kind: "k"}
	cases := []struct {
		e     cron.Entry
		field string
	}{
		{cron.Entry{Name: "", Schedule: "@daily", Job: ok}, "name"},
		{cron.Entry{Name: "has space", Schedule: "@daily", Job: ok}, "name"},
		{cron.Entry{Name: "x", Schedule: "nope", Job: ok}, "schedule"},
		{cron.Entry{Name: "x", Schedule: "0 0 30 2 *", Job: ok}, "schedule"},
		{cron.Entry{Name: "x", Schedule: "@daily", Timezone: "Nowhere/Special", Job: ok}, "timezone"},
		{cron.Entry{Name: "x", Schedule: "@daily", Missed: "sometimes", Job: ok}, "missed"},
		{cron.Entry{Name: "x", Schedule: "@daily", MissedCap: -1, Job: ok}, "missed_cap"},
		{cron.Entry{Name: "x", Schedule: "@daily", Overlap: "queue", Job: ok}, "overlap"},
		{cron.Entry{Name: "x", Schedule: "@daily"}, "job.kind"},
		{cron.Entry{Name: "x", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k", Priority: 12}}, "job.priority"},
		{cron.Entry{Name: "x", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k", Args: []byte(`{`)}}, "job.args"},
	}
	for _, tc := range cases {
		_, err := c.Create(ctx, tc.e)
		var ve *job.ValidationError
		var se *cron.ScheduleError
		field := ""
		switch {
		case errors.As(err, &ve):
			field = ve.Field
		case errors.As(err, &se):
			field = se.Field
		}
		if field != tc.field {
			t.Errorf("%+v: error %v, want one on %q", tc.e, err, tc.field)
		}
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_entries`); n != 0 {
		t.Fatalf("%d entries written by rejected requests", n)
	}
}

// moveCursor makes the entry look as if no leader ran since ago.
func moveCursor(t *testing.T, st *store.Store, name string, ago time.Duration) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(),
		`UPDATE gaffer.cron_entries SET next_run_at = now() - $2 * interval '1 millisecond' WHERE name = $1`, name, ago.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
}

// The cluster was stopped across twelve occurrences of an "@every 1m"
// entry (11m30s ago to 30s ago, all beyond a 5s grace); when the scheduler
// runs again each policy does what it says.
func TestMissedFirePolicies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	for _, p := range []struct {
		name, policy string
		cap          int
	}{{"skip", "skip", 0}, {"once", "once", 0}, {"all", "all", 0}, {"all-capped", "all", 4}} {
		if _, err := c.Create(ctx, cron.Entry{Name: p.name, Schedule: "@every 1m", Missed: p.policy, MissedCap: p.cap, Job: cron.JobTemplate{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
		moveCursor(t, st, p.name, 11*time.Minute+30*time.Second)
	}
	s := newScheduler(t, st, 5*time.Second)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ jobs, missed int }{"skip": {0, 12}, "once": {1, 11}, "all": {12, 0}, "all-capped": {4, 8}}
	for name, w := range want {
		jobs := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = $1`, name)
		missed := count(t, st, `SELECT coalesce(sum(count), 0) FROM gaffer.cron_occurrences WHERE entry = $1 AND status = 'missed'`, name)
		if jobs != w.jobs || missed != w.missed {
			t.Errorf("%s: %d jobs, %d missed; want %d and %d", name, jobs, missed, w.jobs, w.missed)
		}
		e, _ := c.Get(ctx, "", name)
		if !e.NextRunAt.After(time.Now().Add(-time.Second)) {
			t.Errorf("%s: cursor left in the past: %s", name, e.NextRunAt)
		}
	}
	// "once" fired for the latest missed instant; "all" fired them in order.
	var at time.Time
	st.Pool().QueryRow(ctx, `SELECT cron_at FROM gaffer.jobs WHERE cron_entry = 'once'`).Scan(&at)
	if d := time.Since(at); d > 40*time.Second || d < 25*time.Second {
		t.Errorf("once fired for the instant %s ago; want the latest missed (30s ago)", d)
	}
	// Running again changes nothing: every instant was handled once.
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry IS NOT NULL`); n != 17 {
		t.Fatalf("%d cron jobs after a second pass, want 17", n)
	}
}

func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	if _, err := c.Create(ctx, cron.Entry{Name: "o", Schedule: "@every 1m", Overlap: "skip", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	// Three on-time occurrences in one pass (a long grace): the first fires,
	// the other two find its job unfinished.
	moveCursor(t, st, "o", 2*time.Minute+30*time.Second)
	s := newScheduler(t, st, time.Hour)
	s.RunOnce(ctx)
	if jobs, skipped := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'o'`),
		count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'o' AND status = 'skipped'`); jobs != 1 || skipped != 2 {
		t.Fatalf("%d jobs, %d skipped; want 1 and 2", jobs, skipped)
	}
	// Still unfinished: the next occurrence is skipped too.
	moveCursor(t, st, "o", 0)
	s.RunOnce(ctx)
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'o'`); n != 1 {
		t.Fatalf("%d jobs while the first is unfinished", n)
	}
	// Once it finishes, the next occurrence fires.
	st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET state = 'completed', finalized_at = now() WHERE cron_entry = 'o'`)
	st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET next_run_at = now() WHERE name = 'o'`)
	s.RunOnce(ctx)
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'o'`); n != 2 {
		t.Fatalf("%d jobs after the first finished, want 2", n)
	}
}

// Several schedulers racing over the same entries (no fence) still make
// one job per occurrence: the occurrence key and the cursor CAS hold.
func TestConcurrentSchedulersFireOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	for _, n := range []string{"a", "b", "c"} {
		c.Create(ctx, cron.Entry{Name: n, Schedule: "@every 1m", Missed: "all", Job: cron.JobTemplate{Kind: "k"}})
		moveCursor(t, st, n, 30*time.Minute+30*time.Second)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newScheduler(t, st, time.Minute)
			for range 3 {
				if _, err := s.RunOnce(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry IS NOT NULL`); n != 93 {
		t.Fatalf("%d jobs for 3 entries × 31 occurrences", n)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences`); n != 93 {
		t.Fatalf("%d history rows", n)
	}
}

// Fires land within 100ms of their instant (p99), by the database clock,
// and a changed entry wakes the scheduler early.
func TestOnTimeFiring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	s := newScheduler(t, st, time.Minute)
	s.Start(ctx)
	defer s.Stop()
	// Created while the scheduler sleeps (nothing due: its sleep is the
	// one-minute maximum); Wake, as the node does on NOTIFY gaffer_cron.
	if _, err := c.Create(ctx, cron.Entry{Name: "tick", Schedule: "@every 1s", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	s.Wake()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'tick'`) < 5 {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 5 occurrences in 10s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var p50, p99, worst float64
	st.Pool().QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l), percentile_cont(0.99) WITHIN GROUP (ORDER BY l), max(l)
		FROM (SELECT extract(epoch FROM j.created_at - o.scheduled_at) * 1000 AS l
		      FROM gaffer.cron_occurrences o JOIN gaffer.jobs j ON j.id = o.job_id WHERE o.entry = 'tick') x`).Scan(&p50, &p99, &worst)
	t.Logf("lateness: p50 %.1fms, p99 %.1fms, max %.1fms", p50, p99, worst)
	if p99 > 100 {
		t.Fatalf("p99 lateness %.1fms, want under 100ms", p99)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'tick' AND status <> 'fired'`); n != 0 {
		t.Fatalf("%d occurrences not fired", n)
	}
}

// The scheduler really stopped across several occurrences (not a moved
// cursor): with a 1s grace, "skip" records the ones it missed, "all"
// fires them, and neither leaves a gap in the history.
func TestStoppedSchedulerAppliesPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	for _, p := range []string{"skip", "all"} {
		if _, err := c.Create(ctx, cron.Entry{Name: p, Schedule: "@every 1s", Missed: p, Job: cron.JobTemplate{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	s := newScheduler(t, st, time.Second)
	s.Start(ctx)
	time.Sleep(2500 * time.Millisecond)
	s.Stop()
	time.Sleep(4 * time.Second) // the cluster is down across ~4 occurrences
	s2 := newScheduler(t, st, time.Second)
	s2.Start(ctx)
	time.Sleep(1500 * time.Millisecond)
	s2.Stop()
	for _, p := range []string{"skip", "all"} {
		missed := count(t, st, `SELECT coalesce(sum(count), 0) FROM gaffer.cron_occurrences WHERE entry = $1 AND status = 'missed'`, p)
		fired := count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = $1 AND status = 'fired'`, p)
		jobs := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = $1`, p)
		// Every instant from the first to the last handled is in the history once.
		span := count(t, st, `SELECT (extract(epoch FROM max(scheduled_at) - min(scheduled_at)))::int + 1 FROM gaffer.cron_occurrences WHERE entry = $1`, p)
		t.Logf("%s: %d fired, %d missed, %d jobs, %d instants spanned", p, fired, missed, jobs, span)
		if fired+missed != span || jobs != fired {
			t.Errorf("%s: %d fired + %d missed ≠ %d instants, or %d jobs", p, fired, missed, span, jobs)
		}
		switch p {
		case "skip":
			if missed < 2 {
				t.Errorf("skip: %d missed; the stop should have missed at least 2", missed)
			}
		case "all":
			if missed != 0 {
				t.Errorf("all: %d missed", missed)
			}
		}
	}
}
