package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browserPath finds a Chromium to drive. Without one the test skips,
// unless GAFFER_REQUIRE_BROWSER is set (as .ci/run does), when it fails.
func browserPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("GAFFER_REQUIRE_BROWSER") != "" {
		t.Fatal("no Chromium on PATH and GAFFER_REQUIRE_BROWSER is set: install Debian's chromium")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium); set GAFFER_REQUIRE_BROWSER=1 to make this a failure")
	return ""
}

// browser drives one headless Chromium tab against the dashboard.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
}

func newBrowser(t *testing.T, base string) *browser {
	chrome := browserPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1440, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	// Every confirm() the dashboard asks is answered yes.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	shots := os.Getenv("GAFFER_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "gaffer-screenshots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	return &browser{t: t, ctx: ctx, base: base, shots: shots}
}

// fail reports a browser step that went wrong, with where the tab was.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	b.t.Fatalf("%s (at %s): %v", what, loc, err)
}

// do runs actions with a deadline, failing the test on error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

// visit loads a dashboard path and waits for its main element.
func (b *browser) visit(path string) {
	b.t.Helper()
	b.do("visit "+path, chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("main")))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.fail("read "+sel, err)
	}
	return s
}

// contains waits until the element sel holds want (live regions refresh).
func (b *browser) contains(sel, want string) {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := b.text(sel)
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s does not contain %q:\n%s", sel, want, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	if err != nil {
		b.fail("count "+sel, err)
	}
	return n
}

// click clicks sel and waits for the page it leads to.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible), chromedp.Sleep(300*time.Millisecond),
		chromedp.WaitReady(chromedp.CSS("main")))
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fail("screenshot "+name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) login(token string) {
	b.t.Helper()
	b.visit("/ui/login")
	b.do("sign in", chromedp.SetValue(chromedp.CSS(`input[name=token]`), token),
		chromedp.Click(chromedp.CSS(`form[action="/ui/login"] button`)), chromedp.Sleep(300*time.Millisecond),
		chromedp.WaitReady(chromedp.CSS("main")))
}

