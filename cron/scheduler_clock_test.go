package cron_test

import (
	"context"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// Without a Wake (its notification lost), the scheduler still finds an
// entry made while it slept: it looks again after MaxSleep of its clock,
// not before. Due times stay the database's, so once it looks, the test
// turns its clock a second at a time until the entry's first instant has
// passed on PostgreSQL's.
func TestSchedulerLooksAgainAfterMaxSleep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	s := newScheduler(t, st, time.Minute) // MaxSleep: the default minute
	f := clock.NewFake(time.Now())
	s.SetClock(f)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !f.WaitForTimers(1, 10*time.Second) {
		t.Fatal("the scheduler is not sleeping on its clock")
	}
	c := cron.NewClient(st.Pool())
	if _, err := c.Create(ctx, cron.Entry{Name: "tick", Schedule: "@every 1s", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute - time.Millisecond)
	if f.Armed() != 1 {
		t.Fatal("the scheduler woke before MaxSleep")
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences`); n != 0 {
		t.Fatalf("%d occurrences recorded before the scheduler looked", n)
	}
	f.Advance(time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'tick'`) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the entry never fired after MaxSleep")
		}
		if f.WaitForTimers(1, 10*time.Millisecond) { // back asleep: the entry was not due yet
			f.Advance(time.Second)
		}
	}
}
