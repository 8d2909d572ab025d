package ui_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/ui"
	"github.com/gafferhq/gaffer/workflow"
)

// These tests drive the dashboard's handler over HTTP against a real
// database: sign-in, the CSRF and origin checks, scopes, tenancy and bad
// input. The browser test in cmd/gaffer covers the pages in Chromium.

type env struct {
	t      *testing.T
	h      *ui.Handler
	st     *store.Store
	srv    *httptest.Server
	tokens *auth.Tokens
	jobs   *job.Client
}

func newEnv(t *testing.T, mut ...func(*ui.Config)) *env {
	t.Helper()
	return startEnv(t, httptest.NewServer, mut...)
}

// newTLSEnv serves the dashboard over TLS; the env's browsers trust it.
func newTLSEnv(t *testing.T, mut ...func(*ui.Config)) *env {
	t.Helper()
	return startEnv(t, httptest.NewTLSServer, mut...)
}

func startEnv(t *testing.T, serve func(http.Handler) *httptest.Server, mut ...func(*ui.Config)) *env {
	t.Helper()
	st := pgtest.NewStore(t)
	e := &env{t: t, st: st, tokens: auth.NewTokens(st.Pool()), jobs: job.NewClient(st.Pool(), nil)}
	cfg := ui.Config{Sessions: auth.NewSessions(st.Pool(), 0), Tokens: e.tokens, Jobs: e.jobs, DLQ: dlq.NewClient(st.Pool()), Cron: cron.NewClient(st.Pool()),
		Workflows: workflow.NewClient(st.Pool()), Admin: cluster.NewAdmin(st.Pool())}
	for _, m := range mut {
		m(&cfg)
	}
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = serve(h)
	t.Cleanup(e.srv.Close)
	return e
}

