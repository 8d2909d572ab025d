package cron_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// After a firing, the entry says when it fired, for which instant, which
// job it made and that job's state now. A trigger by hand leaves it be.
func TestStatusAfterFire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	if _, err := c.Create(ctx, cron.Entry{Name: "e", Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, c, "e"); e.LastJobID != 0 || e.LastFiredAt != nil || e.LastOccurrenceAt != nil || e.LastJobState != "" {
		t.Fatalf("a new entry has a status: %+v", e.Status)
	}
	moveCursor(t, st, "e", 100*time.Millisecond)
	at := mustGet(t, c, "e").NextRunAt
	if _, err := newScheduler(t, st, time.Minute).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var jobID int64
	var created time.Time
	st.Pool().QueryRow(ctx, `SELECT id, created_at FROM gaffer.jobs WHERE cron_entry = 'e'`).Scan(&jobID, &created)
	e := mustGet(t, c, "e")
	if e.LastJobID != jobID || e.LastJobState != "pending" || e.LastOccurrenceAt == nil || !e.LastOccurrenceAt.Equal(at) ||
		e.LastFiredAt == nil || !e.LastFiredAt.Equal(created) || e.ConsecutiveFailures != 0 || e.LastError != "" {
		t.Fatalf("status after a fire: %+v; want job %d pending, occurrence %s, fired %s", e.Status, jobID, at, created)
	}
	st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET state = 'completed', finalized_at = now() WHERE id = $1`, jobID)
	if e := mustGet(t, c, "e"); e.LastJobState != "completed" {
		t.Fatalf("last job state %q, want completed", e.LastJobState)
	}
	if _, err := c.Trigger(ctx, "", "e"); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, c, "e"); e.LastJobID != jobID {
		t.Fatalf("a trigger changed the status: %+v", e.Status)
	}
	// Listed entries carry the status too.
	if list, _ := c.List(ctx, "", cron.Cursor{}, 10); len(list) != 1 || list[0].LastJobID != jobID || list[0].LastJobState != "completed" {
		t.Fatalf("listed %+v", list)
	}
}

// refuseKind makes every insert of a job of kind fail, as a database
// constraint or trigger would.
func refuseKind(t *testing.T, st *store.Store, kind string) func() {
	t.Helper()
	ctx := context.Background()
	_, err := st.Pool().Exec(ctx, `
		CREATE FUNCTION gaffer.test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'jobs of kind % are refused here', NEW.kind; END $$;
		CREATE TRIGGER test_refuse BEFORE INSERT ON gaffer.jobs FOR EACH ROW WHEN (NEW.kind = '`+kind+`') EXECUTE FUNCTION gaffer.test_refuse();`)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := st.Pool().Exec(ctx, `DROP TRIGGER test_refuse ON gaffer.jobs; DROP FUNCTION gaffer.test_refuse()`); err != nil {
			t.Fatal(err)
		}
	}
}

// An entry the scheduler cannot fire gets the error on it, with its time
// and a count of consecutive failures; it is held back by a backoff (no
// spinning) and holds up no other entry; an edit retries it at once, and
// a firing that works ends the run of failures.
func TestSchedulerErrorIsRecordedOnTheEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	for _, e := range []cron.Entry{
		{Name: "boom", Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "boom"}},
		{Name: "fine", Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "ok"}},
	} {
		if _, err := c.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	allow := refuseKind(t, st, "boom")
	moveCursor(t, st, "boom", 2*time.Second) // first in line
	moveCursor(t, st, "fine", time.Second)
	boomAt := mustGet(t, c, "boom").NextRunAt
	s := newScheduler(t, st, time.Minute)
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatalf("an entry's own failure ended the pass: %v", err)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'fine'`); n != 1 {
		t.Fatalf("the failing entry held up another: %d jobs for fine", n)
	}
	e := mustGet(t, c, "boom")
	if !strings.Contains(e.LastError, "jobs of kind boom are refused here") || e.LastErrorAt == nil || e.ConsecutiveFailures != 1 ||
		e.RetryAt == nil || !e.RetryAt.After(*e.LastErrorAt) || !e.NextRunAt.Equal(boomAt) {
		t.Fatalf("status after a failed firing: %+v, next %s", e.Status, e.NextRunAt)
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'boom'`) + count(t, st, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'boom'`); n != 0 {
		t.Fatalf("a failed firing left %d rows", n)
	}
	// Held back: the next pass leaves it alone and sleeps until the backoff ends.
	wait, err := s.RunOnce(ctx)
	if err != nil || wait <= 0 || wait > 1100*time.Millisecond {
		t.Fatalf("during the backoff: wait %s, %v; want a sleep of up to 1s", wait, err)
	}
	if e := mustGet(t, c, "boom"); e.ConsecutiveFailures != 1 {
		t.Fatalf("retried during its backoff: %d failures", e.ConsecutiveFailures)
	}
	// After it, another failure doubles the backoff.
	st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET retry_at = now() WHERE name = 'boom'`)
	s.RunOnce(ctx)
	if e := mustGet(t, c, "boom"); e.ConsecutiveFailures != 2 || e.RetryAt.Sub(*e.LastErrorAt).Round(time.Second) != 2*time.Second {
		t.Fatalf("second failure: %+v", e.Status)
	}
	// Fixed, and edited: the edit clears the backoff, the next pass fires.
	allow()
	args := cron.JobTemplate{Kind: "boom", Args: []byte(`{"fixed":true}`)}
	if e, err := c.Update(ctx, "", "boom", cron.Update{Job: &args}); err != nil || e.RetryAt != nil {
		t.Fatalf("edit: %+v %v", e, err)
	}
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	e = mustGet(t, c, "boom")
	if e.ConsecutiveFailures != 0 || e.LastJobID == 0 || e.LastJobState != "pending" || !strings.Contains(e.LastError, "refused") || e.RetryAt != nil {
		t.Fatalf("after recovering: %+v", e.Status)
	}
}

// A template or schedule that no longer passes (edited by hand, or rules
// that tightened) is reported on the entry by field, not fired.
func TestBrokenEntryIsReportedByField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	for _, n := range []string{"badqueue", "badschedule"} {
		if _, err := c.Create(ctx, cron.Entry{Name: n, Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
		moveCursor(t, st, n, time.Second)
	}
	st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET job = jsonb_set(job::jsonb, '{queue}', '"Not A Queue!"')::json WHERE name = 'badqueue'`)
	st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET schedule = '0 0 30 2 *' WHERE name = 'badschedule'`)
	if _, err := newScheduler(t, st, time.Minute).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"badqueue": "job.queue", "badschedule": "never fires"} {
		if e := mustGet(t, c, name); !strings.Contains(e.LastError, want) || e.ConsecutiveFailures != 1 {
			t.Errorf("%s: status %+v; want an error about %s", name, e.Status, want)
		}
	}
	if n := count(t, st, `SELECT count(*) FROM gaffer.jobs`); n != 0 {
		t.Fatalf("%d jobs from broken entries", n)
	}
}

// notLeader is a node that cannot prove it leads.
type notLeader struct{}

func (notLeader) Do(context.Context, func(pgx.Tx) error) error { return job.ErrNotLeader }

// A node that is not the leader records nothing on the entries: not
// leading is not the entry's failure.
func TestNotLeadingIsNotAnEntryError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	if _, err := c.Create(ctx, cron.Entry{Name: "e", Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	moveCursor(t, st, "e", time.Second)
	s, _ := cron.NewScheduler(cron.SchedulerConfig{Pool: st.Pool(), Fence: notLeader{}})
	if _, err := s.RunOnce(ctx); !errors.Is(err, job.ErrNotLeader) {
		t.Fatalf("RunOnce: %v, want ErrNotLeader", err)
	}
	if e := mustGet(t, c, "e"); e.ConsecutiveFailures != 0 || e.LastError != "" {
		t.Fatalf("a follower recorded an error: %+v", e.Status)
	}
}

// An entry says why its work fails: its last job that ended failed, that
// job's last error and when — through a failure on the job's last
// attempt and through a lease lost on it — and keeps saying it after a
// later job of the entry succeeds. A job that fails with attempts left
// is not a failure of the entry's work yet.
func TestStatusTellsWhyTheEntrysJobFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c := cron.NewClient(st.Pool())
	if _, err := c.Create(ctx, cron.Entry{Name: "e", Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "k", MaxAttempts: 2}}); err != nil {
		t.Fatal(err)
	}
	take := func(ttl time.Duration) store.Lease {
		t.Helper()
		jobs, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 1, Token: time.Now().UnixNano(), LeaseTTL: ttl, Node: "n1"})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %d jobs, %v", len(jobs), err)
		}
		return store.Lease{ID: jobs[0].ID, Attempt: jobs[0].Attempt, Token: jobs[0].LeaseToken}
	}
	first, err := c.Trigger(ctx, "", "e")
	if err != nil {
		t.Fatal(err)
	}
	l := take(time.Minute)
	if _, err := st.FailJob(ctx, store.Failure{Lease: l, Message: "smtp: 421 try later", Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, c, "e"); e.LastFailedJobID != 0 || e.LastFailedError != "" || e.LastFailedAt != nil {
		t.Fatalf("a job with an attempt left counts as failed: %+v", e.Status)
	}
	l = take(time.Minute)
	if _, err := st.FailJob(ctx, store.Failure{Lease: l, Message: "smtp: 550 mailbox unavailable", Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	e := mustGet(t, c, "e")
	if e.LastFailedJobID != first || e.LastFailedError != "smtp: 550 mailbox unavailable" || e.LastFailedAt == nil {
		t.Fatalf("after job %d failed on its last attempt: %+v", first, e.Status)
	}
	// The next job is lost on its last attempt (its node died).
	second, err := c.Trigger(ctx, "", "e")
	if err != nil {
		t.Fatal(err)
	}
	st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET max_attempts = 1 WHERE id = $1`, second)
	take(time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	if _, err := st.RescueJobs(ctx, nil, "", 10, "lease expired: node n1 stopped answering"); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, c, "e"); e.LastFailedJobID != second || e.LastFailedError != "lease expired: node n1 stopped answering" {
		t.Fatalf("after job %d was lost on its last attempt: %+v", second, e.Status)
	}
	// Two of its jobs lost at once, in one rescue: the later one is told.
	var lost [2]int64
	for i := range lost {
		if lost[i], err = c.Trigger(ctx, "", "e"); err != nil {
			t.Fatal(err)
		}
		st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET max_attempts = 1 WHERE id = $1`, lost[i])
		take(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if rescued, err := st.RescueJobs(ctx, nil, "", 10, "lost together"); err != nil || len(rescued) != 2 {
		t.Fatalf("rescue of two: %v, %v", rescued, err)
	}
	if e := mustGet(t, c, "e"); e.LastFailedJobID != max(lost[0], lost[1]) || e.LastFailedError != "lost together" {
		t.Fatalf("after jobs %v were lost in one rescue: %+v", lost, e.Status)
	}
	// A later job succeeds: the failure is still told, and listed.
	if _, err := c.Trigger(ctx, "", "e"); err != nil {
		t.Fatal(err)
	}
	l = take(time.Minute)
	if _, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: l}}); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.List(ctx, "", cron.Cursor{}, 10); len(list) != 1 || list[0].LastFailedJobID != max(lost[0], lost[1]) || list[0].LastFailedError == "" {
		t.Fatalf("listed after a success: %+v", list[0].Status)
	}
}
