package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
)

// An enqueue of a kind no node handles and no remote worker of the
// tenant (or spanning tenants) works is refused with 400 unknown_kind,
// naming the field, and writes nothing; a node's kinds, a worker's named
// kinds, a worker naming none (every kind), a worker that left (until
// retention), allow_unknown_kind and the operator's AllowUnknownKinds
// each let it in; a kind that is no kind at all is invalid, not unknown;
// another tenant's worker does not make a kind known; the serving node's
// own kinds are known without a nodes row. Red with the check
// removed from enqueue (every enqueue answers 201).
func TestEnqueueRefusesUnknownKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.AllowUnknownKinds = false })
	ctx := context.Background()
	acme := e.token("acme", auth.ScopeJobsWrite, auth.ScopeJobsRead)
	other := e.token("other", auth.ScopeJobsWrite)
	acmeWorker := e.token("acme", auth.ScopeWorker)
	enqueue := func(token, body string) response { return e.do(token, "POST", "/v1/jobs", body) }
	refused := func(token, body, kind string) {
		t.Helper()
		p := e.expectProblem(enqueue(token, body), 400, api.CodeUnknownKind)
		if p.Field != "kind" || !strings.Contains(p.Detail, fmt.Sprintf("%q", kind)) || !strings.Contains(p.Detail, "allow_unknown_kind") {
			t.Fatalf("%s: %+v", body, p)
		}
	}
	accepted := func(token, body string) {
		t.Helper()
		if r := enqueue(token, body); r.Status != 201 {
			t.Fatalf("%s: %d %s", body, r.Status, r.Body)
		}
	}

	refused(acme, `{"kind":"mail.send"}`, "mail.send")
	refused(e.admin, `{"kind":"mail.send","tenant":"acme"}`, "mail.send")
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 0 {
		t.Fatalf("%d jobs written by refused enqueues", n)
	}
	// Not a kind at all: the request's own problem comes first.
	e.expectProblem(enqueue(acme, `{"kind":"no spaces"}`), 400, api.CodeInvalidField)
	e.expectProblem(enqueue(acme, `{}`), 400, api.CodeInvalidField)

	// Asked for, it is enqueued.
	accepted(acme, `{"kind":"mail.send","allow_unknown_kind":true}`)
	// A kind the serving node handles, with no row in the nodes table (a
	// node running without etcd registers none): the env's client knows
	// the http kind. Nothing runs it here; nothing is called.
	accepted(acme, `{"kind":"http","args":{"url":"https://hooks.example.com/x"}}`)

	// A node that handles it: every tenant may enqueue it.
	if err := e.st.RegisterNode(ctx, "node-1", "host", "v", "", map[string]int{"default": 1}, []string{"mail.send"}); err != nil {
		t.Fatal(err)
	}
	accepted(acme, `{"kind":"mail.send"}`)
	accepted(other, `{"kind":"mail.send"}`)

	// A remote worker of acme naming resize: acme's, not other's.
	var w workerOut
	if r := e.do(acmeWorker, "POST", "/v1/workers", `{"queues":["py"],"kinds":["resize"]}`); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	} else {
		r.decode(t, &w)
	}
	accepted(acme, `{"kind":"resize","queue":"py"}`)
	refused(other, `{"kind":"resize","queue":"py"}`, "resize")
	refused(acme, `{"kind":"thumbnail","queue":"py"}`, "thumbnail")

	// It left: its kinds stay known until retention deletes its row.
	if r := e.do(acmeWorker, "DELETE", "/v1/workers/"+w.ID, nil); r.Status/100 != 2 {
		t.Fatalf("leave: %d %s", r.Status, r.Body)
	}
	accepted(acme, `{"kind":"resize","queue":"py"}`)

	// A spanning worker naming no kinds works every kind of every tenant.
	if r := e.do(e.token("*", auth.ScopeWorker, auth.ScopeAdmin), "POST", "/v1/workers", `{"queues":["any"]}`); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	accepted(other, `{"kind":"thumbnail"}`)

	// The operator's switch.
	open := newEnv(t, func(c *api.Config) { c.AllowUnknownKinds = true })
	if r := open.do(open.writer, "POST", "/v1/jobs", `{"kind":"never.registered"}`); r.Status != 201 {
		t.Fatalf("AllowUnknownKinds: %d %s", r.Status, r.Body)
	}
}
