package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/store"
)

type jobOut struct {
	ID       int64
	Tenant   string
	Kind     string
	Queue    string
	State    string
	Priority int
	Timeout  string
	Args     map[string]any
}

func TestJobEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var created struct {
		Job      jobOut
		Existing bool
	}
	r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"email.send","args":{"to":"ada@example.com"},"queue":"mail","priority":3,"timeout":"30s","delay":"1h"}`)
	if r.Status != 201 {
		t.Fatalf("enqueue: %d %s", r.Status, r.Body)
	}
	r.decode(t, &created)
	j := created.Job
	if j.Kind != "email.send" || j.Queue != "mail" || j.Priority != 3 || j.Timeout != "30s" || j.State != "pending" || j.Args["to"] != "ada@example.com" || created.Existing {
		t.Fatalf("created %+v", created)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1 AND run_at > now() + interval '59 minutes'`, j.ID); n != 1 {
		t.Fatal("delay not applied (by the database clock)")
	}
	// Unique keys: the second enqueue returns the first job, with 200.
	first := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","unique_key":"u1"}`)
	second := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","unique_key":"u1"}`)
	var a, b struct {
		Job      jobOut
		Existing bool
	}
	first.decode(t, &a)
	second.decode(t, &b)
	if first.Status != 201 || second.Status != 200 || !b.Existing || a.Job.ID != b.Job.ID {
		t.Fatalf("unique: %d %d %+v %+v", first.Status, second.Status, a, b)
	}
	var got jobOut
	e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", j.ID), nil).decode(t, &got)
	if got.ID != j.ID {
		t.Fatalf("get %+v", got)
	}
	e.expectProblem(e.do(e.reader, "GET", "/v1/jobs/999999", nil), 404, "not_found")
	// Pagination: 2 per page over 3 jobs.
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k"}`)
	type pageOut struct {
		Data       []jobOut
		NextCursor string `json:"next_cursor"`
	}
	var page1, page2, filtered pageOut
	e.do(e.reader, "GET", "/v1/jobs?limit=2", nil).decode(t, &page1)
	if len(page1.Data) != 2 || page1.NextCursor == "" {
		t.Fatalf("page 1 %+v", page1)
	}
	e.do(e.reader, "GET", "/v1/jobs?limit=2&cursor="+page1.NextCursor, nil).decode(t, &page2)
	if len(page2.Data) != 1 || page2.Data[0].ID >= page1.Data[1].ID || page2.NextCursor != "" {
		t.Fatalf("page 2 %+v", page2)
	}
	e.do(e.reader, "GET", "/v1/jobs?queue=mail&state=pending,running", nil).decode(t, &filtered)
	if len(filtered.Data) != 1 || filtered.Data[0].ID != j.ID {
		t.Fatalf("filtered %+v", filtered)
	}
	// Cancel: pending → cancelled; twice → 409.
	var cancelled jobOut
	e.do(e.writer, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", j.ID), nil).decode(t, &cancelled)
	if cancelled.State != "cancelled" {
		t.Fatalf("cancelled %+v", cancelled)
	}
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", j.ID), nil), 409, "job_finished")
	// Retry: a cancelled job cannot be; a failed one is replayed once.
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/jobs/%d/retry", j.ID), nil), 409, "not_retryable")
	e.expectProblem(e.do(e.reader, "POST", fmt.Sprintf("/v1/jobs/%d/retry", j.ID), nil), 403, "forbidden")
	e.expectProblem(e.do(e.writer, "POST", "/v1/jobs/99999/retry", nil), 404, "not_found")
	var failed jobOut
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"doomed","max_attempts":1}`).decode(t, &struct{ Job *jobOut }{&failed})
	if _, err := e.st.Pool().Exec(context.Background(), `UPDATE gaffer.jobs SET state = 'failed', finalized_at = now() WHERE id = $1`, failed.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Pool().Exec(context.Background(), `INSERT INTO gaffer.dlq (tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, reason)
		SELECT tenant, id, kind, queue, priority, max_attempts, 1, timeout_ms, args, '[]', 'exhausted' FROM gaffer.jobs WHERE id = $1`, failed.ID); err != nil {
		t.Fatal(err)
	}
	var retried struct{ Job jobOut }
	e.do(e.writer, "POST", fmt.Sprintf("/v1/jobs/%d/retry", failed.ID), nil).decode(t, &retried)
	if retried.Job.ID == failed.ID || retried.Job.State != "pending" {
		t.Fatalf("retry of a failed job: %+v", retried)
	}
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/jobs/%d/retry", failed.ID), nil), 409, "not_retryable")
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := `{"kind":"charge","args":{"amount":100}}`
	r1 := e.do(e.writer, "POST", "/v1/jobs", body, "Idempotency-Key", "order-7")
	r2 := e.do(e.writer, "POST", "/v1/jobs", body, "Idempotency-Key", "order-7")
	if r1.Status != 201 || r2.Status != 201 || string(r1.Body) != string(r2.Body) || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %d\n%s\n%s", r1.Status, r2.Status, r1.Body, r2.Body)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 1 {
		t.Fatalf("%d jobs for one idempotency key", n)
	}
	e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", `{"kind":"charge","args":{"amount":999}}`, "Idempotency-Key", "order-7"), 422, "idempotency_key_reused")
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 1 {
		t.Fatalf("%d jobs after a reused key", n)
	}
	// Keys are per tenant: acme's order-7 is its own.
	if r := e.do(e.acme, "POST", "/v1/jobs", body, "Idempotency-Key", "order-7"); r.Status != 201 || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("other tenant: %d %v", r.Status, r.Header)
	}
	// A rejected request is not remembered: the key stays free, so the
	// corrected request runs (rather than 422 or a day of the same 400).
	bad := `{"kind":"k","priority":99}`
	b1 := e.do(e.writer, "POST", "/v1/jobs", bad, "Idempotency-Key", "bad-1")
	b2 := e.do(e.writer, "POST", "/v1/jobs", bad, "Idempotency-Key", "bad-1")
	if b1.Status != 400 || b2.Status != 400 || b2.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("bad request twice: %d %d replayed=%q", b1.Status, b2.Status, b2.Header.Get("Idempotent-Replayed"))
	}
	if r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","priority":9}`, "Idempotency-Key", "bad-1"); r.Status != 201 {
		t.Fatalf("corrected request after a 400 with the same key: %d %s", r.Status, r.Body)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.idempotency_keys WHERE key = 'bad-1' AND status = 201`); n != 1 {
		t.Fatalf("%d stored responses for the corrected request", n)
	}
}

// deadLetter puts a failed job of the default tenant in the DLQ.
func (e *env) deadLetter(kind, msg string) int64 {
	e.t.Helper()
	ctx := context.Background()
	var id int64
	e.st.Pool().QueryRow(ctx, `INSERT INTO gaffer.jobs (kind, state, finalized_at, attempt) VALUES ($1, 'failed', now(), 1) RETURNING id`, kind).Scan(&id)
	var entry int64
	err := e.st.Pool().QueryRow(ctx, `INSERT INTO gaffer.dlq (tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, reason)
		VALUES ('default', $1, $2, 'default', 0, 1, 1, 0, '{}', jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), 'error', $3::text, 'kind', 'error')), 'exhausted')
		RETURNING id`, id, kind, msg).Scan(&entry)
	if err != nil {
		e.t.Fatal(err)
	}
	return entry
}

func TestDLQEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.deadLetter("email", "SMTP timeout")
	b := e.deadLetter("email", "mailbox full")
	c := e.deadLetter("resize", "bad image")
	var list struct {
		Data []struct {
			ID     int64
			Kind   string
			Errors []struct{ Error string }
		}
	}
	e.do(e.reader, "GET", "/v1/dlq?kind=email", nil).decode(t, &list)
	if len(list.Data) != 2 || list.Data[0].ID != b || list.Data[1].Errors[0].Error != "SMTP timeout" {
		t.Fatalf("list %+v", list)
	}
	e.do(e.reader, "GET", "/v1/dlq?error=smtp", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != a {
		t.Fatalf("error filter %+v", list)
	}
	var rep struct {
		EntryID int64 `json:"entry_id"`
		JobID   int64 `json:"job_id"`
	}
	r := e.do(e.writer, "POST", fmt.Sprintf("/v1/dlq/%d/replay", a), nil)
	if r.Status != 201 {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	r.decode(t, &rep)
	if rep.EntryID != a || e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1 AND replay_of = $2`, rep.JobID, a) != 1 {
		t.Fatalf("replay %+v", rep)
	}
	// Replaying an entry that is no longer in the DLQ: 409.
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/dlq/%d/replay", a), nil), 409, "already_replayed")
	var replayed struct {
		Replayed []struct {
			EntryID int64 `json:"entry_id"`
		}
	}
	e.do(e.writer, "POST", "/v1/dlq/replay", `{"kind":"email"}`).decode(t, &replayed)
	if len(replayed.Replayed) != 1 || replayed.Replayed[0].EntryID != b {
		t.Fatalf("replay by filter %+v", replayed)
	}
	var entry struct {
		ReplayJobID int64 `json:"replay_job_id"`
	}
	e.do(e.reader, "GET", fmt.Sprintf("/v1/dlq/%d", b), nil).decode(t, &entry)
	if entry.ReplayJobID == 0 {
		t.Fatal("entry not marked replayed")
	}
	if r := e.do(e.writer, "DELETE", fmt.Sprintf("/v1/dlq/%d", c), nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	e.expectProblem(e.do(e.writer, "DELETE", fmt.Sprintf("/v1/dlq/%d", c), nil), 404, "not_found")
	var purged struct{ Deleted int64 }
	e.do(e.writer, "POST", "/v1/dlq/purge", `{"kind":"email"}`).decode(t, &purged)
	if purged.Deleted != 2 || e.count(`SELECT count(*) FROM gaffer.dlq`) != 0 {
		t.Fatalf("purged %+v", purged)
	}
}

func TestCronEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(e.writer, "POST", "/v1/cron", `{"name":"nightly","schedule":"30 2 * * *","timezone":"Europe/London","missed":"once","job":{"kind":"report","args":{"x":1},"timeout":"10m"}}`)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var entry struct {
		Name      string
		NextRunAt time.Time `json:"next_run_at"`
		Paused    bool
		Missed    string
		Job       struct{ Kind, Timeout string }
	}
	r.decode(t, &entry)
	if entry.Missed != "once" || entry.Job.Timeout != "10m0s" || entry.NextRunAt.IsZero() {
		t.Fatalf("created %+v", entry)
	}
	e.expectProblem(e.do(e.writer, "POST", "/v1/cron", `{"name":"nightly","schedule":"@daily","job":{"kind":"k"}}`), 409, "already_exists")
	// Pages of a listing across tenants carry on where the last ended,
	// across the tenant boundary: 5 entries in two tenants, 2 a page.
	for _, c := range []string{`{"tenant":"acme","name":"a1"}`, `{"tenant":"acme","name":"a2"}`, `{"tenant":"zeta","name":"a0"}`, `{"tenant":"zeta","name":"z9"}`} {
		body := strings.TrimSuffix(c, "}") + `,"schedule":"@daily","job":{"kind":"k"}}`
		if r := e.do(e.admin, "POST", "/v1/cron", body); r.Status != 201 {
			t.Fatalf("create %s: %d %s", c, r.Status, r.Body)
		}
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page struct {
			Data       []struct{ Tenant, Name string }
			NextCursor string `json:"next_cursor"`
		}
		e.do(e.admin, "GET", "/v1/cron?limit=2&cursor="+cursor, nil).decode(t, &page)
		for _, d := range page.Data {
			seen = append(seen, d.Tenant+"/"+d.Name)
		}
		if page.NextCursor == "" || pages > 5 {
			break
		}
		cursor = page.NextCursor
	}
	if strings.Join(seen, " ") != "acme/a1 acme/a2 default/nightly zeta/a0 zeta/z9" {
		t.Fatalf("paged listing across tenants: %v", seen)
	}
	e.expectProblem(e.do(e.admin, "GET", "/v1/cron?cursor=bm9wZQ", nil), 400, "invalid_parameter")
	var next struct{ Times []time.Time }
	e.do(e.reader, "GET", "/v1/cron/nightly/next?n=3", nil).decode(t, &next)
	london, _ := cron.LoadLocation("Europe/London")
	if len(next.Times) != 3 || !next.Times[0].Equal(entry.NextRunAt) || next.Times[1].In(london).Hour() != 2 {
		t.Fatalf("next %+v", next)
	}
	e.do(e.writer, "PATCH", "/v1/cron/nightly", `{"paused":true}`).decode(t, &entry)
	if !entry.Paused {
		t.Fatal("not paused")
	}
	var trig struct {
		JobID int64 `json:"job_id"`
	}
	e.do(e.writer, "POST", "/v1/cron/nightly/trigger", nil).decode(t, &trig)
	if e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1 AND kind = 'report' AND timeout_ms = 600000`, trig.JobID) != 1 {
		t.Fatal("trigger made no job")
	}
	var hist struct {
		Data []struct {
			Status string
			JobID  int64 `json:"job_id"`
		}
	}
	e.do(e.reader, "GET", "/v1/cron/nightly/history", nil).decode(t, &hist)
	if len(hist.Data) != 1 || hist.Data[0].Status != "triggered" || hist.Data[0].JobID != trig.JobID {
		t.Fatalf("history %+v", hist)
	}
	var list struct{ Data []struct{ Name string } }
	e.do(e.reader, "GET", "/v1/cron", nil).decode(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("list %+v", list)
	}
	e.expectProblem(e.do(e.writer, "PATCH", "/v1/cron/nightly", `{"schedule":"0 0 31 4 *"}`), 400, "invalid_field")
	if r := e.do(e.writer, "DELETE", "/v1/cron/nightly", nil); r.Status != 204 {
		t.Fatalf("delete %d", r.Status)
	}
	e.expectProblem(e.do(e.reader, "GET", "/v1/cron/nightly", nil), 404, "not_found")
}

func TestQueueNodeClusterEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"mail"}`)
	var state struct {
		Name   string
		Paused bool
	}
	e.do(e.admin, "POST", "/v1/queues/mail/pause", nil).decode(t, &state)
	if !state.Paused {
		t.Fatal("not paused")
	}
	var queues struct {
		Data []struct {
			Name    string
			Paused  bool
			Pending int
		}
	}
	e.do(e.reader, "GET", "/v1/queues", nil).decode(t, &queues)
	if len(queues.Data) != 1 || !queues.Data[0].Paused || queues.Data[0].Pending != 1 {
		t.Fatalf("queues %+v", queues)
	}
	e.do(e.admin, "POST", "/v1/queues/mail/resume", nil).decode(t, &state)
	if state.Paused {
		t.Fatal("still paused")
	}
	// A node to drain.
	if err := e.st.RegisterNode(ctx, "node-1", "host", "v1", "2025c", map[string]int{"default": 10}, nil); err != nil {
		t.Fatal(err)
	}
	type nodeOut struct {
		ID               string
		State            string
		DrainRequestedAt *time.Time `json:"drain_requested_at"`
		DrainDeadline    *time.Time `json:"drain_deadline"`
	}
	var drained, undrained nodeOut
	e.do(e.admin, "POST", "/v1/nodes/node-1/drain", `{"deadline":"45s"}`).decode(t, &drained)
	if drained.DrainRequestedAt == nil || drained.DrainDeadline.Sub(*drained.DrainRequestedAt) < 44*time.Second {
		t.Fatalf("drained %+v", drained)
	}
	e.do(e.admin, "POST", "/v1/nodes/node-1/undrain", nil).decode(t, &undrained)
	if undrained.DrainRequestedAt != nil {
		t.Fatalf("undrained %+v", undrained)
	}
	// Without a body the deadline defaults to 30s.
	if r := e.do(e.admin, "POST", "/v1/nodes/node-1/drain", nil); r.Status != 200 {
		t.Fatalf("drain without body: %d %s", r.Status, r.Body)
	}
	var nodes struct{ Data []struct{ ID string } }
	e.do(e.ops, "GET", "/v1/nodes", nil).decode(t, &nodes)
	if len(nodes.Data) != 1 {
		t.Fatalf("nodes %+v", nodes)
	}
	st := store.New(e.st.Pool())
	st.RaiseFence(ctx, 42, "node-1", time.Second)
	var cl struct {
		Leader   string
		Epoch    int64
		Nodes    map[string]int
		Degraded []string
	}
	e.do(e.ops, "GET", "/v1/cluster", nil).decode(t, &cl)
	if cl.Leader != "node-1" || cl.Epoch != 42 || cl.Nodes["active"] != 1 || len(cl.Degraded) == 0 {
		t.Fatalf("cluster %+v", cl)
	}
}