// token makes an API token and returns its text.
func (e *env) token(tenant string, scopes ...string) string {
	e.t.Helper()
	text, _, err := e.tokens.Create(context.Background(), auth.NewTokenRequest{Name: "t-" + strings.Join(scopes, "-"), Tenant: tenant, Scopes: scopes})
	if err != nil {
		e.t.Fatal(err)
	}
	return text
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so tests see each 303.
type browser struct {
	e *env
	c *http.Client
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, c: &http.Client{Jar: jar, Transport: e.srv.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.e.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (b *browser) get(path string) page {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.e.srv.URL+path, nil)
	return b.do(req)
}

// post submits a form the way a browser on the dashboard's own origin does.
func (b *browser) post(path string, form url.Values) page {
	b.e.t.Helper()
	return b.postFrom(b.e.srv.URL, path, form)
}

func (b *browser) postFrom(origin, path string, form url.Values, header ...string) page {
	b.e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return b.do(req)
}

func (b *browser) login(token string) {
	b.e.t.Helper()
	p := b.post("/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" {
		b.e.t.Fatalf("sign-in: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a dashboard page's forms.
func (b *browser) csrf() string {
	b.e.t.Helper()
	p := b.get("/ui/queues")
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		b.e.t.Fatalf("no csrf field on /ui/queues (%d):\n%s", p.status, p.body)
	}
	return html.UnescapeString(m[1])
}

// flash is the message an action left for the next page.
func flash(t *testing.T, p page) string {
	t.Helper()
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "gaffer_flash" {
			b, err := base64.RawURLEncoding.DecodeString(c.Value)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	return ""
}

func (e *env) paused(queue string) bool {
	e.t.Helper()
	var paused bool
	err := e.st.Pool().QueryRow(context.Background(), `SELECT coalesce((SELECT paused FROM gaffer.queues WHERE name = $1), false)`, queue).Scan(&paused)
	if err != nil {
		e.t.Fatal(err)
	}
	return paused
}

func (e *env) state(id int64) string {
	e.t.Helper()
	var s string
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT state FROM gaffer.jobs WHERE id = $1`, id).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func TestSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()

	// Every page sends a visitor without a session to the sign-in form,
	// remembering where they were going.
	p := b.get("/ui/jobs?state=pending")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/jobs?state=pending") {
		t.Fatalf("no session: %d %q", p.status, p.header.Get("Location"))
	}
	// So does an action, which does nothing.
	if p := b.post("/ui/queues/default/pause", url.Values{}); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/login") {
		t.Fatalf("action without session: %d %q", p.status, p.header.Get("Location"))
	}
	if e.paused("default") {
		t.Fatal("an action without a session paused the queue")
	}

	for _, c := range []struct{ token, want string }{
		{"", "Enter an API token"},
		{"gft_nonsense", "not valid"},
		{e.token("acme", auth.ScopeJobsWrite), "lacks the jobs:read scope"},
	} {
		p := b.post("/ui/login", url.Values{"token": {c.token}})
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, c.want) {
			t.Fatalf("sign-in with %q: %d, want 401 saying %q:\n%s", c.token, p.status, c.want, p.body)
		}
		if len((&http.Response{Header: p.header}).Cookies()) != 0 {
			t.Fatalf("a refused sign-in set a cookie: %v", p.header["Set-Cookie"])
		}
	}

	// next must stay on the dashboard: no open redirect.
	reader := e.token("acme", auth.ScopeJobsRead)
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/ui/\\evil", "/elsewhere"} {
		p := e.browser().post("/ui/login", url.Values{"token": {reader}, "next": {next}})
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" {
			t.Fatalf("next=%q redirected to %q", next, p.header.Get("Location"))
		}
	}
	p = b.post("/ui/login", url.Values{"token": {reader}, "next": {"/ui/jobs?state=pending"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/jobs?state=pending" {
		t.Fatalf("sign-in: %d %q", p.status, p.header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "gaffer_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/", session)
	}
	p = b.get("/ui/jobs?state=pending")
	if p.status != http.StatusOK {
		t.Fatalf("jobs page after sign-in: %d", p.status)
	}
	for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
		if got := p.header.Get(h); got != want {
			t.Fatalf("%s = %q, want %q", h, got, want)
		}
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}

	// Signing out needs the CSRF token too; then the session is gone.
	if p := b.post("/ui/logout", url.Values{}); p.status != http.StatusForbidden {
		t.Fatalf("sign-out without csrf: %d", p.status)
	}
	if p := b.post("/ui/logout", url.Values{"csrf": {b.csrf()}}); p.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", p.status)
	}
	if p := b.get("/ui/"); p.status != http.StatusSeeOther {
		t.Fatalf("overview after sign-out: %d", p.status)
	}

	// A revoked token's session ends.
	admin := e.token(auth.AllTenants, auth.ScopeAdmin)
	b.login(admin)
	recs, err := e.tokens.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Tenant == auth.AllTenants {
			if err := e.tokens.Revoke(context.Background(), r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p := b.get("/ui/"); p.status != http.StatusSeeOther {
		t.Fatalf("overview with a revoked token: %d", p.status)
	}
}

func TestActionsNeedCSRFSameOriginAndScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.browser()
	admin.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := admin.csrf()

	refused := []struct {
		name   string
		origin string
		form   url.Values
		want   string
	}{
		{"no csrf", e.srv.URL, url.Values{}, "CSRF token is missing"},
		{"wrong csrf", e.srv.URL, url.Values{"csrf": {csrf + "x"}}, "CSRF token is missing"},
		{"other origin", "https://evil.example", url.Values{"csrf": {csrf}}, "another site"},
	}
	for _, c := range refused {
		p := admin.postFrom(c.origin, "/ui/queues/default/pause", c.form)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, c.want) {
			t.Fatalf("%s: %d, want 403 saying %q", c.name, p.status, c.want)
		}
		if e.paused("default") {
			t.Fatalf("%s: the queue was paused", c.name)
		}
	}
	// Another user's CSRF token does not work with this session.
	other := e.browser()
	other.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	if p := admin.post("/ui/queues/default/pause", url.Values{"csrf": {other.csrf()}}); p.status != http.StatusForbidden {
		t.Fatalf("another session's csrf: %d", p.status)
	}

	// A reader may look but not act, and sees no action buttons.
	reader := e.browser()
	reader.login(e.token("default", auth.ScopeJobsRead))
	if p := reader.post("/ui/queues/default/pause", url.Values{"csrf": {reader.csrf()}}); p.status != http.StatusForbidden || !strings.Contains(p.body, "lacks the admin scope") {
		t.Fatalf("reader pausing a queue: %d", p.status)
	}
	if e.paused("default") {
		t.Fatal("a reader paused the queue")
	}
	if err := e.st.RegisterNode(context.Background(), "node-x", "host", "dev", "2025c", map[string]int{"default": 1}, nil); err != nil {
		t.Fatal(err)
	}
	// The nodes are the operator's: a jobs:read token is refused them.
	if p := reader.get("/ui/nodes"); p.status != http.StatusForbidden || strings.Contains(p.body, "node-x") {
		t.Fatalf("reader's nodes page: %d", p.status)
	}
	ops := e.browser()
	ops.login(e.token("default", auth.ScopeJobsRead, auth.ScopeClusterRead))
	if p := ops.get("/ui/nodes"); p.status != http.StatusOK || !strings.Contains(p.body, "node-x") || strings.Contains(p.body, "/drain") {
		t.Fatalf("cluster:read's nodes page: %d, has a drain form: %v", p.status, strings.Contains(p.body, "/drain"))
	}
	if p := reader.post("/ui/nodes/node-x/drain", url.Values{"csrf": {reader.csrf()}, "deadline": {"1m"}}); p.status != http.StatusForbidden {
		t.Fatalf("reader draining a node: %d", p.status)
	}
	// A jobs:write token may cancel jobs but not pause queues or drain nodes.
	writer := e.browser()
	writer.login(e.token("default", auth.ScopeJobsRead, auth.ScopeJobsWrite))
	if p := writer.post("/ui/nodes/node-x/drain", url.Values{"csrf": {writer.csrf()}, "deadline": {"1m"}}); p.status != http.StatusForbidden {
		t.Fatalf("writer draining a node: %d", p.status)
	}
	var drainRequested bool
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT drain_requested_at IS NOT NULL FROM gaffer.nodes WHERE id = 'node-x'`).Scan(&drainRequested); err != nil || drainRequested {
		t.Fatalf("node-x drain requested = %v (%v) after refused drains", drainRequested, err)
	}

	// With everything in order the action happens and says so.
	p := admin.post("/ui/queues/default/pause", url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/queues" || !strings.Contains(flash(t, p), "Queue default paused") {
		t.Fatalf("pause: %d %q flash %q", p.status, p.header.Get("Location"), flash(t, p))
	}
	if !e.paused("default") {
		t.Fatal("queue not paused")
	}
	p = admin.post("/ui/nodes/node-x/drain", url.Values{"csrf": {csrf}, "deadline": {"2m"}})
	if p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "Node node-x is draining") {
		t.Fatalf("drain: %d flash %q", p.status, flash(t, p))
	}
	var deadline float64
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT round(extract(epoch FROM drain_deadline - drain_requested_at)) FROM gaffer.nodes WHERE id = 'node-x'`).Scan(&deadline); err != nil || deadline != 120 {
		t.Fatalf("drain deadline %vs (%v), want 120s", deadline, err)
	}
	// The flash shows once, on the next page.
	if p := admin.get("/ui/nodes"); !strings.Contains(p.body, "Node node-x is draining") {
		t.Fatal("flash message not shown on the next page")
	}
	if p := admin.get("/ui/nodes"); strings.Contains(p.body, "Node node-x is draining") {
		t.Fatal("flash message shown twice")
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	theirs, err := e.jobs.Enqueue(ctx, job.Request{Tenant: "globex", Kind: "report", Args: map[string]string{"secret": "globex-payroll"}})
	if err != nil {
		t.Fatal(err)
	}
	ours, err := e.jobs.Enqueue(ctx, job.Request{Tenant: "acme", Kind: "report"})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token("acme", auth.ScopeJobsRead, auth.ScopeJobsWrite))
	csrf := b.csrf()

	if p := b.get(fmt.Sprintf("/ui/jobs/%d", theirs.Job.ID)); p.status != http.StatusNotFound || strings.Contains(p.body, "globex-payroll") {
		t.Fatalf("another tenant's job: %d", p.status)
	}
	if p := b.get(fmt.Sprintf("/ui/jobs/%d", ours.Job.ID)); p.status != http.StatusOK {
		t.Fatalf("own job: %d", p.status)
	}
	// Listing ignores a tenant filter from a token bound to one tenant.
	if p := b.get("/ui/jobs?tenant=globex"); p.status != http.StatusOK || strings.Contains(p.body, fmt.Sprintf("/ui/jobs/%d\"", theirs.Job.ID)) {
		t.Fatalf("job list shows another tenant's job (status %d)", p.status)
	}
	p := b.post(fmt.Sprintf("/ui/jobs/%d/cancel", theirs.Job.ID), url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.HasPrefix(flash(t, p), "Refused:") {
		t.Fatalf("cancelling another tenant's job: %d flash %q", p.status, flash(t, p))
	}
	if s := e.state(theirs.Job.ID); s != "pending" {
		t.Fatalf("another tenant's job is %s after a refused cancel", s)
	}
	p = b.post(fmt.Sprintf("/ui/jobs/%d/cancel", ours.Job.ID), url.Values{"csrf": {csrf}})
	if p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "cancelled") {
		t.Fatalf("cancel own job: %d flash %q", p.status, flash(t, p))
	}
	if s := e.state(ours.Job.ID); s != "cancelled" {
		t.Fatalf("own job is %s after cancel", s)
	}

	// Metadata too: another tenant's queue names and counts, the nodes
	// and the leader appear nowhere (G9).
	if _, err := e.jobs.Enqueue(ctx, job.Request{Tenant: "globex", Kind: "report", Queue: "globex-payroll-q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.jobs.Enqueue(ctx, job.Request{Tenant: "acme", Kind: "report", Queue: "acme-q"}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RegisterNode(ctx, "node-secret", "host", "dev", "2025c", map[string]int{"ops-q": 1}, nil); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"/ui/", "/ui/queues", "/ui/queues?tenant=globex"} {
		p := b.get(page)
		if p.status != http.StatusOK || !strings.Contains(p.body, "acme-q") {
			t.Fatalf("%s: %d, or own queue missing", page, p.status)
		}
		for _, leak := range []string{"globex-payroll-q", "ops-q", "node-secret", "/ui/nodes"} {
			if strings.Contains(p.body, leak) {
				t.Errorf("%s shows %q to a tenant's token", page, leak)
			}
		}
	}
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := b.csrf()
	if err := e.st.RegisterNode(context.Background(), "node-x", "host", "dev", "2025c", map[string]int{"default": 1}, nil); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ path, want string }{
		{"/ui/jobs?state=bogus", "state"},
		{"/ui/jobs?queue=" + url.QueryEscape("no spaces"), "queue"},
		{"/ui/jobs/abc", "id"},
		{"/ui/jobs?before=-4", "before"},
		{"/ui/dlq/0", "id"},
	} {
		p := b.get(c.path)
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, c.want) {
			t.Fatalf("GET %s: %d, want 400 naming %q:\n%s", c.path, p.status, c.want, p.body)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"/ui/jobs/424242", "not found"},
		{"/ui/workflows/424242", "not found"},
		{"/ui/cron/default/nope", "not found"},
		{"/ui/no-such-page", "No such page"},
	} {
		if p := b.get(c.path); p.status != http.StatusNotFound || !strings.Contains(strings.ToLower(p.body), strings.ToLower(c.want)) {
			t.Fatalf("GET %s: %d, want 404 saying %q", c.path, p.status, c.want)
		}
	}

	for _, c := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/ui/queues/" + url.PathEscape("bad queue") + "/pause", nil, "queue"},
		{"/ui/nodes/node-x/drain", url.Values{"deadline": {"forever"}}, "between 0s and 24h"},
		{"/ui/nodes/node-x/drain", url.Values{"deadline": {"48h"}}, "between 0s and 24h"},
		{"/ui/nodes/node-x/drain", url.Values{"deadline": {"-1s"}}, "between 0s and 24h"},
		{"/ui/nodes/ghost/drain", url.Values{"deadline": {"1m"}}, "ghost"},
		{"/ui/nodes/ghost/undrain", nil, "ghost"},
		{"/ui/jobs/424242/cancel", nil, "not found"},
		{"/ui/dlq/purge", nil, "confirm"},
		{"/ui/dlq/replay", url.Values{"id": {"x"}}, "id"},
		{"/ui/dlq/replay", nil, "tick at least one"},
	} {
		form := url.Values{"csrf": {csrf}, "back": {"/ui/nodes"}}
		for k, v := range c.form {
			form[k] = v
		}
		p := b.post(c.path, form)
		msg := flash(t, p)
		if p.status != http.StatusSeeOther || !strings.HasPrefix(msg, "Refused:") || !strings.Contains(strings.ToLower(msg), strings.ToLower(c.want)) {
			t.Fatalf("POST %s %v: %d flash %q, want a refusal naming %q", c.path, c.form, p.status, msg, c.want)
		}
	}
	var drained int
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gaffer.nodes WHERE drain_requested_at IS NOT NULL`).Scan(&drained); err != nil || drained != 0 {
		t.Fatalf("%d nodes asked to drain after refused drains (%v)", drained, err)
	}
	var queues int
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gaffer.queues WHERE paused`).Scan(&queues); err != nil || queues != 0 {
		t.Fatalf("%d queues paused after a refused pause (%v)", queues, err)
	}
	// A refused action returns to the page it came from, never off-site.
	p := b.post("/ui/jobs/424242/cancel", url.Values{"csrf": {csrf}, "back": {"//evil.example/"}})
	if loc := p.header.Get("Location"); loc != "/ui/jobs/424242" {
		t.Fatalf("refused cancel went to %q", loc)
	}
	p = b.post("/ui/dlq/purge", url.Values{"csrf": {csrf}, "back": {"//evil.example/"}})
	if loc := p.header.Get("Location"); !strings.HasPrefix(loc, "/ui/") {
		t.Fatalf("refused purge went to %q", loc)
	}
}

func TestCronPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := cron.NewClient(e.st.Pool())
	// 104 entries in two tenants: one full page of 100 and 4 on the next,
	// the page boundary falling inside the second tenant.
	for i := range 104 {
		tenant := "acme"
		if i >= 60 {
			tenant = "globex"
		}
		if _, err := c.Create(ctx, cron.Entry{Tenant: tenant, Name: fmt.Sprintf("e%03d", i), Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	p := b.get("/ui/cron")
	next := regexp.MustCompile(`href="(/ui/cron\?[^"]*after=[^"]*)"`).FindStringSubmatch(p.body)
	if p.status != http.StatusOK || next == nil || !strings.Contains(p.body, "e099") || strings.Contains(p.body, "e100") {
		t.Fatalf("first cron page: %d, next link %v", p.status, next)
	}
	p = b.get(html.UnescapeString(next[1]))
	if p.status != http.StatusOK || strings.Contains(p.body, "e099") || !strings.Contains(p.body, "e100") || !strings.Contains(p.body, "e103") ||
		strings.Contains(p.body, "next →") {
		t.Fatalf("second cron page (%s): %d", next[1], p.status)
	}
	if p := b.get("/ui/cron?after=e010"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "go together") {
		t.Fatalf("half a cursor: %d", p.status)
	}
	// A token bound to one tenant sees only its entries.
	acme := e.browser()
	acme.login(e.token("acme", auth.ScopeJobsRead))
	if p := acme.get("/ui/cron"); !strings.Contains(p.body, "e059") || strings.Contains(p.body, "e060") || strings.Contains(p.body, "next →") {
		t.Fatalf("acme's cron page shows another tenant's entries or a next page (%d)", p.status)
	}
}

// The queues page lists the limits, with their usage, to tokens that may
// see the cluster's configuration; a tenant's token sees none.
func TestQueuesPageShowsLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.jobs.SetLimit(ctx, job.Limit{Name: "mail-slow", Queue: "mail", Key: "tenant", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	ops := e.browser()
	ops.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	p := ops.get("/ui/queues")
	for _, want := range []string{"mail-slow", "queue mail", "http-per-host", "host(args.url)"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("queues page lacks %q", want)
		}
	}
	tenant := e.browser()
	tenant.login(e.token("acme", auth.ScopeJobsRead))
	if p := tenant.get("/ui/queues"); p.status != 200 || strings.Contains(p.body, "mail-slow") || strings.Contains(p.body, "http-per-host") {
		t.Fatalf("a tenant's queues page (%d) shows the limits", p.status)
	}
}

// The overview's "This node" card shows what the node sees degraded
// beyond its cluster membership (a long transaction holding back
// vacuum), naming the holder only to an operator's token.
func TestOverviewShowsNodeHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ui.Config) {
		c.Health = func(identify bool) []string {
			if identify {
				return []string{"a session (pid 7) name \"nightly\" has kept vacuum from removing dead rows"}
			}
			return []string{"a long transaction on the database has kept vacuum from removing dead rows"}
		}
	})
	op := e.browser()
	op.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	if p := op.get("/ui/"); p.status != http.StatusOK || !strings.Contains(p.body, "a session (pid 7) name &#34;nightly&#34; has kept vacuum") {
		t.Fatalf("the operator's overview (%d) does not name the holder:\n%s", p.status, p.body)
	}
	tenant := e.browser()
	tenant.login(e.token("default", auth.ScopeJobsRead, auth.ScopeClusterRead))
	p := tenant.get("/ui/")
	if !strings.Contains(p.body, "a long transaction on the database has kept vacuum") || strings.Contains(p.body, "pid 7") {
		t.Fatalf("a tenant's overview (%d) should tell of the hold without its holder:\n%s", p.status, p.body)
	}
}
