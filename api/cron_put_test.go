package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
)

type putOut struct {
	Entry struct {
		Tenant, Name, Schedule, Missed string
		Paused, Done                   bool
		NextRunAt                      *time.Time `json:"next_run_at"`
		UpdatedAt                      time.Time  `json:"updated_at"`
	}
	Created, Changed bool
	Changes          []string
	DryRun           bool `json:"dry_run"`
}

// PUT /v1/cron/{name}: 201 when it creates, 200 with changed false for
// the same body again (nothing written), 200 with the changed fields
// otherwise; dry_run reports and writes nothing; bad input writes
// nothing; a tenant token acts only for its tenant.
func TestCronPut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := `{"schedule":"30 2 * * *","timezone":"Europe/London","job":{"kind":"report","args":{"x":1},"timeout":"10m"}}`
	var out putOut
	r := e.do(e.writer, "PUT", "/v1/cron/nightly", body)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	r.decode(t, &out)
	if !out.Created || !out.Changed || out.Entry.Name != "nightly" || out.Entry.NextRunAt == nil {
		t.Fatalf("created %+v", out)
	}
	first := out.Entry.UpdatedAt
	// A dry run of a create: 200, created, nothing written.
	dryNew := putOut{}
	if r := e.do(e.writer, "PUT", "/v1/cron/later?dry_run=1", body); r.Status != 200 {
		t.Fatalf("dry create: %d %s", r.Status, r.Body)
	} else {
		r.decode(t, &dryNew)
	}
	if !dryNew.Created || !dryNew.DryRun || dryNew.Entry.NextRunAt == nil || e.count(`SELECT count(*) FROM gaffer.cron_entries WHERE name = 'later'`) != 0 {
		t.Fatalf("dry create: %+v", dryNew)
	}
	// Again, spelled differently: nothing changes.
	r = e.do(e.writer, "PUT", "/v1/cron/nightly", `{"name":"nightly","job":{"args":{ "x": 1.0 },"timeout":"600s","kind":"report"},"timezone":"Europe/London","schedule":"30 2 * * *","missed":"skip"}`)
	out = putOut{}
	r.decode(t, &out)
	if r.Status != 200 || out.Created || out.Changed || len(out.Changes) != 0 || !out.Entry.UpdatedAt.Equal(first) {
		t.Fatalf("same again: %d %+v", r.Status, out)
	}
	// Paused by an operator; a PUT that says nothing of paused keeps it.
	e.do(e.writer, "PATCH", "/v1/cron/nightly", `{"paused":true}`)
	out = putOut{}
	e.do(e.writer, "PUT", "/v1/cron/nightly", body).decode(t, &out)
	if out.Changed || !out.Entry.Paused {
		t.Fatalf("a PUT without paused undid a pause: %+v", out)
	}
	// A paused entry fires nothing: it has no next run.
	if out.Entry.NextRunAt != nil {
		t.Fatalf("a paused entry's next_run_at is %s, want null", out.Entry.NextRunAt)
	}
	// A dry run of a change reports it and writes nothing.
	changed := strings.Replace(body, "30 2", "45 3", 1)
	out = putOut{}
	e.do(e.writer, "PUT", "/v1/cron/nightly?dry_run=true", changed).decode(t, &out)
	if !out.DryRun || !out.Changed || !slices.Equal(out.Changes, []string{"schedule"}) || out.Entry.Schedule != "45 3 * * *" {
		t.Fatalf("dry run: %+v", out)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.cron_entries WHERE schedule = '30 2 * * *'`); n != 1 {
		t.Fatal("a dry run wrote")
	}
	out = putOut{}
	e.do(e.writer, "PUT", "/v1/cron/nightly", changed).decode(t, &out)
	if !out.Changed || !slices.Equal(out.Changes, []string{"schedule"}) || out.Entry.Schedule != "45 3 * * *" {
		t.Fatalf("change: %+v", out)
	}
	// Bad input: the problem names the field; nothing is written.
	before := e.count(`SELECT count(*) FROM gaffer.cron_entries WHERE schedule = '45 3 * * *' AND updated_at = (SELECT max(updated_at) FROM gaffer.cron_entries)`)
	for _, c := range []struct{ path, body, code, field string }{
		{"/v1/cron/nightly", `{"schedule":"@at yesterday","job":{"kind":"report"}}`, "invalid_field", "schedule"},
		{"/v1/cron/nightly", `{"schedule":"@at 2001-01-01T00:00:00Z","job":{"kind":"report"}}`, "invalid_field", "schedule"},
		{"/v1/cron/nightly", `{"schedule":"@daily","job":{"kind":"report"},"shedule":"x"}`, "unknown_field", "shedule"},
		{"/v1/cron/nightly", `{"schedule":"@daily","job":{"kind":"report","queue":"No Queue"}}`, "invalid_field", "job.queue"},
		{"/v1/cron/nightly", `{"schedule":"@daily"}`, "invalid_field", "job.kind"},
		{"/v1/cron/nightly", `{"name":"other","schedule":"@daily","job":{"kind":"k"}}`, "invalid_field", "name"},
		{"/v1/cron/nightly?dry_run=maybe", body, "invalid_parameter", "dry_run"},
		{"/v1/cron/has%20space", body, "invalid_parameter", "name"},
	} {
		code := 400
		p := e.expectProblem(e.do(e.writer, "PUT", c.path, c.body), code, c.code)
		if p.Field != c.field {
			t.Errorf("PUT %s %s: field %q, want %q", c.path, c.body, p.Field, c.field)
		}
	}
	if n := e.count(`SELECT count(*) FROM gaffer.cron_entries`); n != 1 || before != 1 {
		t.Fatalf("refused PUTs wrote: %d entries", n)
	}
	if got := e.count(`SELECT count(*) FROM gaffer.cron_entries WHERE schedule = '45 3 * * *' AND updated_at = (SELECT max(updated_at) FROM gaffer.cron_entries)`); got != 1 {
		t.Fatal("a refused PUT changed the entry")
	}
	// Tenants: a tenant token writes its own, and is refused another's.
	if r := e.do(e.acme, "PUT", "/v1/cron/nightly", body); r.Status != 201 {
		t.Fatalf("acme's own nightly: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do(e.acme, "PUT", "/v1/cron/nightly?tenant=default", body), 403, "forbidden")
	e.expectProblem(e.do(e.reader, "PUT", "/v1/cron/nightly", body), 403, "forbidden")
	out = putOut{}
	e.do(e.admin, "PUT", "/v1/cron/nightly?tenant=zeta", body).decode(t, &out)
	if !out.Created || out.Entry.Tenant != "zeta" {
		t.Fatalf("admin's PUT for zeta: %+v", out)
	}
}

// The entry's status and a one-shot's life on the wire: done, next_run_at
// null, no next times; a scheduler error with its time.
func TestCronStatusOnTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	if r := e.do(e.writer, "PUT", "/v1/cron/once", `{"schedule":"@at `+at+`","job":{"kind":"k"}}`); r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var next struct{ Times []time.Time }
	e.do(e.reader, "GET", "/v1/cron/once/next?n=5", nil).decode(t, &next)
	if len(next.Times) != 1 || next.Times[0].Format(time.RFC3339) != at {
		t.Fatalf("next of a pending one-shot: %+v", next)
	}
	// Its time comes; the scheduler fires it.
	due := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	e.st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET schedule = $1, next_run_at = $2 WHERE name = 'once'`, "@at "+due.Format(time.RFC3339), due)
	s, _ := cron.NewScheduler(cron.SchedulerConfig{Pool: e.st.Pool(), Fence: job.Unfenced{Pool: e.st.Pool()}})
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Done               bool
		NextRunAt          *time.Time `json:"next_run_at"`
		DoneAt             *time.Time `json:"done_at"`
		LastJobID          int64      `json:"last_job_id"`
		LastJobState       string     `json:"last_job_state"`
		LastOccurrenceAt   *time.Time `json:"last_occurrence_at"`
		LastFiredAt        *time.Time `json:"last_fired_at"`
		LastError          string     `json:"last_error"`
		LastErrorAt        *time.Time `json:"last_error_at"`
		ConsecutiveFailure int        `json:"consecutive_failures"`
	}
	r := e.do(e.reader, "GET", "/v1/cron/once", nil)
	r.decode(t, &got)
	if !got.Done || got.NextRunAt != nil || got.DoneAt == nil || got.LastJobID == 0 || got.LastJobState != "pending" ||
		!got.LastOccurrenceAt.Equal(due) || got.LastFiredAt == nil || !strings.Contains(string(r.Body), `"next_run_at":null`) {
		t.Fatalf("a done one-shot: %s", r.Body)
	}
	next.Times = nil
	e.do(e.reader, "GET", "/v1/cron/once/next", nil).decode(t, &next)
	if len(next.Times) != 0 {
		t.Fatalf("next of a done one-shot: %+v", next)
	}
	// A scheduler error, in the list too.
	e.do(e.writer, "PUT", "/v1/cron/broken", `{"schedule":"@every 1h","job":{"kind":"k"}}`)
	e.st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET next_run_at = now() - interval '1 second', job = jsonb_set(job::jsonb, '{queue}', '"No Queue!"')::json WHERE name = 'broken'`)
	s.RunOnce(ctx)
	var list struct {
		Data []struct {
			Name               string
			LastError          string     `json:"last_error"`
			LastErrorAt        *time.Time `json:"last_error_at"`
			ConsecutiveFailure int        `json:"consecutive_failures"`
		}
	}
	e.do(e.reader, "GET", "/v1/cron", nil).decode(t, &list)
	if len(list.Data) != 2 || list.Data[0].Name != "broken" || !strings.Contains(list.Data[0].LastError, "job.queue") ||
		list.Data[0].LastErrorAt == nil || list.Data[0].ConsecutiveFailure != 1 {
		t.Fatalf("listed: %+v", list)
	}
}

// GET /v1/jobs?cron_entry= and ?workflow_run= keep one entry's or one
// run's jobs, within the caller's tenant, and refuse malformed values.
func TestJobsByCronEntryAndWorkflowRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tok := range []string{e.writer, e.acme} {
		e.do(tok, "PUT", "/v1/cron/nightly", `{"schedule":"@daily","job":{"kind":"k"}}`)
		e.do(tok, "POST", "/v1/cron/nightly/trigger", nil)
	}
	e.do(e.writer, "PUT", "/v1/cron/other", `{"schedule":"@daily","job":{"kind":"k"}}`)
	e.do(e.writer, "POST", "/v1/cron/other/trigger", nil)
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k"}`)
	var run struct{ ID int64 }
	e.do(e.writer, "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"k"},{"name":"b","kind":"k","depends_on":["a"]}]}`).decode(t, &run)
	var other struct{ ID int64 }
	e.do(e.writer, "POST", "/v1/workflows", `{"name":"w2","steps":[{"name":"a","kind":"k"}]}`).decode(t, &other)
	type page struct {
		Data []struct {
			ID          int64
			Tenant      string
			CronEntry   string `json:"cron_entry"`
			WorkflowRun int64  `json:"workflow_run"`
		}
	}
	var p page
	e.do(e.reader, "GET", "/v1/jobs?cron_entry=nightly", nil).decode(t, &p)
	if len(p.Data) != 1 || p.Data[0].CronEntry != "nightly" || p.Data[0].Tenant != "default" {
		t.Fatalf("?cron_entry=nightly: %+v", p)
	}
	p = page{}
	e.do(e.admin, "GET", "/v1/jobs?cron_entry=nightly", nil).decode(t, &p)
	if len(p.Data) != 2 {
		t.Fatalf("?cron_entry=nightly across tenants: %+v", p)
	}
	p = page{}
	e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs?workflow_run=%d", run.ID), nil).decode(t, &p)
	if len(p.Data) != 1 || p.Data[0].WorkflowRun != run.ID { // step b waits for a: only a has a job yet
		t.Fatalf("?workflow_run=%d: %+v", run.ID, p)
	}
	p = page{}
	e.do(e.acme, "GET", fmt.Sprintf("/v1/jobs?workflow_run=%d", run.ID), nil).decode(t, &p)
	if len(p.Data) != 0 {
		t.Fatalf("another tenant's run: %+v", p)
	}
	p = page{}
	e.do(e.reader, "GET", "/v1/jobs?cron_entry=none", nil).decode(t, &p)
	if len(p.Data) != 0 {
		t.Fatalf("?cron_entry=none: %+v", p)
	}
	for _, q := range []string{"workflow_run=abc", "workflow_run=0", "workflow_run=-3", "cron_entry=" + strings.Repeat("x", 129)} {
		pr := e.expectProblem(e.do(e.reader, "GET", "/v1/jobs?"+q, nil), 400, "invalid_parameter")
		if want := strings.SplitN(q, "=", 2)[0]; pr.Field != want {
			t.Errorf("?%s: field %q, want %q", q, pr.Field, want)
		}
	}
}

