package api_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/webhook"
)

// A tenant token with jobs:write aims http jobs at the cluster's
// internals by address literal — in every spelling a resolver accepts —
// through every door that takes a job template: refused with 400
// destination_not_allowed naming the field, and nothing is written.
func TestLiteralInternalDestinationsRefusedAtEnqueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	existing := e.do(e.admin, "POST", "/v1/cron", `{"name":"nightly","schedule":"@daily","job":{"kind":"http","args":{"url":"https://example.com/hook"}}}`)
	if existing.Status != 201 {
		t.Fatalf("create cron: %d %s", existing.Status, existing.Body)
	}
	before := map[string]int{}
	tables := []string{"jobs", "cron_entries", "workflow_runs", "workflow_steps", "idempotency_keys"}
	for _, table := range tables {
		before[table] = e.count(fmt.Sprintf(`SELECT count(*) FROM gaffer.%s`, table))
	}
	urls := []string{
		"http://127.0.0.1:8080/metrics", "http://localhost:2379/v3/kv/range", "http://LOCALHOST:2379/v3/kv/put",
		"http://db.localhost:5432/", "http://[::1]:8080/metrics", "http://[::ffff:127.0.0.1]:2379/v3/kv/deleterange",
		"http://0.0.0.0:8080/metrics", "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/", "http://192.168.0.1/",
		"http://127.1:8080/metrics", "http://2130706433:8080/metrics", "http://0x7f.1:8080/metrics", "http://0177.0.0.1:8080/metrics",
	}
	for _, u := range urls {
		args := fmt.Sprintf(`{"url":%q,"body":{"key":"L2dhZmZlcg=="}}`, u)
		for _, c := range []struct{ method, path, body, field string }{
			{"POST", "/v1/jobs", `{"kind":"http","args":` + args + `}`, "args.url"},
			{"POST", "/v1/cron", `{"name":"probe","schedule":"@every 1m","job":{"kind":"http","args":` + args + `}}`, "job.args.url"},
			{"PATCH", "/v1/cron/nightly", `{"job":{"kind":"http","args":` + args + `}}`, "job.args.url"},
			{"PUT", "/v1/cron/nightly", `{"schedule":"@daily","job":{"kind":"http","args":` + args + `}}`, "job.args.url"},
			{"PUT", "/v1/cron/probe", `{"schedule":"@daily","job":{"kind":"http","args":` + args + `}}`, "job.args.url"},
			{"POST", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"noop"},{"name":"b","kind":"http","args":` + args + `,"depends_on":["a"]}]}`, "steps[1].args.url"},
		} {
			r := e.do(e.writer, c.method, c.path, c.body)
			if r.Status != 400 {
				t.Errorf("%s %s with %s: %d %s, want 400", c.method, c.path, u, r.Status, r.Body)
				continue
			}
			p := r.problem(t)
			if p.Code != "destination_not_allowed" || p.Field != c.field || p.Title == "" || p.Detail == "" {
				t.Errorf("%s %s with %s: problem %+v, want destination_not_allowed on %s", c.method, c.path, u, p, c.field)
			}
		}
	}
	for _, table := range tables {
		if got := e.count(fmt.Sprintf(`SELECT count(*) FROM gaffer.%s`, table)); got != before[table] {
			t.Errorf("gaffer.%s has %d rows after refused requests, had %d", table, got, before[table])
		}
	}
	if got := e.count(`SELECT count(*) FROM gaffer.cron_entries WHERE name = 'nightly' AND job->'args'->>'url' = 'https://example.com/hook'`); got != 1 {
		t.Error("the refused PATCH or PUT changed the cron entry")
	}

	// A name is not resolved where the job enters: it is refused, if it
	// leads inside, when the call is made.
	if r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"http","args":{"url":"http://hooks.internal.example/x"}}`); r.Status != 201 {
		t.Fatalf("a host name: %d %s", r.Status, r.Body)
	}
}

// The node's own allow entries (its --webhook-allow) are honoured where
// jobs enter: an opened literal is accepted, its neighbour is not.
func TestEnqueueHonoursTheNodeAllowList(t *testing.T) {
	t.Parallel()
	hooks, err := webhook.New(context.Background(), webhook.Config{Allow: []string{"127.0.0.1:9000"}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withHooks(hooks))
	if r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"http","args":{"url":"http://127.0.0.1:9000/hook"}}`); r.Status != 201 {
		t.Fatalf("an allowed receiver: %d %s", r.Status, r.Body)
	}
	r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"http","args":{"url":"http://127.0.0.1:9001/hook"}}`)
	e.expectProblem(r, 400, "destination_not_allowed")
}

// Every problem code the API can answer is in the OpenAPI document: in
// the Problem schema's enum, and in the answers of the operations that
// give it — all but method_not_allowed, which no operation gives (it
// answers a method no operation has).
func TestProblemCodesDocumented(t *testing.T) {
	t.Parallel()
	doc := loadDoc(t)
	var documented []string
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum {
		documented = append(documented, fmt.Sprint(v))
	}
	given := map[string]bool{api.CodeMethodNotAllowed: true}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, res := range op.Responses.Map() {
				mt := res.Value.Content.Get("application/problem+json")
				if mt == nil {
					continue
				}
				for _, v := range mt.Schema.Value.Properties["code"].Value.Enum {
					given[fmt.Sprint(v)] = true
				}
			}
		}
	}
	for _, code := range api.ProblemCodes() {
		if !slices.Contains(documented, code) {
			t.Errorf("problem code %q is not in the OpenAPI document's enum", code)
		}
		if !given[code] {
			t.Errorf("problem code %q is given by no documented operation", code)
		}
	}
}
