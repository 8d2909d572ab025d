package cron_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
)

// Put creates, then replaces; the same definition twice changes nothing
// and says so, with args compared as JSON values, not as text.
func TestPutIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	def := func(schedule, args string) cron.Entry {
		return cron.Entry{Name: "report", Schedule: schedule, Timezone: "America/New_York",
			Job: cron.JobTemplate{Kind: "report.build", Queue: "reports", Args: []byte(args), Timeout: 10 * time.Minute}, Missed: "once"}
	}
	first, res, err := c.Put(ctx, def("30 2 * * *", `{"full":true,"n":1}`), cron.PutOptions{})
	if err != nil || !res.Created || !res.Changed() {
		t.Fatalf("create: %+v %v", res, err)
	}
	if first.Tenant != "default" || first.Overlap != "allow" || first.Job.MaxAttempts != 25 || !first.NextRunAt.After(time.Now()) {
		t.Fatalf("created %+v", first)
	}
	// The same again, args spelled differently: unchanged, nothing written.
	again, res, err := c.Put(ctx, def("30 2 * * *", `{ "n": 1.0, "full": true }`), cron.PutOptions{})
	if err != nil || res.Created || res.Changed() || len(res.Changes) != 0 {
		t.Fatalf("second put: %+v %v", res, err)
	}
	if !again.UpdatedAt.Equal(first.UpdatedAt) || !again.NextRunAt.Equal(first.NextRunAt) {
		t.Fatalf("an unchanged put wrote: updated_at %s → %s, next %s → %s", first.UpdatedAt, again.UpdatedAt, first.NextRunAt, again.NextRunAt)
	}
	// One field at a time, each named.
	for _, step := range []struct {
		e    cron.Entry
		want []string
	}{
		{def("30 3 * * *", `{"full":true,"n":1}`), []string{"schedule"}},
		{def("30 3 * * *", `{"full":false,"n":1}`), []string{"job.args"}},
		{func() cron.Entry {
			e := def("30 3 * * *", `{"full":false,"n":1}`)
			e.Job.Queue, e.Overlap = "", "skip"
			return e
		}(), []string{"job.queue", "overlap"}},
	} {
		got, res, err := c.Put(ctx, step.e, cron.PutOptions{})
		if err != nil || res.Created || !slices.Equal(res.Changes, step.want) {
			t.Fatalf("put %+v: changes %v, want %v (%v)", step.e, res.Changes, step.want, err)
		}
		if got.Schedule != step.e.Schedule {
			t.Fatalf("after put: %+v", got)
		}
		if _, res, _ := c.Put(ctx, step.e, cron.PutOptions{}); res.Changed() {
			t.Fatalf("the same put twice changed %v", res.Changes)
		}
	}
	// An operator's pause survives a put that does not mention it.
	last := def("30 3 * * *", `{"full":false,"n":1}`)
	last.Job.Queue, last.Overlap = "", "skip"
	if _, err := c.Pause(ctx, "", "report"); err != nil {
		t.Fatal(err)
	}
	if got, res, err := c.Put(ctx, last, cron.PutOptions{KeepPaused: true}); err != nil || res.Changed() || !got.Paused {
		t.Fatalf("put keeping the pause: %+v %+v %v", got, res, err)
	}
	if got, res, err := c.Put(ctx, last, cron.PutOptions{}); err != nil || !slices.Equal(res.Changes, []string{"paused"}) || got.Paused {
		t.Fatalf("put resuming: %+v %+v %v", got, res, err)
	}
	// A dry run reports and writes nothing, for a new entry or a change.
	before, _ := c.Get(ctx, "", "report")
	if got, res, err := c.Put(ctx, def("@hourly", `{}`), cron.PutOptions{DryRun: true}); err != nil || len(res.Changes) != 4 || got.Schedule != "@hourly" {
		t.Fatalf("dry change: %+v %+v %v", got, res, err)
	}
	if got, res, err := c.Put(ctx, cron.Entry{Name: "other", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}, cron.PutOptions{DryRun: true}); err != nil || !res.Created || got.NextRunAt.IsZero() {
		t.Fatalf("dry create: %+v %+v %v", got, res, err)
	}
	after, _ := c.Get(ctx, "", "report")
	if after.Schedule != before.Schedule || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a dry run changed the entry: %+v", after)
	}
	if _, err := c.Get(ctx, "", "other"); !errors.Is(err, cron.ErrNotFound) {
		t.Fatalf("a dry run created an entry: %v", err)
	}
}

// Bad input is refused by field, and nothing is written: no new entry,
// no change to an existing one.
func TestPutBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	good := cron.Entry{Name: "e", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}
	if _, _, err := c.Put(ctx, good, cron.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Get(ctx, "", "e")
	now := time.Now().UTC()
	cases := []struct {
		change   func(*cron.Entry)
		field    string
		contains string
	}{
		{func(e *cron.Entry) { e.Schedule = "@at soon" }, "schedule", "RFC 3339"},
		{func(e *cron.Entry) { e.Schedule = "@at " + now.Add(-time.Hour).Format(time.RFC3339) }, "schedule", "not in the future"},
		{func(e *cron.Entry) { e.Schedule = "@at " + now.AddDate(11, 0, 0).Format(time.RFC3339) }, "schedule", "10 years"},
		{func(e *cron.Entry) { e.Timezone = "Nowhere/Special" }, "timezone", "IANA"},
		{func(e *cron.Entry) { e.Job.Queue = "Not A Queue" }, "job.queue", ""},
		{func(e *cron.Entry) { e.Missed = "sometimes" }, "missed", ""},
	}
	for _, name := range []string{"e", "new"} {
		for _, tc := range cases {
			e := good
			e.Name = name
			tc.change(&e)
			_, _, err := c.Put(ctx, e, cron.PutOptions{})
			var ve *job.ValidationError
			var se *cron.ScheduleError
			field := ""
			switch {
			case errors.As(err, &ve):
				field = ve.Field
			case errors.As(err, &se):
				field = se.Field
			}
			if field != tc.field || !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("put %s %+v: %v; want an error on %s containing %q", name, e, err, tc.field, tc.contains)
			}
		}
	}
	after, _ := c.Get(ctx, "", "e")
	if after.Schedule != before.Schedule || after.Timezone != before.Timezone || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a refused put changed the entry: %+v", after)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_entries`); n != 1 {
		t.Fatalf("%d entries after refused puts, want 1", n)
	}
}
