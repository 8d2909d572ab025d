package job_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// claimOne claims the one due job of queue q and leaves it running.
func (e *env) claimOne(q string) {
	e.t.Helper()
	jobs, err := e.st.ClaimJobs(context.Background(), store.ClaimParams{Queue: q, Limit: 1, Token: time.Now().UnixNano(), LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(jobs) != 1 {
		e.t.Fatalf("claim from %s: %d jobs, %v", q, len(jobs), err)
	}
}

func (e *env) state(id int64) (job.State, bool) {
	e.t.Helper()
	j, err := e.client.Get(context.Background(), "", id)
	if errors.Is(err, job.ErrNotFound) {
		return "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return j.State, j.CancelRequested
}

func (e *env) bulk(r job.BulkRequest) job.BulkResult {
	e.t.Helper()
	res, err := e.client.Bulk(context.Background(), r)
	if err != nil {
		e.t.Fatalf("bulk %+v: %v", r, err)
	}
	return res
}

func skipReasons(res job.BulkResult) map[int64]string {
	out := map[int64]string{}
	for _, s := range res.Skipped {
		out[s.ID] = s.Reason
	}
	return out
}

// Bulk cancel acts as Cancel on each job: pending and retrying jobs end
// cancelled, a running one gets its cancel requested; finished jobs and
// another tenant's are left, and a dry run changes nothing.
func TestBulkCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pending := e.enqueue(job.Request{Kind: "k", Tenant: "a", Queue: "q"})
	running := e.enqueue(job.Request{Kind: "k", Tenant: "a", Queue: "run"})
	e.claimOne("run")
	retrying := e.enqueue(job.Request{Kind: "k", Tenant: "a", Queue: "back", MaxAttempts: 3})
	e.claimAndFail("back", store.Failure{RetryDelay: time.Hour, Message: "boom", Kind: "error"})
	done := e.enqueue(job.Request{Kind: "k", Tenant: "a", Queue: "dead", MaxAttempts: 1})
	e.claimAndFail("dead", store.Failure{Message: "boom", Kind: "error"})
	theirs := e.enqueue(job.Request{Kind: "k", Tenant: "b", Queue: "q"})

	dry := e.bulk(job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{Tenant: "a"}, DryRun: true})
	if dry.Matched != 3 || dry.Acted != 0 || dry.More {
		t.Fatalf("dry run = %+v, want 3 matched (pending, running, retrying), nothing acted", dry)
	}
	if st, _ := e.state(pending.ID); st != job.Pending {
		t.Fatalf("the dry run changed job %d: %s", pending.ID, st)
	}

	// By ids: another tenant's id is "not found", a finished one says so.
	ids := []int64{pending.ID, running.ID, retrying.ID, done.ID, theirs.ID, 1 << 40}
	res := e.bulk(job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{Tenant: "a"}, IDs: ids})
	if res.Acted != 3 || res.Cancelling != 1 || res.More {
		t.Fatalf("cancel = %+v, want 3 acted, 1 of them running", res)
	}
	why := skipReasons(res)
	if len(why) != 3 || why[theirs.ID] != "not found" || why[1<<40] != "not found" || !strings.Contains(why[done.ID], "already finished") {
		t.Fatalf("skipped = %v", res.Skipped)
	}
	for _, id := range []int64{pending.ID, retrying.ID} {
		if st, _ := e.state(id); st != job.Cancelled {
			t.Fatalf("job %d is %s after the bulk cancel", id, st)
		}
	}
	if st, req := e.state(running.ID); st != job.Running || !req {
		t.Fatalf("running job: %s, cancel requested %v; want running with its cancel requested", st, req)
	}
	if st, _ := e.state(theirs.ID); st != job.Pending {
		t.Fatalf("tenant b's job is %s after tenant a's bulk cancel", st)
	}

	// Again: nothing left to cancel; the running job says its cancel was
	// requested.
	again := e.bulk(job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{Tenant: "a"}, IDs: []int64{running.ID}})
	if again.Acted != 0 || !strings.Contains(skipReasons(again)[running.ID], "already requested") {
		t.Fatalf("second cancel = %+v", again)
	}
}

