package api_test

import (
	"strings"
	"testing"
)

// Limits and weights: admins set them, cluster:read reads them, tokens
// without those scopes see nothing; bad input writes nothing.
func TestLimitEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(e.admin, "PUT", "/v1/limits/per-tenant", `{"queue":"mail","key":"tenant","concurrency":5,"rate":100,"period":"1m"}`)
	if r.Status != 201 || !strings.Contains(string(r.Body), `"period":"1m0s"`) || !strings.Contains(string(r.Body), `"burst":100`) {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	if r := e.do(e.admin, "PUT", "/v1/limits/per-tenant", `{"queue":"mail","key":"tenant","concurrency":6}`); r.Status != 200 {
		t.Fatalf("replace: %d %s", r.Status, r.Body)
	}
	if r := e.do(e.admin, "GET", "/v1/limits/per-tenant", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"concurrency":6`) {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	if r := e.do(e.admin, "GET", "/v1/limits", nil); r.Status != 200 || !strings.Contains(string(r.Body), "http-per-host") {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	// A tenant's cluster:read sees no shared limit (TestTenantOperatorScopesAreConfined).
	if r := e.do(e.ops, "GET", "/v1/limits", nil); r.Status != 200 || strings.TrimSpace(string(r.Body)) != `{"data":[]}` {
		t.Fatalf("tenant's list: %d %s", r.Status, r.Body)
	}
	for _, tok := range []string{e.reader, e.writer, e.acme} {
		e.expectProblem(e.do(tok, "GET", "/v1/limits", nil), 403, "forbidden")
		e.expectProblem(e.do(tok, "PUT", "/v1/limits/x", `{"concurrency":1}`), 403, "forbidden")
	}
	e.expectProblem(e.do(e.ops, "PUT", "/v1/limits/x", `{"concurrency":1}`), 403, "forbidden")
	before := e.count(`SELECT count(*) FROM gaffer.limits`)
	for _, c := range []struct{ path, body, field string }{
		{"/v1/limits/x", `{}`, "concurrency"},
		{"/v1/limits/x", `{"concurrency":0,"rate":5}`, "period"},
		{"/v1/limits/x", `{"concurrency":1,"key":"args"}`, "key"},
		{"/v1/limits/x", `{"concurrency":1,"period":"soon"}`, "period"},
		{"/v1/limits/x", `{"concurrency":-3}`, "concurrency"},
		{"/v1/limits/x", `{"concurrency":1,"queue":"Not OK"}`, "queue"},
	} {
		p := e.expectProblem(e.do(e.admin, "PUT", c.path, c.body), 400, "invalid_field")
		if p.Field != c.field {
			t.Errorf("%s %s: field %q, want %q", c.path, c.body, p.Field, c.field)
		}
	}
	// The name is a path parameter: checked before the handler runs.
	if p := e.expectProblem(e.do(e.admin, "PUT", "/v1/limits/Bad%20Name", `{"concurrency":1}`), 400, "invalid_parameter"); p.Field != "name" {
		t.Errorf("PUT /v1/limits/Bad%%20Name: field %q, want name", p.Field)
	}
	e.expectProblem(e.do(e.admin, "PUT", "/v1/limits/x", `{"concurrency":1,"speed":3}`), 400, "unknown_field")
	if after := e.count(`SELECT count(*) FROM gaffer.limits`); after != before {
		t.Fatalf("%d limits after refused requests, was %d", after, before)
	}
	if r := e.do(e.admin, "DELETE", "/v1/limits/per-tenant", nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	e.expectProblem(e.do(e.admin, "DELETE", "/v1/limits/per-tenant", nil), 404, "not_found")

	if r := e.do(e.admin, "PUT", "/v1/tenants/acme", `{"weight":3}`); r.Status != 200 {
		t.Fatalf("weight: %d %s", r.Status, r.Body)
	}
	if r := e.do(e.admin, "GET", "/v1/tenants", nil); r.Status != 200 || !strings.Contains(string(r.Body), `{"tenant":"acme","weight":3}`) {
		t.Fatalf("weights: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do(e.admin, "PUT", "/v1/tenants/acme", `{"weight":0}`), 400, "invalid_field")
	e.expectProblem(e.do(e.acme, "PUT", "/v1/tenants/acme", `{"weight":1000}`), 403, "forbidden")
}
