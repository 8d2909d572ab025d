package ui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
)

// The job page shows the progress an attempt reported (escaped: a
// message is a tenant's text), and the nodes page lists remote workers
// with their kind and tenant.
func TestProgressAndRemoteWorkersShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	workers, err := remote.NewWorkers(remote.Config{Pool: e.st.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.jobs.Enqueue(ctx, job.Request{Kind: "resize", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := workers.Register(ctx, remote.Registration{Tenant: "acme", Name: "py-worker", Queues: []string{"default"}, Kinds: []string{"resize"}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := workers.Claim(ctx, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1})
	if err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	if err := workers.Progress(ctx, "acme", claimed.Jobs[0].Lease, 62.5, `<b>5 of 8</b> & counting`); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	p := b.get(fmt.Sprintf("/ui/jobs/%d", res.Job.ID))
	if p.status != 200 || !strings.Contains(p.body, `<progress max="100" value="62.5">`) || !strings.Contains(p.body, "&lt;b&gt;5 of 8&lt;/b&gt; &amp; counting") {
		t.Fatalf("job page: %d\n%s", p.status, p.body)
	}
	p = b.get("/ui/nodes")
	if !strings.Contains(p.body, w.ID) || !strings.Contains(p.body, "remote <small>tenant acme") || !strings.Contains(p.body, "py-worker") {
		t.Fatalf("nodes page does not show the remote worker:\n%s", p.body)
	}
}