// A tenant's token sees only its own queues and counts, and nothing of
// the cluster's nodes or leader without cluster:read (G9).
func TestNoCrossTenantMetadata(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, b := range []string{`{"kind":"k","queue":"shared"}`, `{"kind":"k","queue":"default-only"}`} {
		e.do(e.writer, "POST", "/v1/jobs", b)
	}
	for _, b := range []string{`{"kind":"k","queue":"shared"}`, `{"kind":"k","queue":"acme-secret"}`, `{"kind":"k","queue":"acme-secret"}`} {
		e.do(e.acme, "POST", "/v1/jobs", b)
	}
	if err := e.st.RegisterNode(ctx, "node-1", "host", "v1", "2025c", map[string]int{"ops-queue": 10}, nil); err != nil {
		t.Fatal(err)
	}
	type queue struct {
		Name    string
		Pending int
	}
	var got struct{ Data []queue }
	e.do(e.reader, "GET", "/v1/queues", nil).decode(t, &got)
	if fmt.Sprint(got.Data) != "[{default-only 1} {shared 1}]" {
		t.Fatalf("tenant default sees %v, want only its own queues and counts", got.Data)
	}
	// A tenant's token cannot widen its view with ?tenant=.
	e.do(e.reader, "GET", "/v1/queues?tenant=acme", nil).decode(t, &got)
	if fmt.Sprint(got.Data) != "[{default-only 1} {shared 1}]" {
		t.Fatalf("tenant default with ?tenant=acme sees %v", got.Data)
	}
	e.do(e.admin, "GET", "/v1/queues?tenant=acme", nil).decode(t, &got)
	if fmt.Sprint(got.Data) != "[{acme-secret 2} {shared 1}]" {
		t.Fatalf("admin's view of acme: %v", got.Data)
	}
	e.do(e.admin, "GET", "/v1/queues", nil).decode(t, &got)
	if len(got.Data) != 4 { // acme-secret, default-only, ops-queue, shared
		t.Fatalf("admin sees %v", got.Data)
	}
	for _, path := range []string{"/v1/nodes", "/v1/cluster"} {
		e.expectProblem(e.do(e.reader, "GET", path, nil), 403, "forbidden")
		e.expectProblem(e.do(e.acme, "GET", path, nil), 403, "forbidden")
		if r := e.do(e.ops, "GET", path, nil); r.Status != 200 {
			t.Fatalf("cluster:read on %s: %d", path, r.Status)
		}
	}
}

func TestWorkflowEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(e.writer, "POST", "/v1/workflows", `{"name":"etl","steps":[
		{"name":"extract","kind":"etl.extract","args":{"day":"2026-11-22"},"timeout":"1m"},
		{"name":"approve","signal":"1h","depends_on":["extract"]},
		{"name":"load","kind":"etl.load","depends_on":["approve"],"allow_failure":true}]}`)
	if r.Status != 201 {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	var run struct {
		ID    int64
		State string
		Steps []struct {
			Name, State, Type string
			JobID             int64 `json:"job_id"`
		}
	}
	r.decode(t, &run)
	if run.State != "running" || len(run.Steps) != 3 {
		t.Fatalf("run %+v", run)
	}
	extract := run.Steps[0]
	if extract.Name != "extract" || extract.State != "active" || extract.JobID == 0 {
		t.Fatalf("first step %+v", extract)
	}
	var got struct {
		ID    int64
		Steps []struct{ Name, State string }
	}
	e.do(e.reader, "GET", fmt.Sprintf("/v1/workflows/%d", run.ID), nil).decode(t, &got)
	if got.ID != run.ID || len(got.Steps) != 3 {
		t.Fatalf("get %+v", got)
	}
	// Another tenant cannot see it.
	e.expectProblem(e.do(e.acme, "GET", fmt.Sprintf("/v1/workflows/%d", run.ID), nil), 404, "not_found")
	// The approve step is not active yet: signalling it is a conflict.
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/workflows/%d/signal", run.ID), `{"step":"approve","payload":{"ok":true}}`), 409, "conflict")
	var list struct{ Data []struct{ ID int64 } }
	e.do(e.reader, "GET", "/v1/workflows?state=running", nil).decode(t, &list)
	if len(list.Data) != 1 {
		t.Fatalf("list %+v", list)
	}
	var cancelled struct{ State string }
	e.do(e.writer, "POST", fmt.Sprintf("/v1/workflows/%d/cancel", run.ID), nil).decode(t, &cancelled)
	if cancelled.State != "cancelled" {
		t.Fatalf("cancel %+v", cancelled)
	}
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/workflows/%d/cancel", run.ID), nil), 409, "conflict")
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE workflow_run = $1 AND state = 'cancelled'`, run.ID); n != 1 {
		t.Fatalf("%d step jobs cancelled", n)
	}
	e.expectProblem(e.do(e.reader, "GET", "/v1/workflows/99999", nil), 404, "not_found")
}

// A queue whose jobs wait while no live node or remote worker works it is
// flagged, as Temporal flags a task queue with no pollers: before, the
// jobs just sat there. A draining node, another tenant's remote worker
// and a paused queue are told apart.
func TestQueueWithoutWorkersIsFlagged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"orphan"}`)
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"worked"}`)
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"held"}`)
	if err := e.st.RegisterNode(ctx, "node-1", "host", "v1", "2025c", map[string]int{"worked": 10, "held": 10}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RegisterNode(ctx, "node-2", "host", "v1", "2025c", map[string]int{"orphan": 10}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.TouchNode(ctx, "node-2", 0, "draining"); err != nil {
		t.Fatal(err)
	}
	// Asked to drain but not yet draining, and silent for minutes (it
	// died while etcd was down): neither works the queue.
	for _, n := range []struct{ id, sql string }{
		{"node-3", `UPDATE gaffer.nodes SET drain_requested_at = now() WHERE id = 'node-3'`},
		{"node-4", `UPDATE gaffer.nodes SET last_seen = now() - interval '5 minutes' WHERE id = 'node-4'`},
	} {
		if err := e.st.RegisterNode(ctx, n.id, "host", "v1", "2025c", map[string]int{"orphan": 10}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.Pool().Exec(ctx, n.sql); err != nil {
			t.Fatal(err)
		}
	}
	// Another tenant's remote worker on the orphan queue works none of
	// this tenant's jobs.
	if _, err := e.st.Pool().Exec(ctx, `INSERT INTO gaffer.nodes (id, kind, tenant, hostname, version, queues, kinds, state, in_flight, started_at, last_seen)
		VALUES ('w-acme', 'remote', 'acme', 'h', 'v', '{"orphan": 0}', '[]', 'active', 0, now(), now())`); err != nil {
		t.Fatal(err)
	}
	e.do(e.admin, "POST", "/v1/queues/held/pause", nil)
	type queue struct {
		Name    string
		Workers int
		Warning string
	}
	for _, c := range []struct {
		token string
		want  map[string]queue
	}{
		{e.reader, map[string]queue{
			"orphan": {"orphan", 0, "no live node or remote worker works this queue: its jobs wait until one does"},
			"worked": {"worked", 1, ""},
			"held":   {"held", 1, "paused: its jobs wait until it is resumed"}}},
		{e.admin, map[string]queue{ // every tenant's view: acme's worker counts
			"orphan": {"orphan", 1, ""},
			"worked": {"worked", 1, ""},
			"held":   {"held", 1, "paused: its jobs wait until it is resumed"}}},
	} {
		var got struct{ Data []queue }
		e.do(c.token, "GET", "/v1/queues", nil).decode(t, &got)
		for _, q := range got.Data {
			if want, ok := c.want[q.Name]; ok && q != want {
				t.Errorf("queue %s: %+v, want %+v", q.Name, q, want)
			}
			delete(c.want, q.Name)
		}
		if len(c.want) != 0 {
			t.Errorf("queues not listed: %v", c.want)
		}
	}
}

// What the node sees degraded beyond its cluster membership (a long
// transaction holding back vacuum) is in GET /v1/cluster, naming the
// holder only for a token spanning tenants: a tenant's would learn who
// else uses the database.
func TestClusterStatusHealthNamesOnlyForOperators(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) {
		c.Health = func(identify bool) []string {
			if identify {
				return []string{"a session (pid 7) name \"nightly\" has kept vacuum …"}
			}
			return []string{"a long transaction on the database has kept vacuum …"}
		}
	})
	read := func(tok string) []string {
		var cl struct{ Degraded []string }
		e.do(tok, "GET", "/v1/cluster", nil).decode(t, &cl)
		return cl.Degraded
	}
	if d := fmt.Sprint(read(e.admin)); !strings.Contains(d, "pid 7") {
		t.Fatalf("an operator's token reads %s, want the holder named", d)
	}
	if d := fmt.Sprint(read(e.ops)); !strings.Contains(d, "a long transaction on the database") || strings.Contains(d, "pid 7") || strings.Contains(d, "nightly") {
		t.Fatalf("a tenant's cluster:read token reads %s, want the hold without its holder", d)
	}
}