// A filter-wide call acts on at most its limit and says more remain; a
// dry run counts at most the limit.
func TestBulkBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enqueueMany("a", "q", 25)
	e.enqueueMany("a", "other", 3)
	f := job.Filter{Tenant: "a", Queue: "q", States: []job.State{job.Pending}}
	dry := e.bulk(job.BulkRequest{Action: job.BulkDelete, Filter: f, Limit: 10, DryRun: true})
	if dry.Matched != 10 || !dry.More {
		t.Fatalf("dry run with limit 10 = %+v, want 10 and more", dry)
	}
	if all := e.bulk(job.BulkRequest{Action: job.BulkDelete, Filter: f, DryRun: true}); all.Matched != 25 || all.More {
		t.Fatalf("dry run = %+v, want 25, no more", all)
	}
	var total int
	for i := 0; ; i++ {
		res := e.bulk(job.BulkRequest{Action: job.BulkDelete, Filter: f, Limit: 10})
		if res.Acted > 10 {
			t.Fatalf("call %d acted on %d jobs, past its limit of 10", i, res.Acted)
		}
		total += res.Acted
		if !res.More {
			break
		}
		if i > 3 {
			t.Fatal("more never ended")
		}
	}
	if total != 25 {
		t.Fatalf("deleted %d jobs of queue q, want 25", total)
	}
	if left := e.bulk(job.BulkRequest{Action: job.BulkDelete, Filter: job.Filter{Tenant: "a"}, DryRun: true}); left.Matched != 3 {
		t.Fatalf("%d jobs left, want the 3 of queue other", left.Matched)
	}
}

// Bulk retry acts as Retry: a retrying job waiting out its backoff is due
// now, a failed job's DLQ entry is replayed into one new job, once.
func TestBulkRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	waiting := e.enqueue(job.Request{Kind: "k", Queue: "back", MaxAttempts: 3})
	e.claimAndFail("back", store.Failure{RetryDelay: time.Hour, Message: "boom", Kind: "error"})
	dead := e.enqueue(job.Request{Kind: "k", Queue: "dead", MaxAttempts: 1, Args: []byte(`{"n":7}`)})
	e.claimAndFail("dead", store.Failure{Message: "boom", Kind: "error"})
	pending := e.enqueue(job.Request{Kind: "k", Queue: "idle"})

	res := e.bulk(job.BulkRequest{Action: job.BulkRetry, IDs: []int64{waiting.ID, dead.ID, pending.ID}})
	if res.Acted != 2 || len(res.Retried) != 2 {
		t.Fatalf("retry = %+v, want 2 acted", res)
	}
	runs := map[int64]int64{}
	for _, r := range res.Retried {
		runs[r.ID] = r.RunID
	}
	if runs[waiting.ID] != waiting.ID || runs[dead.ID] == 0 || runs[dead.ID] == dead.ID {
		t.Fatalf("retried = %+v", res.Retried)
	}
	if j, _ := e.client.Get(ctx, "", waiting.ID); j.State != job.Retrying || time.Until(j.RunAt) > time.Second {
		t.Fatalf("retrying job after the bulk retry: %s, run at %v; want due now", j.State, j.RunAt)
	}
	if nj, err := e.client.Get(ctx, "", runs[dead.ID]); err != nil || nj.State != job.Pending || string(nj.Args) != `{"n":7}` || nj.ReplayOf == 0 {
		t.Fatalf("replay %+v, %v", nj, err)
	}
	if !strings.Contains(skipReasons(res)[pending.ID], "it is pending") {
		t.Fatalf("skipped = %+v", res.Skipped)
	}
	again := e.bulk(job.BulkRequest{Action: job.BulkRetry, Filter: job.Filter{States: []job.State{job.Failed, job.Retrying}}})
	if again.Acted != 0 || again.More {
		t.Fatalf("second retry = %+v, want nothing: the entry is replayed, the retrying job already due", again)
	}
}

