package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// G9 against a real `gaffer server` process, with tokens made by
// `gaffer tokens create` as an operator would (the repro:
// --tenant acme --scopes admin is accepted): acme's admin token cannot
// make a limit for beta, raise its own weight, pause a shared queue,
// delete the shared http-per-host limit or drain beta's remote worker;
// acme's cluster:read token sees none of beta's workers, name or limits.
// Red with auth.Principal.Owns and Spans always true (each request
// succeeds; see api/TestTenantOperatorScopesAreConfined for the detail).
func TestTenantOperatorScopesOnRealServer(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	_, base := e.server("scopes-1")
	token := func(tenant, scopes string) string {
		return strings.TrimSpace(e.ok("tokens", "create", "--name", tenant+"-"+scopes, "--tenant", tenant, "--scopes", scopes))
	}
	operator := token("*", "admin")
	acmeAdmin := token("acme", "admin")
	acmeOps := token("acme", "jobs:read,cluster:read")
	betaWorker := token("beta", "worker")
	call := func(tok, method, path, body string) (int, string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, base+path, r)
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := call(operator, "PUT", "/v1/limits/beta-slow", `{"tenant":"beta","concurrency":5}`); st != 201 {
		t.Fatalf("operator's limit for beta: %d %s", st, b)
	}
	if st, b := call(operator, "PUT", "/v1/tenants/beta", `{"weight":2}`); st != 200 {
		t.Fatalf("operator's weight for beta: %d %s", st, b)
	}
	st, b := call(betaWorker, "POST", "/v1/workers", `{"name":"beta-py","queues":["default"],"kinds":["fetch"]}`)
	if st != 201 {
		t.Fatalf("beta's worker: %d %s", st, b)
	}
	betaID := b[strings.Index(b, `"id":"`)+6:]
	betaID = betaID[:strings.Index(betaID, `"`)]
	state := func() string {
		return e.scalar(`SELECT format('%s/%s/%s/%s/%s',
			(SELECT count(*) FROM gaffer.limits),
			(SELECT count(*) FROM gaffer.limits WHERE name = 'http-per-host' AND tenant IS NULL),
			(SELECT count(*) FROM gaffer.tenant_weights),
			(SELECT count(*) FROM gaffer.queues WHERE paused),
			(SELECT count(*) FROM gaffer.nodes WHERE drain_requested_at IS NOT NULL))`)
	}
	before := state()
	for _, a := range []struct {
		method, path, body string
		want               int
	}{
		{"PUT", "/v1/limits/beta-one", `{"tenant":"beta","concurrency":1}`, 403},
		{"PUT", "/v1/tenants/acme", `{"weight":1000}`, 403},
		{"POST", "/v1/queues/default/pause", "", 403},
		{"DELETE", "/v1/limits/http-per-host", "", 404},
		{"PUT", "/v1/limits/http-per-host", `{"concurrency":1}`, 409},
		{"POST", "/v1/nodes/" + betaID + "/drain", "", 404},
		{"POST", "/v1/nodes/scopes-1/drain", "", 403},
	} {
		if st, b := call(acmeAdmin, a.method, a.path, a.body); st != a.want {
			t.Errorf("acme's admin %s %s %s: %d %s, want %d", a.method, a.path, a.body, st, b, a.want)
		}
		if after := state(); after != before {
			t.Errorf("acme's admin %s %s changed what every tenant shares: %s, was %s", a.method, a.path, after, before)
			before = after
		}
	}
	for _, path := range []string{"/v1/nodes", "/v1/tenants", "/v1/limits", "/v1/cluster"} {
		st, b := call(acmeOps, "GET", path, "")
		if st != 200 || strings.Contains(b, "beta") || strings.Contains(b, betaID) || strings.Contains(b, "http-per-host") {
			t.Errorf("acme's cluster:read on %s: %d %s", path, st, b)
		}
	}
	// The node itself is no tenant's: acme's cluster:read sees it.
	if _, b := call(acmeOps, "GET", "/v1/nodes", ""); !strings.Contains(b, `"scopes-1"`) {
		t.Errorf("acme's cluster:read does not see the node: %s", b)
	}
}
