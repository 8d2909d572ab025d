package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.expectProblem(e.do("", "GET", "/v1/jobs", nil), 401, "unauthorized")
	if r := e.do("", "GET", "/v1/jobs", nil); r.Header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	e.expectProblem(e.do("not-a-real-token-at-all", "GET", "/v1/jobs", nil), 401, "unauthorized")
	// Wrong scope: 403.
	e.expectProblem(e.do(e.reader, "POST", "/v1/jobs", `{"kind":"k"}`), 403, "forbidden")
	e.expectProblem(e.do(e.writer, "POST", "/v1/queues/default/pause", nil), 403, "forbidden")
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 0 {
		t.Fatalf("%d jobs written by refused requests", n)
	}
	// Revoked: 401 (after the cache of a few seconds; a fresh Tokens has none).
	text, rec, err := e.tokens.Create(context.Background(), auth.NewTokenRequest{Name: "short-lived", Tenant: "default", Scopes: []string{"jobs:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.do(text, "GET", "/v1/jobs", nil); r.Status != 200 {
		t.Fatalf("new token: %d", r.Status)
	}
	if err := e.tokens.Revoke(context.Background(), rec.ID); err != nil {
		t.Fatal(err)
	}
	e.expectProblem(e.do(text, "GET", "/v1/jobs", nil), 401, "unauthorized")
	// Tokens are stored hashed.
	if n := e.count(`SELECT count(*) FROM gaffer.api_tokens WHERE position(convert_to($1, 'UTF8') in hash) > 0`, text); n != 0 {
		t.Fatal("a token's text is stored")
	}
}

func TestTokenValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, req := range []auth.NewTokenRequest{
		{Name: "", Scopes: []string{"admin"}},
		{Name: "x", Scopes: nil},
		{Name: "x", Scopes: []string{"root"}},
		{Name: "x", Tenant: "*", Scopes: []string{"jobs:read"}},
		{Name: "x", Tenant: "Not Valid", Scopes: []string{"jobs:read"}},
		{Name: "x", Scopes: []string{"admin"}, Secret: "short"},
	} {
		if _, _, err := e.tokens.Create(ctx, req); err == nil {
			t.Errorf("created %+v", req)
		}
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mine, theirs struct{ Job struct{ ID int64 } }
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k"}`).decode(t, &mine)
	e.do(e.acme, "POST", "/v1/jobs", `{"kind":"k"}`).decode(t, &theirs)
	// Another tenant's id answers 404, for reads and writes.
	e.expectProblem(e.do(e.writer, "GET", fmt.Sprintf("/v1/jobs/%d", theirs.Job.ID), nil), 404, "not_found")
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", theirs.Job.ID), nil), 404, "not_found")
	var list struct{ Data []struct{ ID int64 } }
	e.do(e.writer, "GET", "/v1/jobs", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != mine.Job.ID {
		t.Fatalf("default's list %+v", list)
	}
	// Writing for another tenant is refused.
	e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","tenant":"acme"}`), 403, "forbidden")
	// The spanning admin token sees both, or one with ?tenant=.
	e.do(e.admin, "GET", "/v1/jobs", nil).decode(t, &list)
	if len(list.Data) != 2 {
		t.Fatalf("admin sees %d jobs", len(list.Data))
	}
	e.do(e.admin, "GET", "/v1/jobs?tenant=acme", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != theirs.Job.ID {
		t.Fatalf("admin ?tenant=acme: %+v", list)
	}
	var created struct{ Job struct{ Tenant string } }
	e.do(e.admin, "POST", "/v1/jobs", `{"kind":"k","tenant":"globex"}`).decode(t, &created)
	if created.Job.Tenant != "globex" {
		t.Fatalf("admin write tenant %q", created.Job.Tenant)
	}
	// Cron and DLQ are tenant-scoped too.
	if r := e.do(e.acme, "POST", "/v1/cron", `{"name":"c","schedule":"@daily","job":{"kind":"k"}}`); r.Status != 201 {
		t.Fatalf("create cron: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do(e.writer, "GET", "/v1/cron/c", nil), 404, "not_found")
	e.expectProblem(e.do(e.writer, "POST", "/v1/cron/c/trigger", nil), 404, "not_found")
	if r := e.do(e.writer, "POST", "/v1/cron", `{"name":"c","schedule":"@daily","job":{"kind":"k"}}`); r.Status != 201 {
		t.Fatalf("same name, other tenant: %d %s", r.Status, r.Body)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.RateLimit, c.RateBurst = 1, 3 })
	var last response
	for range 4 {
		last = e.do(e.reader, "GET", "/v1/jobs", nil)
	}
	e.expectProblem(last, http.StatusTooManyRequests, "rate_limited")
	if ra := last.Header.Get("Retry-After"); ra == "" || strings.HasPrefix(ra, "0") {
		t.Fatalf("Retry-After %q", ra)
	}
	// Another token has its own budget.
	if r := e.do(e.writer, "GET", "/v1/jobs", nil); r.Status != 200 {
		t.Fatalf("other token: %d", r.Status)
	}
}