// Bulk delete never deletes a running job nor a job of a workflow run
// still running; it deletes finished runs' jobs and leaves DLQ entries.
func TestBulkDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	running := e.enqueue(job.Request{Kind: "k", Queue: "run"})
	e.claimOne("run")
	dead := e.enqueue(job.Request{Kind: "k", Queue: "dead", MaxAttempts: 1})
	e.claimAndFail("dead", store.Failure{Message: "boom", Kind: "error"})
	live := e.enqueue(job.Request{Kind: "k", Queue: "wf"})
	over := e.enqueue(job.Request{Kind: "k", Queue: "wf"})
	var liveRun, overRun int64
	pool := e.st.Pool()
	if err := pool.QueryRow(ctx, `INSERT INTO gaffer.workflow_runs (name) VALUES ('live') RETURNING id`).Scan(&liveRun); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO gaffer.workflow_runs (name, state, finished_at) VALUES ('over', 'completed', now()) RETURNING id`).Scan(&overRun); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE gaffer.jobs SET workflow_run = CASE id WHEN $1::bigint THEN $2::bigint ELSE $4::bigint END, step = 's' WHERE id IN ($1, $3)`,
		live.ID, liveRun, over.ID, overRun); err != nil {
		t.Fatal(err)
	}

	if dry := e.bulk(job.BulkRequest{Action: job.BulkDelete, DryRun: true}); dry.Matched != 2 {
		t.Fatalf("dry run = %+v, want 2 (the failed job, the finished run's)", dry)
	}
	res := e.bulk(job.BulkRequest{Action: job.BulkDelete, IDs: []int64{running.ID, dead.ID, live.ID, over.ID}})
	if res.Acted != 2 {
		t.Fatalf("delete = %+v, want 2 acted", res)
	}
	why := skipReasons(res)
	if !strings.Contains(why[running.ID], "running; cancel it first") || !strings.Contains(why[live.ID], "workflow run still running") {
		t.Fatalf("skipped = %+v", res.Skipped)
	}
	for id, want := range map[int64]bool{running.ID: true, live.ID: true, dead.ID: false, over.ID: false} {
		if _, _, exists := stateOf(e, id); exists != want {
			t.Fatalf("job %d exists = %v, want %v", id, exists, want)
		}
	}
	var entries int
	pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.dlq WHERE job_id = $1`, dead.ID).Scan(&entries)
	if entries != 1 {
		t.Fatalf("the deleted failed job's DLQ entry is gone (%d)", entries)
	}
}

func stateOf(e *env, id int64) (job.State, bool, bool) {
	st, req := e.state(id)
	return st, req, st != ""
}

// Bad requests are refused with the field named, and nothing changes.
func TestBulkValidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.enqueue(job.Request{Kind: "k"})
	many := make([]int64, job.MaxBulkIDs+1)
	for i := range many {
		many[i] = int64(i + 1)
	}
	for _, c := range []struct {
		r     job.BulkRequest
		field string
	}{
		{job.BulkRequest{Action: "purge"}, "action"},
		{job.BulkRequest{Action: job.BulkCancel, IDs: many}, "ids"},
		{job.BulkRequest{Action: job.BulkCancel, IDs: []int64{j.ID, -1}}, "ids[1]"},
		{job.BulkRequest{Action: job.BulkCancel, Limit: job.MaxBulkLimit + 1}, "limit"},
		{job.BulkRequest{Action: job.BulkCancel, Limit: -1}, "limit"},
		{job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{States: []job.State{"lost"}}}, "state"},
		{job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{Queue: strings.Repeat("q", 300)}}, "queue"},
		{job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{BeforeID: 5}}, "filter"},
	} {
		_, err := e.client.Bulk(context.Background(), c.r)
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%+v: error %v, want a validation error of field %s", c.r.Action, err, c.field)
		}
	}
	if st, _ := e.state(j.ID); st != job.Pending {
		t.Fatalf("a refused request changed job %d: %s", j.ID, st)
	}
}

// Search finds jobs by kind or args text (case folded) among the newest
// jobs; CountByState counts per state, capped; NoTimers leaves out
// workflow timers from lists, counts and bulk selections.
func TestSearchAndCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := e.enqueue(job.Request{Kind: "email.send", Tenant: "a", Args: []byte(`{"to":"Alice@example.com"}`)})
	b := e.enqueue(job.Request{Kind: "report.build", Tenant: "a", Args: []byte(`{"month":"2026-11"}`)})
	e.enqueue(job.Request{Kind: "email.send", Tenant: "b", Args: []byte(`{"to":"alice@other.org"}`)})
	e.enqueueMany("a", "bulk", 5)
	timer := e.enqueue(job.Request{Kind: "k", Tenant: "a"})
	if _, err := e.st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET kind = 'gaffer.sleep' WHERE id = $1`, timer.ID); err != nil {
		t.Fatal(err)
	}

	for q, want := range map[string][]int64{"ALICE": {a.ID}, "report": {b.ID}, "2026-11": {b.ID}, "nothing": nil} {
		got, err := e.client.List(ctx, job.Filter{Tenant: "a", Search: q})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, j := range got {
			ids = append(ids, j.ID)
		}
		if len(ids) != len(want) || (len(want) > 0 && ids[0] != want[0]) {
			t.Errorf("search %q = %v, want %v", q, ids, want)
		}
	}
	counts, err := e.client.CountByState(ctx, job.Filter{Tenant: "a", NoTimers: true}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if counts[job.Pending] != 4 || counts[job.Running] != 0 {
		t.Fatalf("counts capped at 4 = %v, want pending 4", counts)
	}
	counts, _ = e.client.CountByState(ctx, job.Filter{Tenant: "a", NoTimers: true}, 100)
	if counts[job.Pending] != 7 {
		t.Fatalf("counts = %v, want pending 7 (the timer left out)", counts)
	}
	counts, _ = e.client.CountByState(ctx, job.Filter{Tenant: "a", Search: "email"}, 100)
	if counts[job.Pending] != 1 {
		t.Fatalf("search counts = %v, want pending 1", counts)
	}
	dry := e.bulk(job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{Tenant: "a", NoTimers: true}, DryRun: true})
	if dry.Matched != 7 {
		t.Fatalf("bulk without timers matched %d, want 7", dry.Matched)
	}
	if _, err := e.client.List(ctx, job.Filter{Search: strings.Repeat("x", job.MaxSearch+1)}); err == nil {
		t.Fatal("an over-long search was accepted")
	}
}
