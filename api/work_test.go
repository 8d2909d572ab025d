package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
)

// token makes a token of tenant with scopes.
func (e *env) token(tenant string, scopes ...string) string {
	e.t.Helper()
	text, _, err := e.tokens.Create(context.Background(), auth.NewTokenRequest{Name: "test", Tenant: tenant, Scopes: scopes})
	if err != nil {
		e.t.Fatal(err)
	}
	return text
}

type claimedOut struct {
	ID         int64
	Tenant     string
	Kind       string
	Attempt    int
	LeaseToken string `json:"lease_token"`
	Args       map[string]any
}

type claimOut struct {
	Jobs     []claimedOut
	Draining bool
}

type workerOut struct {
	ID                       string
	Tenant                   string
	Queues                   []string
	LeaseTTLSeconds          float64 `json:"lease_ttl_seconds"`
	HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
}

// The remote worker protocol end to end over the API, every response
// checked against the OpenAPI document: register, claim, heartbeat,
// progress (shown on the job), complete, a stale write refused with 409
// lease_lost, fail, snooze, leave; the worker in the nodes view.
func TestWorkEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	worker := e.token("default", auth.ScopeWorker)
	var w workerOut
	r := e.do(worker, "POST", "/v1/workers", `{"name":"py-1","version":"0.1","queues":["py"],"kinds":["resize"]}`)
	if r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	r.decode(t, &w)
	if !strings.HasPrefix(w.ID, "rw_") || w.Tenant != "default" || w.LeaseTTLSeconds != 30 || w.HeartbeatIntervalSeconds != 10 {
		t.Fatalf("registered %+v", w)
	}
	var enq struct{ Job struct{ ID int64 } }
	for range 3 {
		e.do(e.writer, "POST", "/v1/jobs", `{"kind":"resize","queue":"py","args":{"w": 1.0, "x":"<&>"}}`).decode(t, &enq)
	}
	var c claimOut
	r = e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":3}`, w.ID))
	r.decode(t, &c)
	if r.Status != 200 || len(c.Jobs) != 3 || c.Jobs[0].Attempt != 1 || c.Jobs[0].LeaseToken == "" || c.Draining {
		t.Fatalf("claim: %d %s", r.Status, r.Body)
	}
	if !strings.Contains(string(r.Body), `"args":{"w":1.0,"x":"<&>"}`) {
		t.Fatalf("args not as sent: %s", r.Body)
	}
	a, b, d := c.Jobs[0], c.Jobs[1], c.Jobs[2]
	ref := func(j claimedOut) string {
		return fmt.Sprintf(`{"id":%d,"attempt":%d,"lease_token":%q}`, j.ID, j.Attempt, j.LeaseToken)
	}
	var outs struct {
		Jobs []struct {
			ID     int64
			Status string
		}
	}
	r = e.do(worker, "POST", "/v1/work/heartbeat", fmt.Sprintf(`{"worker":%q,"jobs":[%s,%s]}`, w.ID, ref(a), ref(b)))
	r.decode(t, &outs)
	if r.Status != 200 || len(outs.Jobs) != 2 || outs.Jobs[0].Status != "ok" || outs.Jobs[1].Status != "ok" {
		t.Fatalf("heartbeat: %d %s", r.Status, r.Body)
	}
	r = e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/heartbeat", a.ID), fmt.Sprintf(`{"worker":%q,"attempt":1,"lease_token":%q}`, w.ID, a.LeaseToken))
	if r.Status != 200 {
		t.Fatalf("one heartbeat: %d %s", r.Status, r.Body)
	}
	r = e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/progress", a.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"percent":40,"message":"4 of 10"}`, a.LeaseToken))
	if r.Status != 200 {
		t.Fatalf("progress: %d %s", r.Status, r.Body)
	}
	var got struct {
		State    string
		Progress struct {
			Percent float64
			Message string
			Attempt int
		}
	}
	e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", a.ID), nil).decode(t, &got)
	if got.Progress.Percent != 40 || got.Progress.Message != "4 of 10" || got.Progress.Attempt != 1 {
		t.Fatalf("job view progress %+v", got.Progress)
	}
	if strings.Contains(string(e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", a.ID), nil).Body), a.LeaseToken) {
		t.Fatal("the job view shows the lease token: anyone who reads the job could write for its attempt")
	}
	r = e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/complete", a.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"result":{"ok":true}}`, a.LeaseToken))
	if r.Status != 200 || !strings.Contains(string(r.Body), `"state":"completed"`) {
		t.Fatalf("complete: %d %s", r.Status, r.Body)
	}
	// The same completion again: the attempt no longer owns the job.
	r = e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/complete", a.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"result":{"ok":false}}`, a.LeaseToken))
	e.expectProblem(r, 409, "lease_lost")
	e.expectProblem(e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/progress", a.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"percent":99}`, a.LeaseToken)), 409, "lease_lost")
	e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", a.ID), nil).decode(t, &got)
	if got.State != "completed" || got.Progress.Percent != 40 {
		t.Fatalf("after stale writes: %+v", got)
	}
	r = e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/fail", b.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"error":"bad image","permanent":true,"stack":"Traceback..."}`, b.LeaseToken))
	if r.Status != 200 || !strings.Contains(string(r.Body), `"state":"failed"`) {
		t.Fatalf("fail: %d %s", r.Status, r.Body)
	}
	r = e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/snooze", d.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"delay":"1h"}`, d.LeaseToken))
	if r.Status != 200 || !strings.Contains(string(r.Body), `"state":"pending"`) {
		t.Fatalf("snooze: %d %s", r.Status, r.Body)
	}
	// A batch completion of jobs no longer held: per-job outcomes.
	r = e.do(worker, "POST", "/v1/work/complete", fmt.Sprintf(`{"jobs":[%s,{"id":99999,"attempt":1,"lease_token":"1"}]}`, ref(b)))
	r.decode(t, &outs)
	if r.Status != 200 || outs.Jobs[0].Status != "lease_lost" || outs.Jobs[1].Status != "not_found" {
		t.Fatalf("batch complete: %d %s", r.Status, r.Body)
	}
	// An empty wait answers at once.
	r = e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":10,"wait":"0s"}`, w.ID))
	r.decode(t, &c)
	if r.Status != 200 || len(c.Jobs) != 0 {
		t.Fatalf("empty claim: %d %s", r.Status, r.Body)
	}
	// The nodes view lists the remote worker.
	var nodes struct {
		Data []struct {
			ID, Kind, Tenant, State string
			Kinds                   []string
		}
	}
	e.do(e.ops, "GET", "/v1/nodes", nil).decode(t, &nodes)
	if len(nodes.Data) != 1 || nodes.Data[0].ID != w.ID || nodes.Data[0].Kind != "remote" || nodes.Data[0].Tenant != "default" ||
		nodes.Data[0].State != "active" || len(nodes.Data[0].Kinds) != 1 {
		t.Fatalf("nodes %+v", nodes)
	}
	r = e.do(worker, "DELETE", "/v1/workers/"+w.ID, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"released":0`) {
		t.Fatalf("leave: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q}`, w.ID)), 409, "worker_gone")
}

