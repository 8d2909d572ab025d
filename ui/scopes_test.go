package ui_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
)

// G9 on the dashboard: a session of tenant acme's admin token pauses no
// queue, drains no node and no other tenant's remote worker, and sees
// neither beta's remote worker nor a shared or beta's limit; it drains
// its own remote worker. Red with auth.Principal.Owns always true and
// Spans true for every token: the queue is paused, the node and beta's
// worker drained, beta's worker and limits shown.
func TestTenantAdminIsConfinedOnDashboard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	workers, err := remote.NewWorkers(remote.Config{Pool: e.st.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	beta, err := workers.Register(ctx, remote.Registration{Tenant: "beta", Name: "beta-py", Queues: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := workers.Register(ctx, remote.Registration{Tenant: "acme", Name: "acme-py", Queues: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.jobs.SetLimit(ctx, job.Limit{Name: "beta-slow", Tenant: "beta", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RegisterNode(ctx, "node-x", "host", "dev", "2025c", map[string]int{"default": 1}, nil); err != nil {
		t.Fatal(err)
	}
	drained := func(id string) bool {
		var n int
		if err := e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.nodes WHERE id = $1 AND drain_requested_at IS NOT NULL`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	acme := e.browser()
	acme.login(e.token("acme", auth.ScopeAdmin))
	csrf := url.Values{"csrf": {acme.csrf()}}
	p := acme.get("/ui/nodes")
	if p.status != 200 || strings.Contains(p.body, beta.ID) || strings.Contains(p.body, "beta") {
		t.Errorf("acme's nodes page (%d) shows beta's worker:\n%s", p.status, p.body)
	}
	if !strings.Contains(p.body, mine.ID) || !strings.Contains(p.body, "node-x") {
		t.Errorf("acme's nodes page (%d) lacks its own worker or the node:\n%s", p.status, p.body)
	}
	if p := acme.get("/ui/queues"); strings.Contains(p.body, "beta-slow") || strings.Contains(p.body, "http-per-host") {
		t.Errorf("acme's queues page shows beta's or a shared limit:\n%s", p.body)
	}
	// A refused action returns to a page with the refusal as its flash.
	refused := func(what, path, want string) {
		t.Helper()
		if msg := flash(t, acme.post(path, csrf)); !strings.HasPrefix(msg, "Refused: ") || !strings.Contains(msg, want) {
			t.Errorf("acme's admin %s: flash %q, want a refusal saying %q", what, msg, want)
		}
	}
	refused("pausing a shared queue", "/ui/queues/default/pause", "spanning tenants")
	if e.paused("default") {
		t.Error("acme's admin paused the shared queue")
	}
	refused("draining a node", "/ui/nodes/node-x/drain", "spanning tenants")
	refused("draining beta's worker", "/ui/nodes/"+beta.ID+"/drain", "no remote worker "+beta.ID+" of tenant acme")
	if drained("node-x") || drained(beta.ID) {
		t.Error("acme's admin drained the node or beta's worker")
	}
	if msg := flash(t, acme.post("/ui/nodes/"+mine.ID+"/drain", csrf)); !strings.Contains(msg, "is draining") || !drained(mine.ID) {
		t.Errorf("acme's admin draining its own worker: %q", msg)
	}
}
