package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardFormsInBrowser drives the dashboard's forms in headless
// Chromium against a real node: it edits a cron entry (a bad schedule is
// refused in the form, the typing kept; a good one is saved), creates a
// limit, sends a signal from a workflow run's page, and picks a range on
// a queue's history — each effect checked in PostgreSQL. Its screenshots
// are the ones in docs/dashboard.md.
func TestDashboardFormsInBrowser(t *testing.T) {
	t.Parallel()
	browserPath(t)
	e := newE2E(t)
	e.ok("migrate", "up")
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "ui-forms", "--tenant", "*", "--scopes", "admin"))
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "no such invoice", http.StatusNotFound)
			return
		}
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)
	_, base := e.server("forms-1", "--queues", "default=4,billing=2", "--webhook-allow", strings.TrimPrefix(hook.URL, "http://"))
	e.env = append(e.env, "GAFFER_URL="+base, "GAFFER_TOKEN="+admin)
	e.waitSQL("a leader", `SELECT leader FROM gaffer.leader_fence`, "forms-1")

	// A cron entry, a run waiting for a signal, and jobs finished (and
	// failed) in queue billing for its history.
	e.ok("cron", "add", "invoices", "--schedule", "0 6 * * *", "--kind", "noop", "--queue", "billing", "--timezone", "Europe/Paris")
	def := filepath.Join(t.TempDir(), "wf.json")
	os.WriteFile(def, []byte(`{"name":"refund","steps":[
		{"name":"check","kind":"noop"},
		{"name":"approve","signal":"1h","depends_on":["check"]},
		{"name":"pay","kind":"noop","depends_on":["approve"]}]}`), 0o644)
	var run struct {
		ID int64 `json:"id"`
	}
	e.jsonOK(&run, "workflows", "submit", "--file", def)
	for i := range 12 {
		e.ok("jobs", "enqueue", "--kind", "http", "--queue", "billing", "--args", fmt.Sprintf(`{"url":%q,"body":"invoice %d"}`, hook.URL+"/ok", i))
	}
	for range 3 {
		e.ok("jobs", "enqueue", "--kind", "http", "--queue", "billing", "--args", fmt.Sprintf(`{"url":%q}`, hook.URL+"/fail"))
	}
	e.waitSQL("the run waits for its signal", `SELECT state FROM gaffer.workflow_steps WHERE run_id = $1 AND name = 'approve'`, "active", run.ID)
	e.waitSQL("billing's history sampled", `SELECT coalesce(sum(completed), 0) >= 12 AND coalesce(sum(failed), 0) >= 3 FROM gaffer.queue_throughput WHERE queue = 'billing' AND tenant = '*'`, "true")

	b := newBrowser(t, base)
	b.login(admin)

	// Edit the cron entry: Edit sits above its history.
	b.visit("/ui/cron/default/invoices")
	b.click(`#cron-actions a[href="/ui/cron/default/invoices/edit"]`)
	b.do("type a bad schedule", chromedp.SetValue(chromedp.CSS(`#cron-form input[name=schedule]`), "0 25 * * *"),
		chromedp.SetValue(chromedp.CSS(`#cron-form input[name=timezone]`), "America/New_York"),
		chromedp.SetValue(chromedp.CSS(`#cron-form textarea[name="job.args"]`), "{\n  \"batch\": \"eu\"\n}"))
	b.click(`#cron-form button[type=submit]`)
	b.contains(`#cron-form .fielderr`, "schedule")
	kept, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS(`#cron-form input[name=timezone]`)))
	if err != nil || kept != "America/New_York" {
		t.Fatalf("the refused form kept the zone as %q (%v)", kept, err)
	}
	if got := e.scalar(`SELECT schedule FROM gaffer.cron_entries WHERE name = 'invoices'`); got != "0 6 * * *" {
		t.Fatalf("a refused edit changed the schedule to %q", got)
	}
	b.shot("cron-form")
	b.do("fix the schedule", chromedp.SetValue(chromedp.CSS(`#cron-form input[name=schedule]`), "30 7 * * 1-5"))
	b.click(`#cron-form button[type=submit]`)
	b.contains(".flash", "Cron entry invoices saved")
	e.waitSQL("edited through the form", `SELECT schedule || ' ' || timezone || ' ' || (job->>'args') FROM gaffer.cron_entries WHERE name = 'invoices'`,
		`30 7 * * 1-5 America/New_York {"batch":"eu"}`)

	// Create a limit from the queues page.
	b.visit("/ui/queues")
	b.click(`#new-limit`)
	b.do("fill the limit", chromedp.SetValue(chromedp.CSS(`#limit-form input[name=name]`), "billing-per-tenant"),
		chromedp.SetValue(chromedp.CSS(`#limit-form input[name=queue]`), "billing"),
		chromedp.SetValue(chromedp.CSS(`#limit-form input[name=key]`), "tenant"),
		chromedp.SetValue(chromedp.CSS(`#limit-form input[name=concurrency]`), "2"),
		chromedp.SetValue(chromedp.CSS(`#limit-form input[name=rate]`), "30"),
		chromedp.SetValue(chromedp.CSS(`#limit-form input[name=period]`), "1m"))
	b.shot("limit-form")
	b.click(`#limit-form button[type=submit]`)
	b.contains(".flash", "Limit billing-per-tenant created")
	e.waitSQL("created through the form", `SELECT queue || ' ' || key_from || ' ' || concurrency || ' ' || rate || ' ' || period_ms FROM gaffer.limits WHERE name = 'billing-per-tenant'`,
		"billing tenant 2 30 60000")
	b.contains("#queues", "billing-per-tenant")

	// Send the signal from the run's page.
	runPath := fmt.Sprintf("/ui/workflows/%d", run.ID)
	b.visit(runPath)
	b.do("fill the signal", chromedp.SetValue(chromedp.CSS(`#signal-form select[name=step]`), "approve"),
		chromedp.SetValue(chromedp.CSS(`#signal-form textarea[name=payload]`), `{"approved": true, "by": "ops"}`))
	b.shot("workflow-signal")
	b.click(`#signal-form button[type=submit]`)
	b.contains(".flash", "Signal approve delivered")
	e.waitSQL("signalled through the form", `SELECT state FROM gaffer.workflow_runs WHERE id = $1`, "completed", run.ID)
	if got := e.scalar(`SELECT result->>'by' FROM gaffer.workflow_steps WHERE run_id = $1 AND name = 'approve'`, run.ID); got != "ops" {
		t.Fatalf("the signal's payload became %q", got)
	}

	// A queue's history, over a range picked.
	b.visit("/ui/queues")
	b.click(`a[href="/ui/queues/billing"]`)
	b.click(`nav.ranges a[href="/ui/queues/billing?range=6h"]`)
	b.contains("#queue-history", "failed")
	if n := b.count("svg.chart polyline.failed"); n != 1 {
		t.Fatalf("the queue's history has %d failure lines, want 1", n)
	}
	if got := b.text("#hist-failed"); got != "3" {
		t.Fatalf("billing's history counts %q failed, want 3", got)
	}
	b.shot("queue-history")
}
