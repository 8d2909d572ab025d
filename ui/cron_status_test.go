package ui_test

import (
	"context"
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
)

// The cron pages show each entry's status: a done one-shot (no next
// times), a failing entry's error, failures in a row and retry time, the
// last job and its state, and a link to all the entry's jobs, which the
// jobs page filters.
func TestCronPagesShowStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := cron.NewClient(e.st.Pool())
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	for _, en := range []cron.Entry{
		{Name: "once", Schedule: "@at " + at, Job: cron.JobTemplate{Kind: "k"}},
		{Name: "broken", Schedule: "@every 1h", Job: cron.JobTemplate{Kind: "k"}},
		{Name: "held", Schedule: "0 3 * * *", Timezone: "UTC", Paused: true, Job: cron.JobTemplate{Kind: "k"}},
	} {
		if _, err := c.Create(ctx, en); err != nil {
			t.Fatal(err)
		}
	}
	due := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	e.st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET schedule = $1, next_run_at = $2 WHERE name = 'once'`, "@at "+due.Format(time.RFC3339), due)
	e.st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET next_run_at = now() - interval '1 second', job = jsonb_set(job::jsonb, '{queue}', '"No Queue!"')::json WHERE name = 'broken'`)
	s, _ := cron.NewScheduler(cron.SchedulerConfig{Pool: e.st.Pool(), Fence: job.Unfenced{Pool: e.st.Pool()}})
	if _, err := s.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	once, _ := c.Get(ctx, "", "once")
	b := e.browser()
	b.login(e.token("default", auth.ScopeJobsRead))
	list := b.get("/ui/cron")
	if list.status != 200 || !strings.Contains(list.body, ">done<") || !strings.Contains(list.body, "failing ×1") || !strings.Contains(list.body, "st-pending") {
		t.Fatalf("cron list: %d\n%s", list.status, list.body)
	}
	// A paused entry's row shows no fire times (it fires none until
	// resumed); its page says what they would be if resumed.
	if row := regexp.MustCompile(`(?s)<tr><td><a href="/ui/cron/default/held">.*?</tr>`).FindString(list.body); row == "" || strings.Contains(row, " 03:00:00 ") {
		t.Fatalf("a paused entry's row shows fire times:\n%s", row)
	}
	if p := b.get("/ui/cron/default/held"); p.status != 200 || !strings.Contains(p.body, "Paused: it fires nothing until resumed") || !strings.Contains(p.body, " 03:00:00 UTC") {
		t.Fatalf("a paused entry's page: %d\n%s", p.status, p.body)
	}
	p := b.get("/ui/cron/default/once")
	if p.status != 200 || !strings.Contains(p.body, ">done<") || !strings.Contains(p.body, "since") || strings.Contains(p.body, "<li>") ||
		!strings.Contains(p.body, `href="/ui/jobs/`) || !strings.Contains(p.body, "all its jobs") {
		t.Fatalf("done one-shot's page: %d\n%s", p.status, p.body)
	}
	// An entry whose job failed says why, on its page.
	e.st.Pool().Exec(ctx, `UPDATE gaffer.cron_entries SET last_failed_job_id = 42, last_failed_error = 'smtp: 550 <mailbox>', last_failed_at = now() WHERE name = 'broken'`)
	p = b.get("/ui/cron/default/broken")
	if !strings.Contains(p.body, `Last failed job</dt><dd class="errtext"><a href="/ui/jobs/42">42</a> failed`) || !strings.Contains(p.body, "smtp: 550 &lt;mailbox&gt;") {
		t.Fatalf("a page of an entry whose job failed:\n%s", p.body)
	}
	if p.status != 200 || !strings.Contains(html.UnescapeString(p.body), "job.queue") || !strings.Contains(p.body, "1 failed firing in a row") || !strings.Contains(p.body, "next try") {
		t.Fatalf("failing entry's page: %d\n%s", p.status, p.body)
	}
	jobs := b.get("/ui/jobs?cron_entry=once")
	if jobs.status != 200 || strings.Count(jobs.body, `<a href="/ui/jobs/`) != 1 || !strings.Contains(jobs.body, `/ui/jobs/`+itoa(once.LastJobID)) {
		t.Fatalf("jobs of one entry: %d\n%s", jobs.status, jobs.body)
	}
	if none := b.get("/ui/jobs?cron_entry=broken"); strings.Contains(none.body, `<a href="/ui/jobs/`) {
		t.Fatal("the broken entry lists jobs")
	}
	if bad := b.get("/ui/jobs?workflow_run=x"); bad.status != 400 {
		t.Fatalf("a bad workflow_run: %d", bad.status)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// The queues page counts each queue's live workers and flags a queue
// whose jobs wait with none to work them.
func TestQueuesPageFlagsAQueueNobodyWorks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := job.NewClient(e.st.Pool(), nil)
	for _, q := range []string{"orphan", "worked"} {
		if _, err := c.Enqueue(ctx, job.Request{Kind: "k", Queue: q}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.RegisterNode(ctx, "node-1", "host", "dev", "2025c", map[string]int{"worked": 3}, nil); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token("default", auth.ScopeJobsRead))
	p := b.get("/ui/queues")
	row := func(q string) string {
		return regexp.MustCompile(`(?s)<tr><td><a href="/ui/jobs\?queue=` + q + `">.*?</tr>`).FindString(p.body)
	}
	if r := row("orphan"); !strings.Contains(r, "⚠ no live node or remote worker works this queue") {
		t.Fatalf("the orphan queue is not flagged:\n%s", r)
	}
	if r := row("worked"); r == "" || strings.Contains(r, "⚠") || !strings.Contains(r, `<td class="num">1 </td>`) && !strings.Contains(r, `<td class="num">1</td>`) {
		t.Fatalf("the worked queue's row:\n%s", r)
	}
}

// A snoozed job shows the attempts that counted: 1 of 25, not the 2 of 26
// its raw columns hold.
func TestJobPagesShowCountedAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	res, err := job.NewClient(e.st.Pool(), nil).Enqueue(ctx, job.Request{Kind: "k", Queue: "snoozy"})
	if err != nil {
		t.Fatal(err)
	}
	j := res.Job
	e.st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET attempt = 2, max_attempts = 26, uncounted_attempts = 1, state = 'retrying' WHERE id = $1`, j.ID)
	b := e.browser()
	b.login(e.token("default", auth.ScopeJobsRead))
	if p := b.get("/ui/jobs/" + itoa(j.ID)); !strings.Contains(p.body, "<dt>Attempt</dt><dd>1 of 25 <small>(and 1 snoozed or released") {
		t.Fatalf("the job's page:\n%s", p.body)
	}
	if p := b.get("/ui/jobs?queue=snoozy"); !strings.Contains(p.body, `<td class="num">1/25</td>`) {
		t.Fatalf("the jobs list:\n%s", p.body)
	}
}

// The jobs page leaves the workflow timers out of the rows it read, says
// how many, and shows them on asking.
func TestJobsPageLeavesTimersOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := job.NewClient(e.st.Pool(), nil)
	mine, err := c.Enqueue(ctx, job.Request{Kind: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	// A timer as the workflow engine writes it (the API refuses the kind).
	var timer int64
	if err := e.st.Pool().QueryRow(ctx, `INSERT INTO gaffer.jobs (tenant, kind, queue, args, max_attempts) VALUES ('default', 'gaffer.sleep', 'default', '{}', 1) RETURNING id`).Scan(&timer); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token("default", auth.ScopeJobsRead))
	p := b.get("/ui/jobs")
	if !strings.Contains(p.body, `href="/ui/jobs/`+itoa(mine.Job.ID)+`"`) || strings.Contains(p.body, `href="/ui/jobs/`+itoa(timer)+`"`) ||
		!strings.Contains(p.body, "1 workflow timer (gaffer.sleep, gaffer.signal) left out of this page") {
		t.Fatalf("the jobs page with a timer:\n%s", p.body)
	}
	if p := b.get("/ui/jobs?timers=1"); !strings.Contains(p.body, `href="/ui/jobs/`+itoa(timer)+`"`) {
		t.Fatalf("the jobs page showing timers:\n%s", p.body)
	}
	if p := b.get("/ui/jobs?kind=gaffer.sleep"); !strings.Contains(p.body, `href="/ui/jobs/`+itoa(timer)+`"`) {
		t.Fatalf("the jobs of kind gaffer.sleep:\n%s", p.body)
	}
}
