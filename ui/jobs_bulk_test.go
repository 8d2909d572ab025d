package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func (e *env) enqueue(r job.Request) int64 {
	e.t.Helper()
	res, err := e.jobs.Enqueue(context.Background(), r)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Job.ID
}

// The jobs list has state tabs counting the filter's jobs (the token's
// tenant's only) and a search box: a job id goes to the job, other text
// finds jobs by kind or args.
func TestJobsTabsAndSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mine []int64
	for i := range 3 {
		mine = append(mine, e.enqueue(job.Request{Tenant: "acme", Kind: "mail.send", Queue: "q", Args: map[string]string{"to": fmt.Sprintf("user%d@example.com", i)}}))
	}
	e.enqueue(job.Request{Tenant: "acme", Kind: "report", Queue: "other"})
	theirs := e.enqueue(job.Request{Tenant: "globex", Kind: "mail.send", Queue: "q", Args: map[string]string{"to": "user1@globex.example"}})
	b := e.browser()
	b.login(e.token("acme", auth.ScopeJobsRead))

	p := b.get("/ui/jobs?queue=q")
	for _, want := range []string{`data-state="pending">pending <span class="count">3</span>`, `data-state="">all <span class="count">3</span>`,
		`data-state="running">running <span class="count">0</span>`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("jobs page lacks %s", want)
		}
	}
	if p := b.get("/ui/jobs"); !strings.Contains(p.body, `data-state="">all <span class="count">4</span>`) {
		t.Errorf("unfiltered tabs do not count acme's 4 jobs")
	}

	p = b.get(fmt.Sprintf("/ui/jobs?q=%d", mine[1]))
	if p.status != http.StatusSeeOther || p.header.Get("Location") != fmt.Sprintf("/ui/jobs/%d", mine[1]) {
		t.Fatalf("searching a job id: %d to %q, want a redirect to the job", p.status, p.header.Get("Location"))
	}
	// Another tenant's id is not theirs to see: searched as text, no match.
	if p := b.get(fmt.Sprintf("/ui/jobs?q=%d", theirs)); p.status != http.StatusOK || strings.Contains(p.body, fmt.Sprintf(`href="/ui/jobs/%d"`, theirs)) {
		t.Fatalf("searching another tenant's job id: %d", p.status)
	}
	p = b.get("/ui/jobs?q=USER1")
	if p.status != 200 || !strings.Contains(p.body, fmt.Sprintf(`href="/ui/jobs/%d"`, mine[1])) || strings.Contains(p.body, fmt.Sprintf(`href="/ui/jobs/%d"`, mine[0])) ||
		strings.Contains(p.body, "globex") {
		t.Fatalf("search by args text (%d):\n%s", p.status, p.body)
	}
	if !strings.Contains(p.body, `data-state="">all <span class="count">1</span>`) {
		t.Errorf("tabs under a search do not count its one match")
	}
	if p := b.get("/ui/jobs?q=" + strings.Repeat("x", 300)); p.status != http.StatusBadRequest {
		t.Errorf("an over-long search: %d, want 400", p.status)
	}
}

