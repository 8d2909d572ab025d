package cron_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

func dbNow(t *testing.T, st *store.Store) time.Time {
	t.Helper()
	now, err := st.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return now
}

func mustGet(t *testing.T, c *cron.Client, name string) cron.Entry {
	t.Helper()
	e, err := c.Get(context.Background(), "", name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A schedule changed around one of its occurrences: the occurrence gets
// one job or, documented, none, and is in the history once either way.
func TestScheduleChangeAtTheBoundary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	s := newScheduler(t, st, time.Minute)
	put := func(name, schedule string) cron.Entry {
		t.Helper()
		e, _, err := c.Put(ctx, cron.Entry{Name: name, Schedule: schedule, Job: cron.JobTemplate{Kind: "k"}}, cron.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	jobsAt := func(name string, at time.Time) int {
		return count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = $1 AND cron_at = $2`, name, at)
	}

	t.Run("fired, then changed: the occurrence keeps its one job", func(t *testing.T) {
		put("fired", "@every 1h")
		moveCursor(t, st, "fired", 200*time.Millisecond)
		at := mustGet(t, c, "fired").NextRunAt
		if _, err := s.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		e := put("fired", "* * * * * *")
		if !e.NextRunAt.After(at) || jobsAt("fired", at) != 1 {
			t.Fatalf("after the change: next %s (fired %s), %d jobs for it", e.NextRunAt, at, jobsAt("fired", at))
		}
		// The database clock stepped back 30 seconds after the firing (or
		// the edit read it in a transaction begun before the firing):
		// the next occurrence is still after the one that has its job.
		ahead := dbNow(t, st).Add(30 * time.Second).Truncate(time.Second)
		st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET last_occurrence_at = $1 WHERE name = 'fired'`, ahead)
		e = put("fired", "*/1 * * * * *")
		if !e.NextRunAt.After(ahead) {
			t.Fatalf("next %s is not after the last fired occurrence %s", e.NextRunAt, ahead)
		}
	})

	t.Run("due but not yet fired: recorded as missed by the change, no job", func(t *testing.T) {
		put("due", "@every 1h")
		moveCursor(t, st, "due", 300*time.Millisecond)
		at := mustGet(t, c, "due").NextRunAt
		e := put("due", "@every 2h")
		now := dbNow(t, st)
		if !e.NextRunAt.After(now) {
			t.Fatalf("next %s, not after now %s", e.NextRunAt, now)
		}
		hist, _ := c.History(ctx, "", "due", time.Time{}, 10)
		if len(hist) != 1 || !hist[0].ScheduledAt.Equal(at) || hist[0].Status != "missed" || !strings.Contains(hist[0].Reason, "schedule changed") || hist[0].JobID != 0 {
			t.Fatalf("history %+v; want %s missed by the change", hist, at)
		}
		if _, err := s.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'due'`); n != 0 {
			t.Fatalf("%d jobs for an occurrence the change replaced", n)
		}
	})

	t.Run("changed just before: an instant both schedules share fires once", func(t *testing.T) {
		put("before", "@every 1h")
		at := dbNow(t, st).Add(3 * time.Second).Truncate(time.Second)
		st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET next_run_at = $1 WHERE name = 'before'`, at)
		// A daily schedule whose next instant is the pending one.
		e := put("before", fmt.Sprintf("%d %d %d * * *", at.UTC().Second(), at.UTC().Minute(), at.UTC().Hour()))
		if !e.NextRunAt.Equal(at) {
			t.Fatalf("next %s; want the shared instant %s", e.NextRunAt, at)
		}
		if n := count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'before'`); n != 0 {
			t.Fatalf("%d history rows for an instant not yet due", n)
		}
	})
}

// slowFence is a leader that takes a while to write what it decided (a
// loaded database, a GC pause): it widens the window in which an edit
// lands after an occurrence is due but before its firing commits.
type slowFence struct {
	st    *store.Store
	delay time.Duration
}

func (f slowFence) Do(ctx context.Context, fn func(q pgx.Tx) error) error {
	time.Sleep(f.delay)
	return f.st.InTx(ctx, fn)
}

// Edits race a slow scheduler around every occurrence of a one-second
// schedule (the new schedule names the same instants in other words):
// every instant from the first to the last recorded is in the history
// exactly once — fired with one job, or missed by an edit — never twice,
// never silently dropped. Red when an edit moves the cursor past a due
// occurrence without recording it.
func TestScheduleChangesRacingTheLeader(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	specs := []string{"* * * * * *", "*/1 * * * * *", "0-59 * * * * *"}
	if _, _, err := c.Put(ctx, cron.Entry{Name: "tick", Schedule: specs[0], Job: cron.JobTemplate{Kind: "k"}}, cron.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := cron.NewScheduler(cron.SchedulerConfig{Pool: st.Pool(), Fence: slowFence{st, 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start(ctx)
	// Edits land around each second boundary by the database clock: just
	// before it, in the slow leader's window after it, and after it.
	skew := dbNow(t, st).Sub(time.Now())
	offsets := []time.Duration{-80 * time.Millisecond, 40 * time.Millisecond, 120 * time.Millisecond, 600 * time.Millisecond}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= 8; i++ {
			dbClock := time.Now().Add(skew)
			time.Sleep(dbClock.Truncate(time.Second).Add(time.Second + offsets[i%len(offsets)]).Sub(dbClock))
			if _, _, err := c.Put(ctx, cron.Entry{Name: "tick", Schedule: specs[i%len(specs)], Job: cron.JobTemplate{Kind: "k"}}, cron.PutOptions{}); err != nil {
				t.Error(err)
				return
			}
			s.Wake()
		}
	}()
	wg.Wait()
	time.Sleep(1200 * time.Millisecond)
	s.Stop()

	rows, err := st.Pool().Query(ctx, `SELECT scheduled_at, status, count, coalesce(job_id, 0), coalesce(reason, '') FROM gaffer.cron_occurrences WHERE entry = 'tick' ORDER BY scheduled_at`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Time]string{}
	var first, last time.Time
	fired, missed := 0, 0
	for rows.Next() {
		var at time.Time
		var status, reason string
		var n int
		var jobID int64
		rows.Scan(&at, &status, &n, &jobID, &reason)
		if status == "fired" && jobID == 0 {
			t.Errorf("%s fired without a job", at)
		}
		if status == "missed" && !strings.Contains(reason, "schedule changed") {
			t.Errorf("%s missed for another reason: %s", at, reason)
		}
		for k := range n {
			i := at.Add(time.Duration(k) * time.Second)
			if prev, dup := seen[i]; dup {
				t.Errorf("%s recorded twice (%s, %s)", i, prev, status)
			}
			seen[i] = status
			if first.IsZero() {
				first = i
			}
			last = i
		}
		if status == "fired" {
			fired++
		} else {
			missed += n
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i := first; !i.After(last); i = i.Add(time.Second) {
		if _, ok := seen[i]; !ok {
			t.Errorf("%s is missing from the history", i)
		}
	}
	jobs := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'tick'`)
	t.Logf("%d instants: %d fired, %d missed by an edit; %d jobs", len(seen), fired, missed, jobs)
	if jobs != fired || fired < 2 || missed < 1 {
		t.Fatalf("%d jobs for %d fired occurrences, %d missed: the race was not run", jobs, fired, missed)
	}
}
