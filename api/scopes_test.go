package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
)

// G9: a tenant's admin and cluster:read tokens are confined to their
// tenant. Each attack seen with an admin token of tenant acme (a limit
// made for tenant beta, acme's weight raised, a shared queue paused, the
// shared http-per-host limit deleted or replaced, beta's remote worker
// drained, a node drained) is refused and changes nothing; a cluster:read
// token of acme sees none of beta's remote workers, limits, usage keys or
// tenant name. What acme's admin may do — its own limits and remote
// workers — it does. The tokens are made as any token in a database
// already is: the check is made on each request. Red with Owns always
// true and the Operator check off in serve: each attack succeeds.
func TestTenantOperatorScopesAreConfined(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acmeAdmin := e.token("acme", auth.ScopeAdmin)
	acmeOps := e.token("acme", auth.ScopeJobsRead, auth.ScopeClusterRead)
	betaWorker := e.token("beta", auth.ScopeWorker)
	betaWriter := e.token("beta", auth.ScopeJobsWrite)

	// beta: a limit counting by a host in its args, a remote worker
	// running one of its jobs (so the limit's usage shows the host).
	if r := e.do(e.admin, "PUT", "/v1/limits/beta-hosts", `{"tenant":"beta","key":"host(args.url)","concurrency":5}`); r.Status != 201 {
		t.Fatalf("beta's limit: %d %s", r.Status, r.Body)
	}
	if r := e.do(e.admin, "PUT", "/v1/tenants/beta", `{"weight":2}`); r.Status != 200 {
		t.Fatalf("beta's weight: %d %s", r.Status, r.Body)
	}
	var bw workerOut
	e.do(betaWorker, "POST", "/v1/workers", `{"name":"beta-py","queues":["default"],"kinds":["fetch"]}`).decode(t, &bw)
	e.do(betaWriter, "POST", "/v1/jobs", `{"kind":"fetch","args":{"url":"https://beta-secret.example/x"}}`)
	var c claimOut
	e.do(betaWorker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q}`, bw.ID)).decode(t, &c)
	if len(c.Jobs) != 1 {
		t.Fatalf("beta's worker claimed %+v", c)
	}
	if r := e.do(e.admin, "GET", "/v1/limits/beta-hosts", nil); !strings.Contains(string(r.Body), "beta-secret.example") {
		t.Fatalf("the operator sees no usage key: %s", r.Body)
	}
	if err := e.st.RegisterNode(t.Context(), "node-1", "host", "v1", "2025c", map[string]int{"default": 10}, nil); err != nil {
		t.Fatal(err)
	}
	before := func() string {
		return fmt.Sprint(
			e.count(`SELECT count(*) FROM gaffer.limits`),
			e.count(`SELECT count(*) FROM gaffer.limits WHERE name = 'http-per-host' AND tenant IS NULL AND concurrency IS NOT DISTINCT FROM (SELECT concurrency FROM gaffer.limits WHERE name = 'http-per-host')`),
			e.count(`SELECT count(*) FROM gaffer.limits WHERE name = 'beta-hosts' AND tenant = 'beta' AND concurrency = 5`),
			e.count(`SELECT count(*) FROM gaffer.tenant_weights`),
			e.count(`SELECT count(*) FROM gaffer.queues WHERE paused`),
			e.count(`SELECT count(*) FROM gaffer.nodes WHERE drain_requested_at IS NOT NULL`),
		)
	}
	state := before()

	// The admin token of acme: each attack is refused and changes nothing.
	for _, a := range []struct {
		method, path, body string
		status             int
		code, field        string
	}{
		{"PUT", "/v1/limits/beta-one", `{"tenant":"beta","concurrency":1}`, 403, "forbidden", "tenant"},
		{"PUT", "/v1/limits/beta-hosts", `{"concurrency":1}`, 409, "conflict", ""},
		{"PUT", "/v1/limits/http-per-host", `{"concurrency":1}`, 409, "conflict", ""},
		{"DELETE", "/v1/limits/http-per-host", "", 404, "not_found", ""},
		{"DELETE", "/v1/limits/beta-hosts", "", 404, "not_found", ""},
		{"PUT", "/v1/tenants/acme", `{"weight":1000}`, 403, "forbidden", ""},
		{"POST", "/v1/queues/default/pause", "", 403, "forbidden", ""},
		{"POST", "/v1/queues/default/resume", "", 403, "forbidden", ""},
		{"POST", "/v1/nodes/" + bw.ID + "/drain", "", 404, "not_found", ""},
		{"POST", "/v1/nodes/" + bw.ID + "/undrain", "", 404, "not_found", ""},
		{"POST", "/v1/nodes/node-1/drain", "", 403, "forbidden", ""},
	} {
		var body any
		if a.body != "" {
			body = a.body
		}
		r := e.do(acmeAdmin, a.method, a.path, body)
		if r.Status != a.status {
			t.Errorf("acme's admin: %s %s %s: %d %s, want %d %s", a.method, a.path, a.body, r.Status, r.Body, a.status, a.code)
		} else if p := r.problem(t); p.Code != a.code || p.Field != a.field {
			t.Errorf("acme's admin: %s %s %s: %+v, want code %s field %q", a.method, a.path, a.body, p, a.code, a.field)
		}
		if after := before(); after != state {
			t.Errorf("acme's admin: %s %s %s changed what every tenant shares: %s, was %s", a.method, a.path, a.body, after, state)
			state = after
		}
	}

	// What acme's tokens see: the node, nothing of beta.
	for _, tok := range []string{acmeOps, acmeAdmin} {
		for _, path := range []string{"/v1/nodes", "/v1/limits", "/v1/tenants", "/v1/cluster", "/v1/limits/beta-hosts", "/v1/limits/http-per-host"} {
			r := e.do(tok, "GET", path, nil)
			for _, secret := range []string{"beta", bw.ID, "http-per-host"} {
				if strings.Contains(string(r.Body), secret) && !strings.Contains(path, secret) {
					t.Errorf("acme's token on %s sees %q: %s", path, secret, r.Body)
				}
			}
		}
		e.expectProblem(e.do(tok, "GET", "/v1/limits/beta-hosts", nil), 404, "not_found")
		var nodes struct{ Data []struct{ ID string } }
		e.do(tok, "GET", "/v1/nodes", nil).decode(t, &nodes)
		if fmt.Sprint(nodes.Data) != "[{node-1}]" {
			t.Errorf("acme's token sees nodes %v, want the node only", nodes.Data)
		}
		var cl struct {
			RemoteWorkers map[string]int `json:"remote_workers"`
		}
		e.do(tok, "GET", "/v1/cluster", nil).decode(t, &cl)
		if cl.RemoteWorkers["active"] != 0 {
			t.Errorf("acme's token counts beta's remote worker: %v", cl.RemoteWorkers)
		}
	}

	// What acme's admin may do: its own limits and remote workers.
	r := e.do(acmeAdmin, "PUT", "/v1/limits/acme-one", `{"concurrency":2}`)
	if r.Status != 201 || !strings.Contains(string(r.Body), `"tenant":"acme"`) {
		t.Fatalf("acme's own limit: %d %s", r.Status, r.Body)
	}
	if r := e.do(acmeAdmin, "PUT", "/v1/limits/acme-one", `{"tenant":"acme","concurrency":3}`); r.Status != 200 {
		t.Fatalf("acme replaces its own limit: %d %s", r.Status, r.Body)
	}
	if r := e.do(acmeOps, "GET", "/v1/limits", nil); !strings.Contains(string(r.Body), `"name":"acme-one"`) || !strings.Contains(string(r.Body), `"concurrency":3`) {
		t.Fatalf("acme's cluster:read does not see its own limit: %s", r.Body)
	}
	var aw workerOut
	e.do(e.token("acme", auth.ScopeWorker), "POST", "/v1/workers", `{"name":"acme-py","queues":["default"]}`).decode(t, &aw)
	if r := e.do(acmeAdmin, "POST", "/v1/nodes/"+aw.ID+"/drain", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"drain_requested_at"`) {
		t.Fatalf("acme drains its own worker: %d %s", r.Status, r.Body)
	}
	if r := e.do(acmeOps, "GET", "/v1/nodes", nil); !strings.Contains(string(r.Body), aw.ID) {
		t.Fatalf("acme does not see its own worker: %s", r.Body)
	}
	if r := e.do(acmeAdmin, "DELETE", "/v1/limits/acme-one", nil); r.Status != 204 {
		t.Fatalf("acme deletes its own limit: %d %s", r.Status, r.Body)
	}
	// beta's limit, weight and worker are as they were.
	if r := e.do(e.admin, "GET", "/v1/limits/beta-hosts", nil); !strings.Contains(string(r.Body), `"concurrency":5`) {
		t.Fatalf("beta's limit: %s", r.Body)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.nodes WHERE id = $1 AND drain_requested_at IS NULL`, bw.ID); n != 1 {
		t.Fatalf("beta's worker was drained")
	}
}