// TestDashboardInBrowser loads every dashboard page in headless Chromium
// against two real nodes, performs cancel, pause, replay, retry, trigger
// and drain through the pages, and checks each effect in PostgreSQL.
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	browserPath(t)
	e := newE2E(t)
	e.ok("migrate", "up")
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "ui-admin", "--tenant", "*", "--scopes", "admin"))
	reader := strings.TrimSpace(e.ok("tokens", "create", "--name", "ui-reader", "--scopes", "jobs:read"))

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/fail":
			http.Error(w, "no such invoice", http.StatusNotFound)
		default:
			fmt.Fprintln(w, `{"ok":true}`)
		}
	}))
	t.Cleanup(hook.Close)

	// The receiver is on loopback, refused unless allowed.
	allowHook := strings.TrimPrefix(hook.URL, "http://")
	_, base := e.server("ui-1", "--queues", "default=4", "--webhook-allow", allowHook)
	e.server("ui-2", "--queues", "default=4", "--webhook-allow", allowHook)
	e.env = append(e.env, "GAFFER_URL="+base, "GAFFER_TOKEN="+admin)
	e.waitSQL("a leader", `SELECT leader FROM gaffer.leader_fence`, "ui-1")

	// Something to look at: jobs done, dead, running and waiting; a cron
	// entry; a workflow run waiting for a signal.
	enqueue := func(args ...string) string {
		var out struct {
			Job struct {
				ID int64 `json:"id"`
			} `json:"job"`
		}
		e.jsonOK(&out, append([]string{"jobs", "enqueue"}, args...)...)
		return fmt.Sprint(out.Job.ID)
	}
	for i := range 8 {
		enqueue("--kind", "http", "--args", fmt.Sprintf(`{"url":%q,"body":"order %d"}`, hook.URL+"/ok", i))
	}
	dead1 := enqueue("--kind", "http", "--args", fmt.Sprintf(`{"url":%q}`, hook.URL+"/fail"))
	dead2 := enqueue("--kind", "http", "--args", fmt.Sprintf(`{"url":%q}`, hook.URL+"/fail"))
	hanging := enqueue("--kind", "http", "--args", fmt.Sprintf(`{"url":%q,"timeout":"10m"}`, hook.URL+"/hang"))
	tagged := enqueue("--kind", "report.build", "--queue", "reports", "--args", `{"month":"2026-10"}`, "--allow-unknown-kind", "--tag", "monthly", "--tag", "team/finance")
	e.waitSQL("dead-lettered", `SELECT count(*) FROM gaffer.dlq`, "2")
	e.waitSQL("the hanging job runs", `SELECT state FROM gaffer.jobs WHERE id = $1`, "running", hanging)
	entry1 := e.scalar(`SELECT id FROM gaffer.dlq WHERE job_id = $1`, dead1)
	e.ok("cron", "add", "tick", "--schedule", "@every 2s", "--kind", "noop", "--timezone", "Europe/Paris")
	def := filepath.Join(t.TempDir(), "wf.json")
	os.WriteFile(def, []byte(`{"name":"nightly-etl","steps":[
		{"name":"extract","kind":"noop"},
		{"name":"clean-a","kind":"noop","depends_on":["extract"]},
		{"name":"clean-b","kind":"noop","depends_on":["extract"]},
		{"name":"approve","signal":"1h","depends_on":["clean-a","clean-b"]},
		{"name":"load","kind":"noop","depends_on":["approve"]}]}`), 0o644)
	var run struct {
		ID int64 `json:"id"`
	}
	e.jsonOK(&run, "workflows", "submit", "--file", def)
	e.waitSQL("the run waits for its signal", `SELECT count(*) FROM gaffer.workflow_steps WHERE run_id = $1 AND state = 'completed'`, "3", run.ID)

	// A batch of two jobs, closed: its callback (noop) runs once they are.
	var batch struct {
		ID int64 `json:"id"`
	}
	e.jsonOK(&batch, "batches", "open", "--callback", "noop")
	enqueue("--kind", "noop", "--batch", fmt.Sprint(batch.ID))
	enqueue("--kind", "noop", "--batch", fmt.Sprint(batch.ID))
	e.ok("batches", "close", fmt.Sprint(batch.ID))

	b := newBrowser(t, base)

	// Signing in.
	b.visit("/ui/")
	b.contains("main", "Sign in with an API token")
	b.login("not-a-real-token-at-all")
	b.contains(".error", "not valid")
	b.login(admin)
	b.contains("#overview", "ui-1")
	b.contains("#overview", "leader")

	// Every page renders what it is for.
	pages := []struct{ name, path, sel, want string }{
		{"jobs", "/ui/jobs", "#jobs", "http"},
		{"jobs-failed", "/ui/jobs?state=failed", "#jobs", dead1},
		{"job", "/ui/jobs/" + dead1, "main", "HTTP 404"},
		{"queues", "/ui/queues", "#queues", "reports"},
		{"nodes", "/ui/nodes", "#nodes", "ui-2"},
		{"cron", "/ui/cron", "#cron", "CET"},
		{"cron-entry", "/ui/cron/default/tick", "main", "Europe/Paris"},
		{"dlq", "/ui/dlq", "main", "HTTP 404"},
		{"dlq-entry", "/ui/dlq/" + entry1, "main", "permanent"},
		{"workflows", "/ui/workflows", "#workflows", "nightly-etl"},
		{"workflow", fmt.Sprintf("/ui/workflows/%d", run.ID), "#workflow", "approve"},
		{"batches", "/ui/batches", "#batches", "noop"},
		{"batch", fmt.Sprintf("/ui/batches/%d", batch.ID), "#batch", "of 2 jobs final"},
	}
	for _, p := range pages {
		b.visit(p.path)
		b.contains(p.sel, p.want)
		b.shot(p.name)
	}
	// Search by tag in the search box: only the tagged job is listed, its
	// tags as chips; a chip searches for its tag.
	for _, search := range []string{"tag:monthly", "tag:team/finance args.month=2026-10"} {
		b.visit("/ui/jobs")
		b.do("search "+search, chromedp.SetValue(chromedp.CSS(`form.filters input[name=q]`), search))
		b.click(`form.filters button[type=submit]`)
		b.do("the search's answer", chromedp.WaitVisible(chromedp.CSS(`#jobs a[href="/ui/jobs/`+tagged+`"]`)))
		if n := b.count("#jobs tbody tr"); n != 1 {
			t.Fatalf("searching %s lists %d jobs, want the tagged one", search, n)
		}
	}
	b.contains("#jobs", "team/finance")
	b.shot("jobs-tag-search")
	b.visit("/ui/jobs")
	b.click(`#jobs a.tag`)
	b.do("the chip's search", chromedp.WaitVisible(chromedp.CSS(`#jobs a[href="/ui/jobs/`+tagged+`"]`)))
	if n := b.count("#jobs tbody tr"); n != 1 {
		t.Fatalf("a tag chip's search lists %d jobs, want the tagged one", n)
	}

	// The DAG draws each step with its state.
	b.visit(fmt.Sprintf("/ui/workflows/%d", run.ID))
	if n := b.count("svg.dag g.step"); n != 5 {
		t.Fatalf("the DAG has %d steps drawn, want 5", n)
	}
	if n := b.count("svg.dag g.step.st-completed"); n != 3 {
		t.Fatalf("the DAG shows %d completed steps, want 3", n)
	}
	if n := b.count("svg.dag path.edge"); n != 5 {
		t.Fatalf("the DAG has %d edges, want 5", n)
	}

	// Cancel the running job.
	b.visit("/ui/jobs/" + hanging)
	b.click(`form[action="/ui/jobs/` + hanging + `/cancel"] button`)
	e.waitSQL("cancelled through the UI", `SELECT state FROM gaffer.jobs WHERE id = $1`, "cancelled", hanging)
	b.contains(".flash", "being cancelled")

	// Pause and resume a queue.
	b.visit("/ui/queues")
	b.click(`form[action="/ui/queues/reports/pause"] button`)
	e.waitSQL("paused through the UI", `SELECT paused FROM gaffer.queues WHERE name = 'reports'`, "true")
	b.contains(".flash", "Queue reports paused")
	b.click(`form[action="/ui/queues/reports/resume"] button`)
	e.waitSQL("resumed through the UI", `SELECT paused FROM gaffer.queues WHERE name = 'reports'`, "false")

	// Replay a DLQ entry by ticking it.
	b.visit("/ui/dlq")
	b.do("tick entry "+entry1, chromedp.Click(chromedp.CSS(`input[name=id][value="`+entry1+`"]`)))
	b.click(`#dlq-form .actions button:not([name])`)
	e.waitSQL("replayed through the UI", `SELECT count(*) FROM gaffer.jobs WHERE replay_of = $1`, "1", entry1)
	e.waitSQL("marked replayed", `SELECT replayed_at IS NOT NULL FROM gaffer.dlq WHERE id = $1`, "true", entry1)
	b.contains(".flash", "Replayed 1 of 1 entries")

	// Retry a failed job from its page: its DLQ entry is replayed once.
	b.visit("/ui/jobs/" + dead2)
	b.click(`form[action="/ui/jobs/` + dead2 + `/retry"] button`)
	e.waitSQL("retried through the UI", `SELECT count(*) FROM gaffer.jobs j JOIN gaffer.dlq d ON j.replay_of = d.id WHERE d.job_id = $1`, "1", dead2)
	b.contains(".flash", "was replayed from the DLQ as job")

	// Trigger the cron entry by hand.
	b.visit("/ui/cron/default/tick")
	b.click(`form[action="/ui/cron/default/tick/trigger"] button`)
	e.waitSQL("triggered through the UI", `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'tick' AND status = 'triggered'`, "1")

	// Live refresh: a job enqueued elsewhere appears without a reload.
	b.visit("/ui/jobs")
	fresh := enqueue("--kind", "report.build", "--queue", "reports", "--allow-unknown-kind")
	b.do("the new job appears live", chromedp.WaitVisible(chromedp.CSS(`#jobs a[href="/ui/jobs/`+fresh+`"]`)))

	// Drain the second node with a deadline.
	b.visit("/ui/nodes")
	b.do("set the drain deadline", chromedp.SetValue(chromedp.CSS(`form[action="/ui/nodes/ui-2/drain"] input[name=deadline]`), "5s"))
	b.click(`form[action="/ui/nodes/ui-2/drain"] button`)
	e.waitSQL("drain asked through the UI", `SELECT drain_requested_at IS NOT NULL AND drain_deadline IS NOT NULL FROM gaffer.nodes WHERE id = 'ui-2'`, "true")
	e.waitSQL("ui-2 stops being active", `SELECT state <> 'active' FROM gaffer.nodes WHERE id = 'ui-2'`, "true")
	b.contains(".flash", "Node ui-2 is draining")
	if e.scalar(`SELECT state FROM gaffer.nodes WHERE id = 'ui-1'`) != "active" {
		t.Fatal("draining ui-2 touched ui-1")
	}

	// The overview, once the leader has throughput samples to plot.
	e.waitSQL("throughput sampled", `SELECT count(*) > 0 FROM gaffer.throughput_samples WHERE completed > 0`, "true")
	b.visit("/ui/")
	if n := b.count("svg.chart polyline.completed"); n != 1 {
		t.Fatalf("the overview has %d throughput lines, want 1", n)
	}
	b.shot("overview")

	// A read-only token sees the pages but no action buttons.
	b.click(`form[action="/ui/logout"] button`)
	b.contains("main", "Sign in")
	b.login(reader)
	b.visit("/ui/queues")
	if n := b.count(`form[action$="/pause"], form[action$="/resume"]`); n != 0 {
		t.Fatalf("a jobs:read token is offered %d pause/resume buttons", n)
	}
	b.visit("/ui/nodes")
	if n := b.count(`form[action$="/drain"]`); n != 0 {
		t.Fatalf("a jobs:read token is offered %d drain buttons", n)
	}
	b.visit("/ui/jobs/" + dead1)
	if n := b.count(`form[action$="/retry"], form[action$="/cancel"]`); n != 0 {
		t.Fatalf("a jobs:read token is offered %d job actions", n)
	}
}