// The worker scope is needed, and a tenant's worker token reaches only
// its own workers and jobs; a spanning token's worker works every
// tenant's.
func TestWorkIsTenantScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mine := e.token("default", auth.ScopeWorker)
	theirs := e.token("acme", auth.ScopeWorker)
	e.expectProblem(e.do(e.writer, "POST", "/v1/workers", `{"queues":["default"]}`), 403, "forbidden")
	e.expectProblem(e.do(e.writer, "POST", "/v1/work/claim", `{"worker":"rw_1"}`), 403, "forbidden")
	var w workerOut
	e.do(mine, "POST", "/v1/workers", `{"queues":["default"]}`).decode(t, &w)
	var acmeJob struct{ Job struct{ ID int64 } }
	e.do(e.acme, "POST", "/v1/jobs", `{"kind":"k"}`).decode(t, &acmeJob)
	var c claimOut
	e.do(mine, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":10}`, w.ID)).decode(t, &c)
	if len(c.Jobs) != 0 {
		t.Fatalf("default's worker claimed acme's job: %+v", c)
	}
	// acme's token cannot use default's worker, nor name another tenant.
	e.expectProblem(e.do(theirs, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q}`, w.ID)), 404, "not_found")
	e.expectProblem(e.do(theirs, "DELETE", "/v1/workers/"+w.ID, nil), 404, "not_found")
	e.expectProblem(e.do(theirs, "POST", "/v1/workers", `{"queues":["default"],"tenant":"default"}`), 403, "forbidden")
	// A spanning worker takes it; default's token cannot write for it even with its lease.
	var span workerOut
	e.do(e.admin, "POST", "/v1/workers", `{"queues":["default"]}`).decode(t, &span)
	if span.Tenant != "*" {
		t.Fatalf("spanning worker's tenant %q", span.Tenant)
	}
	e.do(e.admin, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":10}`, span.ID)).decode(t, &c)
	if len(c.Jobs) != 1 || c.Jobs[0].ID != acmeJob.Job.ID || c.Jobs[0].Tenant != "acme" {
		t.Fatalf("spanning claim %+v", c)
	}
	j := c.Jobs[0]
	e.expectProblem(e.do(mine, "POST", fmt.Sprintf("/v1/work/jobs/%d/complete", j.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q}`, j.LeaseToken)), 404, "not_found")
	r := e.do(theirs, "POST", fmt.Sprintf("/v1/work/jobs/%d/complete", j.ID), fmt.Sprintf(`{"attempt":1,"lease_token":%q}`, j.LeaseToken))
	if r.Status != 200 {
		t.Fatalf("the job's own tenant's token, with the lease: %d %s", r.Status, r.Body)
	}
	// A spanning token may register a worker for one tenant.
	var one workerOut
	e.do(e.admin, "POST", "/v1/workers", `{"queues":["default"],"tenant":"acme"}`).decode(t, &one)
	if one.Tenant != "acme" {
		t.Fatalf("tenant %q", one.Tenant)
	}
}

// Bad remote worker input gets a problem naming the field and changes
// nothing.
func TestWorkBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	worker := e.token("default", auth.ScopeWorker)
	var w workerOut
	e.do(worker, "POST", "/v1/workers", `{"queues":["default"]}`).decode(t, &w)
	var enq struct{ Job struct{ ID int64 } }
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k"}`).decode(t, &enq)
	var c claimOut
	e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q}`, w.ID)).decode(t, &c)
	if len(c.Jobs) != 1 {
		t.Fatalf("claim %+v", c)
	}
	j := c.Jobs[0]
	id := j.ID
	cases := []struct {
		name, path, body, code, field string
		status                        int
	}{
		{"no queues", "/v1/workers", `{"queues":[]}`, "invalid_field", "queues", 400},
		{"bad queue", "/v1/workers", `{"queues":["No Spaces"]}`, "invalid_field", "queues", 400},
		{"bad kind", "/v1/workers", `{"queues":["q"],"kinds":["a b"]}`, "invalid_field", "kinds", 400},
		{"control character in name", "/v1/workers", `{"queues":["q"],"name":"a\u001b[31mred"}`, "invalid_field", "name", 400},
		{"unknown field", "/v1/workers", `{"queues":["q"],"concurrency":3}`, "unknown_field", "concurrency", 400},
		{"claim without worker", "/v1/work/claim", `{"max":1}`, "invalid_field", "worker", 400},
		{"claim max 0", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":0}`, w.ID), "invalid_field", "max", 400},
		{"claim wait too long", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"wait":"1h"}`, w.ID), "invalid_field", "wait", 400},
		{"claim wait not a duration", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"wait":"soon"}`, w.ID), "invalid_field", "wait", 400},
		{"unknown worker", "/v1/work/claim", `{"worker":"rw_0000"}`, "not_found", "", 404},
		{"token not a number", fmt.Sprintf("/v1/work/jobs/%d/complete", id), `{"attempt":1,"lease_token":"abc"}`, "invalid_field", "lease_token", 400},
		{"token as a JSON number", fmt.Sprintf("/v1/work/jobs/%d/complete", id), `{"attempt":1,"lease_token":12}`, "invalid_field", "lease_token", 400},
		{"attempt 0", fmt.Sprintf("/v1/work/jobs/%d/complete", id), fmt.Sprintf(`{"attempt":0,"lease_token":%q}`, j.LeaseToken), "invalid_field", "attempt", 400},
		{"result with a duplicate name", fmt.Sprintf("/v1/work/jobs/%d/complete", id), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"result":{"a":1,"a":2}}`, j.LeaseToken), "invalid_json", "", 400},
		{"percent over 100", fmt.Sprintf("/v1/work/jobs/%d/progress", id), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"percent":101}`, j.LeaseToken), "invalid_field", "percent", 400},
		{"percent missing", fmt.Sprintf("/v1/work/jobs/%d/progress", id), fmt.Sprintf(`{"attempt":1,"lease_token":%q}`, j.LeaseToken), "invalid_field", "percent", 400},
		{"progress message too long", fmt.Sprintf("/v1/work/jobs/%d/progress", id), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"percent":1,"message":%q}`, j.LeaseToken, strings.Repeat("x", 300)), "invalid_field", "message", 400},
		{"progress message with a newline", fmt.Sprintf("/v1/work/jobs/%d/progress", id), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"percent":1,"message":"a\nb"}`, j.LeaseToken), "invalid_field", "message", 400},
		{"snooze without delay", fmt.Sprintf("/v1/work/jobs/%d/snooze", id), fmt.Sprintf(`{"attempt":1,"lease_token":%q}`, j.LeaseToken), "invalid_field", "delay", 400},
		{"negative retry_after", fmt.Sprintf("/v1/work/jobs/%d/fail", id), fmt.Sprintf(`{"attempt":1,"lease_token":%q,"retry_after":"-1s"}`, j.LeaseToken), "invalid_field", "retry_after", 400},
		{"batch naming a job twice", "/v1/work/complete", fmt.Sprintf(`{"jobs":[{"id":%d,"attempt":1,"lease_token":%q},{"id":%d,"attempt":1,"lease_token":%q}]}`, id, j.LeaseToken, id, j.LeaseToken), "invalid_field", "jobs", 400},
		{"empty batch", "/v1/work/heartbeat", fmt.Sprintf(`{"worker":%q,"jobs":[]}`, w.ID), "invalid_field", "jobs", 400},
		{"batch item without a token", "/v1/work/complete", fmt.Sprintf(`{"jobs":[{"id":%d,"attempt":1}]}`, id), "invalid_field", "jobs[0].lease_token", 400},
	}
	for _, c := range cases {
		r := e.do(worker, "POST", c.path, c.body)
		p := e.expectProblem(r, c.status, c.code)
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.name, p.Field, c.field, p.Detail)
		}
	}
	var got struct {
		State    string
		Attempt  int
		Result   any
		Progress any
	}
	e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil).decode(t, &got)
	if got.State != "running" || got.Attempt != 1 || got.Result != nil || got.Progress != nil {
		t.Fatalf("bad input changed the job: %+v", got)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.nodes`); n != 1 {
		t.Fatalf("%d workers registered, want 1", n)
	}
}

// A remote worker gets a workflow step's inputs in its claim as a node's
// handler does: {"dependency": its result as recorded}, read from the
// run's steps (the step's job carries no copy), and GET /v1/jobs/{id}
// shows the same inputs.
func TestWorkClaimCarriesStepInputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	worker := e.token("default", auth.ScopeWorker)
	var w workerOut
	e.do(worker, "POST", "/v1/workers", `{"name":"py-1","queues":["py"]}`).decode(t, &w)
	r := e.do(e.writer, "POST", "/v1/workflows", `{"name":"w","steps":[
		{"name":"a","kind":"k","queue":"py"},{"name":"b","kind":"k","queue":"py"},
		{"name":"c","kind":"k","queue":"py","depends_on":["b","a"]}]}`)
	if r.Status != 201 {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	claim := func(n int) (claimOut, string) {
		t.Helper()
		var c claimOut
		r := e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":%d}`, w.ID, n))
		r.decode(t, &c)
		if r.Status != 200 || len(c.Jobs) != n {
			t.Fatalf("claim %d: %d %s", n, r.Status, r.Body)
		}
		return c, string(r.Body)
	}
	c, _ := claim(2)
	roots := c.Jobs
	for _, j := range roots {
		r := e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/complete", j.ID),
			fmt.Sprintf(`{"attempt":%d,"lease_token":%q,"result":{"from":%d, "n": 1.50}}`, j.Attempt, j.LeaseToken, j.ID))
		if r.Status != 200 {
			t.Fatalf("complete: %d %s", r.Status, r.Body)
		}
	}
	c, body := claim(1)
	// Steps start in name order: a's job is the older.
	a, b := min(roots[0].ID, roots[1].ID), max(roots[0].ID, roots[1].ID)
	result := func(id int64) string { return fmt.Sprintf(`{"from":%d,"n":1.50}`, id) }
	want := `"inputs":{"a":` + result(a) + `,"b":` + result(b) + `}`
	if !strings.Contains(body, want) {
		t.Fatalf("claim of c: want %s in %s", want, body)
	}
	if view := string(e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", c.Jobs[0].ID), nil).Body); !strings.Contains(view, want) {
		t.Fatalf("job view of c: want %s in %s", want, view)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE inputs IS NOT NULL`); n != 0 {
		t.Fatalf("%d jobs hold a copy of their inputs", n)
	}
}
