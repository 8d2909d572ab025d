package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

func (e *env) submitRun(b *workflow.Builder) workflow.Run {
	e.t.Helper()
	def, err := b.Definition()
	if err != nil {
		e.t.Fatal(err)
	}
	run, err := workflow.NewClient(e.st.Pool()).Submit(context.Background(), def)
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

func (e *env) run(id int64) workflow.Run {
	e.t.Helper()
	r, err := workflow.NewClient(e.st.Pool()).Get(context.Background(), "", id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func runStep(r workflow.Run, name string) workflow.StepState {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return workflow.StepState{}
}

// The workflow page sends a signal to a waiting step: bad JSON is refused
// in the form with the payload kept, and nothing is delivered; good JSON
// completes the step with it as its result.
func TestWorkflowPageSendsSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.submitRun(workflow.New("approval").WaitSignal("approve", time.Hour).Job("ship", "k", nil, workflow.After("approve")))
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := b.csrf()
	path := fmt.Sprintf("/ui/workflows/%d", run.ID)
	if p := b.get(path); !strings.Contains(p.body, `id="signal-form"`) || !strings.Contains(p.body, "<option>approve</option>") {
		t.Fatalf("no signal form offering approve:\n%s", p.body)
	}
	p := b.post(path+"/signal", formWith(csrf, "step", "approve", "payload", "{approved: yes}"))
	if p.status != http.StatusBadRequest || !fieldAtFault(p.body, "payload") || !strings.Contains(html.UnescapeString(p.body), "{approved: yes}") {
		t.Fatalf("bad payload: %d\n%s", p.status, p.body)
	}
	if s := runStep(e.run(run.ID), "approve"); s.State != "active" {
		t.Fatalf("a refused signal moved the step to %s", s.State)
	}
	if p := b.post(path+"/signal", formWith(csrf, "step", "ship", "payload", "{}")); p.status != http.StatusBadRequest || !fieldAtFault(p.body, "step") {
		t.Fatalf("signalling a job step: %d", p.status)
	}
	reader := e.browser()
	reader.login(e.token("default", auth.ScopeJobsRead))
	if p := reader.get(path); strings.Contains(p.body, `id="signal-form"`) {
		t.Fatal("a read-only token is offered the signal form")
	}
	if p := reader.post(path+"/signal", formWith(reader.csrf(), "step", "approve")); p.status != http.StatusForbidden {
		t.Fatalf("a read-only token signalling: %d", p.status)
	}
	p = b.post(path+"/signal", formWith(csrf, "step", "approve", "payload", "{\r\n \"approved\": true\r\n}"))
	if p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "delivered") {
		t.Fatalf("signal: %d %q", p.status, flash(t, p))
	}
	if s := runStep(e.run(run.ID), "approve"); s.State != "completed" || string(s.Result) != `{"approved":true}` {
		t.Fatalf("after the signal: %+v", s)
	}
}

// The workflow page retries a failed step: the failed run returns to
// running and the step follows a new job.
func TestWorkflowPageRetriesFailedStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	run := e.submitRun(workflow.New("etl").Job("extract", "k", nil, workflow.Queue("ui-retry")).Job("load", "k", nil, workflow.After("extract")))
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := b.csrf()
	path := fmt.Sprintf("/ui/workflows/%d", run.ID)
	if p := b.get(path); strings.Contains(p.body, "Retry step") {
		t.Fatal("a retry button with no failed step")
	}
	if p := b.post(path+"/steps/extract/retry", formWith(csrf)); !strings.HasPrefix(flash(t, p), "Refused") {
		t.Fatalf("retrying an active step: %q", flash(t, p))
	}
	jobs, err := e.st.ClaimJobs(ctx, store.ClaimParams{Queue: "ui-retry", Limit: 1, Token: 1, LeaseTTL: time.Minute, Node: "test"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	j := jobs[0]
	if _, err := e.st.FailJob(ctx, store.Failure{Lease: store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}, Permanent: true, Message: "boom", Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	if p := b.get(path); !strings.Contains(p.body, path+"/steps/extract/retry") {
		t.Fatal("no retry button on the failed step")
	}
	p := b.post(path+"/steps/extract/retry", formWith(csrf))
	if p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "running again") {
		t.Fatalf("retry: %d %q", p.status, flash(t, p))
	}
	r := e.run(run.ID)
	if r.State != workflow.Running || runStep(r, "extract").State != "active" || runStep(r, "extract").JobID == j.ID {
		t.Fatalf("after the retry: %+v", r)
	}
}

// A refused form is shown at its action's address; a reload there, or
// the page's live refresh, goes back to the page.
func TestFormActionAddressesLeadBackToTheirPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	for path, want := range map[string]string{"/ui/workflows/7/signal": "/ui/workflows/7", "/ui/limits": "/ui/queues", "/ui/workflows/x%0a/signal": "/ui/workflows"} {
		if p := b.get(path); p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Errorf("GET %s: %d to %q, want %s", path, p.status, p.header.Get("Location"), want)
		}
	}
}
