package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardJobsInBrowser drives the jobs list's bulk actions in
// headless Chromium against a real node: it ticks two jobs and cancels
// them, then cancels "all matching this filter" through its count
// preview, searches a job by id, and reads a job's durations and attempt
// timeline; each effect is checked in PostgreSQL. With
// GAFFER_SCREENSHOTS=docs/img it renews the screenshots docs/dashboard.md
// shows.
func TestDashboardJobsInBrowser(t *testing.T) {
	t.Parallel()
	browserPath(t)
	e := newE2E(t)
	e.ok("migrate", "up")
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "ui-admin", "--tenant", "*", "--scopes", "admin"))

	// A receiver that fails each job's first call and answers the next.
	var calls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flaky" && calls.Add(1) == 1 {
			http.Error(w, "invoice service warming up", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)
	allowHook := strings.TrimPrefix(hook.URL, "http://")
	_, base := e.server("jobs-ui-1", "--queues", "default=4", "--webhook-allow", allowHook)
	e.env = append(e.env, "GAFFER_URL="+base, "GAFFER_TOKEN="+admin)

	enqueue := func(args ...string) string {
		var out struct {
			Job struct {
				ID int64 `json:"id"`
			} `json:"job"`
		}
		e.jsonOK(&out, append([]string{"jobs", "enqueue"}, args...)...)
		return fmt.Sprint(out.Job.ID)
	}
	for i := range 5 {
		enqueue("--kind", "http", "--args", fmt.Sprintf(`{"url":%q,"body":"order %d"}`, hook.URL+"/ok", i))
	}
	flaky := enqueue("--kind", "http", "--args", fmt.Sprintf(`{"url":%q}`, hook.URL+"/flaky"))
	// Queue parked has no worker: its jobs wait, pending.
	var parked []string
	for i := range 6 {
		parked = append(parked, enqueue("--kind", "report.build", "--queue", "parked", "--args", fmt.Sprintf(`{"month":"2026-%02d"}`, i+1), "--allow-unknown-kind"))
	}
	e.waitSQL("the flaky job completes on its second attempt", `SELECT state || ' ' || attempt FROM gaffer.jobs WHERE id = $1`, "completed 2", flaky)
	e.waitSQL("the other http jobs complete", `SELECT count(*) FROM gaffer.jobs WHERE kind = 'http' AND state = 'completed'`, "6")

	b := newBrowser(t, base)
	b.login(admin)

	// State tabs count the filter's jobs.
	b.visit("/ui/jobs")
	b.contains(`#job-tabs a[data-state="pending"]`, "6")
	b.contains(`#job-tabs a[data-state="completed"]`, "6")
	b.contains(`#job-tabs a[data-state=""]`, "12")
	b.shot("jobs-list")

	// Tick two parked jobs and cancel them (the confirm is accepted).
	b.visit("/ui/jobs?queue=parked")
	b.contains(`#job-tabs a[data-state="pending"]`, "6")
	for _, id := range parked[:2] {
		b.do("tick job "+id, chromedp.Click(chromedp.CSS(`#jobs input[name=id][value="`+id+`"]`)))
	}
	b.click(`#jobs-form button[value=cancel]`)
	e.waitSQL("two jobs cancelled through the UI", `SELECT count(*) FROM gaffer.jobs WHERE queue = 'parked' AND state = 'cancelled'`, "2")
	b.contains(".flash", "Cancelled 2 jobs")
	if got := e.scalar(`SELECT string_agg(id::text, ',' ORDER BY id) FROM gaffer.jobs WHERE queue = 'parked' AND state = 'cancelled'`); got != parked[0]+","+parked[1] {
		t.Fatalf("cancelled %s, want the two ticked: %s,%s", got, parked[0], parked[1])
	}

	// Select-all ticks every row of the page.
	b.visit("/ui/jobs?queue=parked&state=pending")
	b.do("select all", chromedp.Click(chromedp.CSS(`#select-all`)))
	if n := b.count(`#jobs input[name=id]:checked`); n != 4 {
		t.Fatalf("select-all ticked %d rows, want 4", n)
	}
	b.do("untick all", chromedp.Click(chromedp.CSS(`#select-all`)))

	// All matching this filter: the preview counts, the confirmation acts.
	b.contains(".all-matching", "All 4 matching this filter")
	b.click(`#all-cancel`)
	b.contains("#bulk-count", "4 jobs")
	b.contains("main", `the jobs with state "pending", queue "parked"`)
	b.shot("jobs-bulk-preview")
	if got := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE queue = 'parked' AND state = 'pending'`); got != "4" {
		t.Fatalf("the count preview changed jobs: %s pending left, want 4", got)
	}
	b.click(`#bulk-confirm`)
	e.waitSQL("all matching cancelled through the UI", `SELECT count(*) FROM gaffer.jobs WHERE queue = 'parked' AND state = 'cancelled'`, "6")
	b.contains(".flash", "Cancelled 4 jobs")
	if got := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE queue <> 'parked' AND state = 'cancelled'`); got != "0" {
		t.Fatalf("cancel all matching reached %s jobs outside the filter", got)
	}

	// The search box: a job id goes to the job.
	b.visit("/ui/jobs")
	b.do("search a job id", chromedp.SetValue(chromedp.CSS(`input[name=q]`), flaky))
	b.click(`form.filters button[type=submit]`)
	b.contains("h1", "Job "+flaky)

	// The job page: durations and the attempt timeline.
	b.contains("#dur-wait", "queue wait")
	b.contains("#dur-run", "last attempt ran")
	b.contains("#timeline", "attempt 1 ended")
	b.contains("#timeline", "attempt 2 started")
	b.contains("#timeline", "completed")
	if n := b.count("svg.timeline circle"); n < 4 {
		t.Fatalf("the timeline marks %d events, want at least 4", n)
	}
	b.shot("job-timeline")
}
