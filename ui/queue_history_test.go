package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// finish enqueues n jobs of tenant on queue and completes (or, failing,
// fails) them.
func (e *env) finish(tenant, queue string, n int, fail bool) {
	e.t.Helper()
	ctx := context.Background()
	for range n {
		if _, err := e.jobs.Enqueue(ctx, job.Request{Kind: "k", Tenant: tenant, Queue: queue}); err != nil {
			e.t.Fatal(err)
		}
	}
	jobs, err := e.st.ClaimJobs(ctx, store.ClaimParams{Queue: queue, Limit: n, Token: time.Now().UnixNano(), LeaseTTL: time.Minute, Node: "test"})
	if err != nil || len(jobs) != n {
		e.t.Fatalf("claimed %d of %d: %v", len(jobs), n, err)
	}
	for _, j := range jobs {
		l := store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}
		if fail {
			_, err = e.st.FailJob(ctx, store.Failure{Lease: l, Permanent: true, Message: "boom", Kind: "error"})
		} else {
			_, err = e.st.CompleteJobs(ctx, nil, []store.Completion{{Lease: l}})
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// A queue's page charts what finished in it over the range picked (1h,
// 6h, 24h, 7d), with the range's totals; a tenant's token sees its own
// tenant's jobs only; an unknown range is refused.
func TestQueueHistoryPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.finish("acme", "mail", 3, false)
	e.finish("acme", "mail", 1, true)
	e.finish("globex", "mail", 5, false)
	e.finish("globex", "other", 2, false)
	if err := e.st.SampleThroughput(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.jobs.Enqueue(context.Background(), job.Request{Kind: "k", Tenant: "acme", Queue: "mail"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	if p := b.get("/ui/queues"); !strings.Contains(p.body, `href="/ui/queues/mail"`) {
		t.Fatal("the queues page does not link a queue's history")
	}
	totals := func(p page) string {
		t.Helper()
		i, j := strings.Index(p.body, `id="hist-completed">`), strings.Index(p.body, `id="hist-failed">`)
		if i < 0 || j < 0 {
			t.Fatalf("no totals (%d):\n%s", p.status, p.body)
		}
		cut := func(k int) string { s := p.body[k:]; s = s[strings.Index(s, ">")+1:]; return s[:strings.Index(s, "<")] }
		return cut(i) + "/" + cut(j)
	}
	for _, rg := range []string{"", "1h", "6h", "24h", "7d"} {
		p := b.get("/ui/queues/mail?range=" + rg)
		if p.status != http.StatusOK || !strings.Contains(p.body, `<svg class="chart"`) || totals(p) != "8/1" {
			t.Errorf("range %q: %d, totals %s, want 8/1 and a chart", rg, p.status, totals(p))
		}
		if rg != "" && !strings.Contains(p.body, `range=`+rg+`" aria-current="page"`) {
			t.Errorf("range %q is not marked as picked", rg)
		}
	}
	if p := b.get("/ui/queues/mail?range=" + "30d"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "range must be one of 1h, 6h, 24h, 7d") {
		t.Fatalf("an unknown range: %d", p.status)
	}
	acme := e.browser()
	acme.login(e.token("acme", auth.ScopeJobsRead))
	if p := acme.get("/ui/queues/mail?range=24h"); totals(p) != "3/1" {
		t.Fatalf("acme's mail history: %s, want 3/1 (its own jobs only)", totals(p))
	}
	if p := acme.get("/ui/queues/other"); totals(p) != "0/0" || strings.Contains(p.body, `<svg class="chart"`) {
		t.Fatalf("acme's view of globex's queue: %s", totals(p))
	}
}