// The jobs Gaffer runs for a workflow's sleep and signal steps are not the
// user's: a list leaves them out unless it asks for them (timers=true),
// names their kind or lists their workflow run. Before, every sleeping
// step's timer showed among the user's jobs.
func TestJobListLeavesTimersOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mine struct{ Job struct{ ID int64 } }
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k"}`).decode(t, &mine)
	var run struct{ ID int64 }
	e.do(e.writer, "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"nap","sleep":"1h"}]}`).decode(t, &run)
	if run.ID == 0 || e.count(`SELECT count(*) FROM gaffer.jobs WHERE kind = 'gaffer.sleep'`) != 1 {
		t.Fatalf("the workflow's sleep step made no timer job (run %d)", run.ID)
	}
	kinds := func(path string) []string {
		t.Helper()
		var p struct{ Data []struct{ Kind string } }
		r := e.do(e.reader, "GET", path, nil)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
		r.decode(t, &p)
		var out []string
		for _, j := range p.Data {
			out = append(out, j.Kind)
		}
		slices.Sort(out)
		return out
	}
	for path, want := range map[string][]string{
		"/v1/jobs":                                      {"k"},
		"/v1/jobs?state=pending":                        {"k"},
		"/v1/jobs?timers=true":                          {"gaffer.sleep", "k"},
		"/v1/jobs?kind=gaffer.sleep":                    {"gaffer.sleep"},
		fmt.Sprintf("/v1/jobs?workflow_run=%d", run.ID): {"gaffer.sleep"},
	} {
		if got := kinds(path); !slices.Equal(got, want) {
			t.Errorf("%s: kinds %v, want %v", path, got, want)
		}
	}
	if r := e.do(e.reader, "GET", "/v1/jobs?timers=yes", nil); r.Status != 400 || !strings.Contains(string(r.Body), "timers") {
		t.Fatalf("timers=yes: %d %s", r.Status, r.Body)
	}
	// Hiding reads no further than the page: a page of one row, the
	// newest, a timer, comes back empty and says where to go on; the
	// next page has the user's job.
	var p struct {
		Data []struct{ ID int64 }
		Next string `json:"next_cursor"`
	}
	e.do(e.reader, "GET", "/v1/jobs?limit=1", nil).decode(t, &p)
	if len(p.Data) != 0 || p.Next == "" {
		t.Fatalf("a page of one timer: %+v, want no item and a cursor", p)
	}
	e.do(e.reader, "GET", "/v1/jobs?limit=1&cursor="+p.Next, nil).decode(t, &p)
	if len(p.Data) != 1 || p.Data[0].ID != mine.Job.ID {
		t.Fatalf("the page after the timer: %+v, want job %d", p, mine.Job.ID)
	}
}