// Bulk actions from the jobs list: ticked jobs, and every job matching
// the filter after a count preview; both confined to the token's tenant,
// behind CSRF and jobs:write.
func TestJobsBulkActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mine []int64
	for range 4 {
		mine = append(mine, e.enqueue(job.Request{Tenant: "acme", Kind: "k", Queue: "q"}))
	}
	keep := e.enqueue(job.Request{Tenant: "acme", Kind: "k", Queue: "keep"})
	theirs := e.enqueue(job.Request{Tenant: "globex", Kind: "k", Queue: "q"})
	b := e.browser()
	b.login(e.token("acme", auth.ScopeJobsRead, auth.ScopeJobsWrite))
	csrf := b.csrf()

	p := b.post("/ui/jobs/bulk", url.Values{"csrf": {csrf}, "action": {"cancel"}, "queue": {"q"},
		"id": {fmt.Sprint(mine[0]), fmt.Sprint(mine[1]), fmt.Sprint(theirs)}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/jobs?queue=q" ||
		!strings.Contains(flash(t, p), "Cancelled 2 jobs") || !strings.Contains(flash(t, p), fmt.Sprintf("job %d: not found", theirs)) {
		t.Fatalf("bulk cancel of ticked jobs: %d %s flash %q", p.status, p.header.Get("Location"), flash(t, p))
	}
	if e.state(mine[0]) != "cancelled" || e.state(mine[1]) != "cancelled" || e.state(theirs) != "pending" {
		t.Fatalf("after the bulk cancel: %s %s, globex's %s", e.state(mine[0]), e.state(mine[1]), e.state(theirs))
	}

	// All matching: the preview counts, changes nothing; the confirmation
	// acts on the filter's jobs only.
	p = b.get("/ui/jobs/bulk?action=cancel&queue=q&state=pending")
	if p.status != 200 || !strings.Contains(p.body, `id="bulk-count">2 jobs`) || !strings.Contains(p.body, `Cancel 2 jobs`) {
		t.Fatalf("count preview (%d):\n%s", p.status, p.body)
	}
	if e.state(mine[2]) != "pending" {
		t.Fatal("the preview changed a job")
	}
	p = b.post("/ui/jobs/bulk", url.Values{"csrf": {csrf}, "action": {"cancel"}, "all": {"yes"}, "queue": {"q"}, "state": {"pending"}})
	if !strings.Contains(flash(t, p), "Cancelled 2 jobs") {
		t.Fatalf("cancel all matching: flash %q", flash(t, p))
	}
	if e.state(mine[2]) != "cancelled" || e.state(mine[3]) != "cancelled" || e.state(keep) != "pending" || e.state(theirs) != "pending" {
		t.Fatal("cancel all matching touched a job outside the filter or the tenant")
	}
	// Delete all matching: the cancelled jobs go.
	p = b.post("/ui/jobs/bulk", url.Values{"csrf": {csrf}, "action": {"delete"}, "all": {"yes"}, "state": {"cancelled"}})
	if !strings.Contains(flash(t, p), "Deleted 4 jobs") {
		t.Fatalf("delete all cancelled: flash %q", flash(t, p))
	}

	// Refused: bad action, bad id, nothing ticked, a bad search for all; no
	// CSRF; a read-only token.
	for _, form := range []url.Values{
		{"action": {"purge"}, "id": {fmt.Sprint(keep)}},
		{"action": {"cancel"}, "id": {"abc"}},
		{"action": {"cancel"}},
		{"action": {"cancel"}, "all": {"yes"}, "q": {"args.a..b=1"}},
		{"action": {"cancel"}, "all": {"yes"}, "q": {"tag:a,b"}},
		{"action": {"cancel"}, "all": {"yes"}, "state": {"lost"}},
	} {
		form.Set("csrf", csrf)
		if p := b.post("/ui/jobs/bulk", form); !strings.HasPrefix(flash(t, p), "Refused:") {
			t.Errorf("%v: flash %q, want a refusal", form, flash(t, p))
		}
	}
	if p := b.post("/ui/jobs/bulk", url.Values{"action": {"cancel"}, "id": {fmt.Sprint(keep)}}); p.status != http.StatusForbidden {
		t.Errorf("no CSRF: %d", p.status)
	}
	r := e.browser()
	r.login(e.token("acme", auth.ScopeJobsRead))
	if p := r.post("/ui/jobs/bulk", url.Values{"csrf": {r.csrf()}, "action": {"cancel"}, "id": {fmt.Sprint(keep)}}); p.status != http.StatusForbidden {
		t.Errorf("read-only token: %d", p.status)
	}
	if e.state(keep) != "pending" {
		t.Fatal("a refused request changed a job")
	}
}

// The job page shows the queue wait, the last attempt's run time, the
// total, and a timeline with each failed attempt.
func TestJobPageTimeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := e.enqueue(job.Request{Tenant: "acme", Kind: "k", Queue: "tl", MaxAttempts: 3})
	claim := func() store.Job {
		jobs, err := e.st.ClaimJobs(ctx, store.ClaimParams{Queue: "tl", Limit: 1, Token: time.Now().UnixNano(), LeaseTTL: time.Minute, Node: "node-7"})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim: %d, %v", len(jobs), err)
		}
		return jobs[0]
	}
	j := claim()
	if _, err := e.st.FailJob(ctx, store.Failure{Lease: store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}, Message: "boom", Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	j = claim()
	if _, err := e.st.CompleteJobs(ctx, nil, []store.Completion{{Lease: store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}}}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token("acme", auth.ScopeJobsRead))
	p := b.get(fmt.Sprintf("/ui/jobs/%d", id))
	for _, want := range []string{`id="dur-wait">queue wait <strong>`, `id="dur-run">last attempt ran <strong>`, `id="dur-total">total <strong>`,
		`<svg class="timeline"`, "<td>enqueued</td>", "<td>attempt 1 ended</td><td>error on node-7</td>", "<td>attempt 2 started</td>", "<td>completed</td>",
		`<circle class="ok"`, `<circle class="fail"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("job page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(p.body)
	}
}
