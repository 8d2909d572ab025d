package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// The Batches pages: the list (linked in the nav), a batch's page with
// its progress and jobs, close and cancel; another tenant's batch is not
// found and its close refused.
func TestBatchPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	ours, err := e.jobs.OpenBatch(ctx, job.BatchRequest{Tenant: "acme", Kind: "import.done"})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := e.jobs.EnqueueMany(ctx, []job.Request{{Tenant: "acme", Kind: "import.row", Batch: ours.ID}, {Tenant: "acme", Kind: "import.row", Batch: ours.ID}})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := e.jobs.OpenBatch(ctx, job.BatchRequest{Tenant: "globex", Kind: "globex.secret"})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token("acme", auth.ScopeJobsRead, auth.ScopeJobsWrite))
	csrf := b.csrf()

	p := b.get("/ui/batches")
	if p.status != http.StatusOK || !strings.Contains(p.body, fmt.Sprintf(`href="/ui/batches/%d"`, ours.ID)) || strings.Contains(p.body, "globex.secret") ||
		!strings.Contains(p.body, `aria-current="page">Batches</a>`) {
		t.Fatalf("batches list: %d\n%s", p.status, p.body)
	}
	if p := b.get("/ui/batches?state=open"); p.status != http.StatusOK || !strings.Contains(p.body, "import.done") {
		t.Fatalf("batches list, open: %d", p.status)
	}
	p = b.get(fmt.Sprintf("/ui/batches/%d", ours.ID))
	if p.status != http.StatusOK || !strings.Contains(p.body, "0 of 2 jobs final") || !strings.Contains(p.body, fmt.Sprintf(`href="/ui/jobs/%d"`, ids[0])) ||
		!strings.Contains(p.body, "Close batch") {
		t.Fatalf("batch page: %d\n%s", p.status, p.body)
	}
	if p := b.get(fmt.Sprintf("/ui/batches/%d", theirs.ID)); p.status != http.StatusNotFound || strings.Contains(p.body, "globex.secret") {
		t.Fatalf("another tenant's batch: %d", p.status)
	}
	p = b.post(fmt.Sprintf("/ui/batches/%d/close", theirs.ID), url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(flash(t, p), "Refused:") {
		t.Fatalf("closing another tenant's batch: %d %q", p.status, flash(t, p))
	}
	if got, _ := e.jobs.GetBatch(ctx, "", theirs.ID); got.State != job.BatchOpen {
		t.Fatalf("another tenant's batch is %s", got.State)
	}
	p = b.post(fmt.Sprintf("/ui/batches/%d/close", ours.ID), url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "closed") {
		t.Fatalf("close: %d %q", p.status, flash(t, p))
	}
	p = b.post(fmt.Sprintf("/ui/batches/%d/cancel", ours.ID), url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "cancelled") {
		t.Fatalf("cancel: %d %q", p.status, flash(t, p))
	}
	got, err := e.jobs.GetBatch(ctx, "acme", ours.ID)
	if err != nil || got.State != job.BatchFinished || got.CallbackJobID == 0 {
		t.Fatalf("after cancel: %+v, %v", got, err)
	}
	p = b.get(fmt.Sprintf("/ui/batches/%d", ours.ID))
	if p.status != http.StatusOK || !strings.Contains(p.body, "2 of 2 jobs final") || !strings.Contains(p.body, fmt.Sprintf(`href="/ui/jobs/%d"`, got.CallbackJobID)) {
		t.Fatalf("finished batch page: %d\n%s", p.status, p.body)
	}
	if p := b.get("/ui/batches/abc"); p.status != http.StatusBadRequest {
		t.Fatalf("bad id: %d", p.status)
	}
}
