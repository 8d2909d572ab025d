package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// A sequence's job page says whose turn it is and how many wait, links
// the sequence's jobs (which the jobs page filters), and, when the
// sequence is halted, offers to resume it — which lets the next job go.
func TestJobPageShowsItsSequence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var ids []int64
	for range 3 {
		res, err := e.jobs.Enqueue(ctx, job.Request{Kind: "k", Queue: "idle", Sequence: &job.Sequence{Key: "acct/42"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	b := e.browser()
	b.login(e.token("default", auth.ScopeJobsRead, auth.ScopeJobsWrite))
	p := b.get("/ui/jobs/" + strconv.FormatInt(ids[1], 10))
	if p.status != 200 || !strings.Contains(p.body, "<code>acct/42</code>") || !strings.Contains(p.body, `turn: <a href="/ui/jobs/`+strconv.FormatInt(ids[0], 10)) ||
		!strings.Contains(p.body, "2 held") || strings.Contains(p.body, "Resume sequence") {
		t.Fatalf("job page of a held job: %d\n%s", p.status, p.body)
	}
	list := b.get("/ui/jobs?sequence=" + url.QueryEscape("acct/42"))
	if list.status != 200 || strings.Count(list.body, `<a href="/ui/jobs/`) < 3 || !strings.Contains(list.body, "st-held") {
		t.Fatalf("jobs of the sequence: %d\n%s", list.status, list.body)
	}
	// The head fails for good: the sequence halts, and the page offers to
	// resume it.
	e.st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET state = 'failed', finalized_at = now() WHERE id = $1`, ids[0])
	page := "/ui/jobs/" + strconv.FormatInt(ids[1], 10)
	p = b.get(page)
	if !strings.Contains(p.body, "<strong>halted</strong>") || !strings.Contains(p.body, "Resume sequence") {
		t.Fatalf("job page of a halted sequence:\n%s", p.body)
	}
	r := b.post(page+"/resume-sequence", url.Values{"csrf": {b.csrf()}, "back": {page}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("resume: %d\n%s", r.status, r.body)
	}
	j, _ := e.jobs.Get(ctx, "", ids[1])
	if j.State != job.Pending {
		t.Fatalf("after resume the next job is %s, want pending", j.State)
	}
	// Resuming again is refused, and says why.
	b.post(page+"/resume-sequence", url.Values{"csrf": {b.csrf()}, "back": {page}})
	if p := b.get(page); !strings.Contains(p.body, "is not halted") {
		t.Fatalf("resume of a sequence not halted:\n%s", p.body)
	}
}

// A job enqueued with a uniqueness window or debounce says so on its
// page: the window, the debounce key and how late it may be moved.
func TestJobPageShowsWindowAndDebounce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w, err := e.jobs.Enqueue(ctx, job.Request{Kind: "k", Queue: "idle", UniqueKey: "report-42", UniqueFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.jobs.Enqueue(ctx, job.Request{Kind: "k", Queue: "idle", Debounce: &job.Debounce{Key: "doc-7", Window: time.Minute, MaxWait: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token("default", auth.ScopeJobsRead))
	if p := b.get("/ui/jobs/" + strconv.FormatInt(w.Job.ID, 10)); !strings.Contains(p.body, "<code>report-42</code> <small>held over a window") {
		t.Fatalf("windowed job's page:\n%s", p.body)
	}
	if p := b.get("/ui/jobs/" + strconv.FormatInt(d.Job.ID, 10)); !strings.Contains(p.body, "<code>doc-7</code>") || !strings.Contains(p.body, "moves this job, to no later than") {
		t.Fatalf("debounced job's page:\n%s", p.body)
	}
	got, _ := e.jobs.Get(ctx, "", d.Job.ID)
	if got.DebounceKey != "doc-7" || got.DebounceUntil == nil || !got.UniqueWindow == (got.UniqueKey != "") {
		t.Fatalf("debounced job %+v", got)
	}
}
