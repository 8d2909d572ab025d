package cron_test

import (
	"context"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// An edit that races a pause and a firing keeps both: the pause is not
// undone and the scheduler's cursor is not written back stale. The other
// writer holds the entry's row while the edit starts, then pauses it and
// moves its cursor (as a firing does) and commits; the edit must apply on
// top of that. Red when Update reads the entry without locking it.
func TestUpdateRacingPauseAndFiringKeepsBoth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	if _, err := c.Create(ctx, cron.Entry{Name: "e", Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "old.kind"}}); err != nil {
		t.Fatal(err)
	}
	moved := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

	other, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, `SELECT 1 FROM gaffer.cron_entries WHERE name = 'e' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	edited := make(chan error, 1)
	go func() {
		_, err := c.Update(ctx, "", "e", cron.Update{Job: &cron.JobTemplate{Kind: "new.kind"}})
		edited <- err
	}()
	// The edit is waiting on the row (to read it, or — without the lock —
	// to write what it read before).
	deadline := time.Now().Add(10 * time.Second)
	for count(t, st, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the edit never waited for the row")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := other.Exec(ctx, `UPDATE gaffer.cron_entries SET paused = true, next_run_at = $1 WHERE name = 'e'`, moved); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-edited; err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "", "e")
	if err != nil {
		t.Fatal(err)
	}
	if got.Job.Kind != "new.kind" || !got.Paused || !got.NextRunAt.Equal(moved) {
		t.Fatalf("after the race: kind %s paused %v next %s; want new.kind, paused, %s", got.Job.Kind, got.Paused, got.NextRunAt, moved)
	}
}
