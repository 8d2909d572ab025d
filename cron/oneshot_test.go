package cron_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// atIn is an "@at" schedule d from the database's now, in whole seconds.
func atIn(t *testing.T, st *store.Store, d time.Duration) (string, time.Time) {
	t.Helper()
	at := dbNow(t, st).Add(d).Truncate(time.Second)
	return "@at " + at.UTC().Format(time.RFC3339), at
}

// makeDue rewrites a one-shot entry as if its instant, ago, had come:
// schedule and cursor together, as the passage of time would leave them.
func makeDue(t *testing.T, st *store.Store, name string, ago time.Duration) time.Time {
	t.Helper()
	spec, at := atIn(t, st, -ago)
	if _, err := st.Pool().Exec(context.Background(), `UPDATE gaffer.cron_entries SET schedule = $2, next_run_at = CASE WHEN done_at IS NULL THEN $3::timestamptz END WHERE name = $1`, name, spec, at); err != nil {
		t.Fatal(err)
	}
	return at
}

// A one-shot fires once, at its instant, then shows as done: no next
// occurrence, no next fire times, nothing more fired however often the
// scheduler runs.
func TestOneShotFiresOnceThenDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	spec, at := atIn(t, st, time.Hour)
	e, err := c.Create(ctx, cron.Entry{Name: "once", Schedule: spec, Job: cron.JobTemplate{Kind: "k"}})
	if err != nil || !e.NextRunAt.Equal(at) || e.Done {
		t.Fatalf("created %+v %v; want next %s", e, err, at)
	}
	if times, err := c.NextTimes(ctx, "", "once", 5); err != nil || len(times) != 1 || !times[0].Equal(at) {
		t.Fatalf("next times of a pending one-shot: %v %v", times, err)
	}
	at = makeDue(t, st, "once", 200*time.Millisecond)
	s := newScheduler(t, st, time.Minute)
	for range 3 {
		if _, err := s.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'once' AND cron_at = $1`, at); n != 1 {
		t.Fatalf("%d jobs for the one-shot, want 1", n)
	}
	e = mustGet(t, c, "once")
	if !e.Done || e.DoneAt == nil || !e.NextRunAt.IsZero() || e.LastJobID == 0 || !e.LastOccurrenceAt.Equal(at) {
		t.Fatalf("after firing: %+v", e)
	}
	if times, err := c.NextTimes(ctx, "", "once", 5); err != nil || len(times) != 0 {
		t.Fatalf("next times of a done one-shot: %v %v", times, err)
	}
	// Done, it neither counts as due nor keeps the scheduler awake.
	if wait, err := s.RunOnce(ctx); err != nil || wait < time.Minute-time.Second {
		t.Fatalf("with only a done entry, the scheduler waits %s (%v); want its longest sleep", wait, err)
	}
	// Applying the same definition again changes nothing, even though
	// its instant is now past; pausing and resuming leaves it done.
	if _, res, err := c.Put(ctx, cron.Entry{Name: "once", Schedule: e.Schedule, Job: cron.JobTemplate{Kind: "k"}}, cron.PutOptions{}); err != nil || res.Changed() {
		t.Fatalf("re-put of a done one-shot: %+v %v", res, err)
	}
	c.Pause(ctx, "", "once")
	if e, err := c.Resume(ctx, "", "once"); err != nil || !e.Done || !e.NextRunAt.IsZero() {
		t.Fatalf("resume of a done one-shot: %+v %v", e, err)
	}
	// Its zone changed (the offset-qualified instant is the same): done still.
	if _, res, err := c.Put(ctx, cron.Entry{Name: "once", Schedule: e.Schedule, Timezone: "Asia/Tokyo", Job: cron.JobTemplate{Kind: "k"}}, cron.PutOptions{}); err != nil || !mustGet(t, c, "once").Done {
		t.Fatalf("zone change of a done one-shot: %+v %v", res, err)
	}
	// Re-armed with a new instant, it is pending again.
	spec2, at2 := atIn(t, st, 2*time.Hour)
	if e, err := c.Update(ctx, "", "once", cron.Update{Schedule: &spec2}); err != nil || e.Done || !e.NextRunAt.Equal(at2) {
		t.Fatalf("re-armed: %+v %v", e, err)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'once'`); n != 1 {
		t.Fatalf("%d jobs in all", n)
	}
}

// Paused before its instant, a one-shot is held; resumed after it, the
// missed-fire policy decides: skip is done without firing, once and all
// fire it once. Resumed before it, it fires at its time.
func TestOneShotPausedPastItsTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	s := newScheduler(t, st, time.Minute)
	for _, p := range []string{"skip", "once", "all"} {
		t.Run(p, func(t *testing.T) {
			spec, _ := atIn(t, st, time.Hour)
			if _, err := c.Create(ctx, cron.Entry{Name: p, Schedule: spec, Missed: p, Job: cron.JobTemplate{Kind: "k"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Pause(ctx, "", p); err != nil {
				t.Fatal(err)
			}
			at := makeDue(t, st, p, 5*time.Minute) // its time came, five minutes ago, while paused
			s.RunOnce(ctx)
			if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = $1`, p); n != 0 {
				t.Fatalf("a paused one-shot fired: %d jobs", n)
			}
			e, err := c.Resume(ctx, "", p)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				s.RunOnce(ctx)
			}
			jobs := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = $1 AND cron_at = $2`, p, at)
			hist, _ := c.History(ctx, "", p, time.Time{}, 10)
			after := mustGet(t, c, p)
			switch p {
			case "skip":
				if !e.Done || jobs != 0 || len(hist) != 1 || hist[0].Status != "missed" || !strings.Contains(hist[0].Reason, "paused") {
					t.Fatalf("skip: done %v, %d jobs, history %+v", e.Done, jobs, hist)
				}
			default:
				if e.Done || !e.NextRunAt.Equal(at) || jobs != 1 || len(hist) != 1 || hist[0].Status != "fired" || !after.Done {
					t.Fatalf("%s: resumed %+v, %d jobs, history %+v, done after %v", p, e, jobs, hist, after.Done)
				}
			}
			if !after.Done || !after.NextRunAt.IsZero() {
				t.Fatalf("%s: not done after resuming: %+v", p, after)
			}
		})
	}
	t.Run("resumed before its time", func(t *testing.T) {
		spec, at := atIn(t, st, time.Hour)
		c.Create(ctx, cron.Entry{Name: "early", Schedule: spec, Job: cron.JobTemplate{Kind: "k"}})
		c.Pause(ctx, "", "early")
		if e, err := c.Resume(ctx, "", "early"); err != nil || e.Done || !e.NextRunAt.Equal(at) {
			t.Fatalf("resumed before its time: %+v %v", e, err)
		}
	})
}

// A one-shot in the past, too far ahead, or garbage is refused, and
// nothing is written; a local time is read in the entry's zone with the
// DST rule.
func TestOneShotValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	past, _ := atIn(t, st, -time.Second)
	far, _ := atIn(t, st, 10*366*24*time.Hour)
	for spec, want := range map[string]string{past: "not in the future", far: "10 years", "@at next tuesday": "RFC 3339", "@at 2030-01-01T09:00:00.25Z": "whole seconds"} {
		_, err := c.Create(ctx, cron.Entry{Name: "x", Schedule: spec, Job: cron.JobTemplate{Kind: "k"}})
		var se *cron.ScheduleError
		if !errors.As(err, &se) || se.Field != "schedule" || !strings.Contains(err.Error(), want) {
			t.Errorf("create %q: %v; want a schedule error containing %q", spec, err, want)
		}
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_entries`); n != 0 {
		t.Fatalf("%d entries written by refused creates", n)
	}
	// New York springs forward on 2030-03-10: 02:30 does not exist there,
	// and fires at the transition, 03:00 EDT.
	e, err := c.Create(ctx, cron.Entry{Name: "local", Schedule: "@at 2030-03-10T02:30", Timezone: "America/New_York", Job: cron.JobTemplate{Kind: "k"}})
	if err != nil || !e.NextRunAt.Equal(time.Date(2030, 3, 10, 7, 0, 0, 0, time.UTC)) {
		t.Fatalf("local one-shot: %+v %v", e.NextRunAt, err)
	}
	// An existing entry cannot be moved into the past either.
	if _, err := c.Update(ctx, "", "local", cron.Update{Schedule: &past}); err == nil || !strings.Contains(err.Error(), "not in the future") {
		t.Fatalf("update into the past: %v", err)
	}
	if got := mustGet(t, c, "local"); got.Schedule != "@at 2030-03-10T02:30" {
		t.Fatalf("a refused update changed the entry: %+v", got)
	}
}
