package ui_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/ui"
)

// formWith is a form's fields with the CSRF token.
func formWith(csrf string, kv ...string) url.Values {
	f := url.Values{"csrf": {csrf}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

// The cron entry page puts Pause, Trigger, Edit and Delete above the
// entry's facts and its ever-growing history.
func TestCronEntryActionsComeFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := cron.NewClient(e.st.Pool()).Create(context.Background(), cron.Entry{Name: "nightly", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	p := b.get("/ui/cron/default/nightly")
	actions, facts, history := strings.Index(p.body, `id="cron-actions"`), strings.Index(p.body, `class="facts"`), strings.Index(p.body, "<h2>Occurrences")
	if actions < 0 || facts < 0 || history < 0 || actions > facts || actions > history {
		t.Fatalf("actions at %d, facts at %d, history at %d: the actions must come first", actions, facts, history)
	}
	for _, want := range []string{"/ui/cron/default/nightly/pause", "/ui/cron/default/nightly/trigger", "/ui/cron/default/nightly/edit", "/ui/cron/default/nightly/delete"} {
		if i := strings.Index(p.body, want); i < 0 || i > facts {
			t.Errorf("%s is not above the facts", want)
		}
	}
}

// The cron forms create, edit and delete entries as the API does: its
// validation, shown in the form with what was typed kept; its scope; its
// quota for a tenant's token; its tenancy.
func TestCronForms(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ui.Config) { c.CronQuota = cron.Quota{MinInterval: time.Minute} })
	ctx := context.Background()
	crons := cron.NewClient(e.st.Pool())
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := b.csrf()

	if p := b.get("/ui/cron/new"); p.status != http.StatusOK || !strings.Contains(p.body, `name="schedule"`) || !strings.Contains(p.body, `name="tenant"`) {
		t.Fatalf("new cron form: %d\n%s", p.status, p.body)
	}
	// A bad schedule: 400, the form again with the error at the schedule
	// and every value typed kept; nothing created.
	bad := formWith(csrf, "tenant", "acme", "name", "report", "schedule", "0 25 * * *", "timezone", "Europe/London", "job.kind", "report.build",
		"job.queue", "reports", "job.args", "{\r\n  \"to\": \"ops\"\r\n}", "job.priority", "3", "job.timeout", "5m", "missed", "once", "overlap", "skip")
	p := b.post("/ui/cron", bad)
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, `class="fielderr"`) || !strings.Contains(p.body, "schedule") {
		t.Fatalf("bad schedule: %d\n%s", p.status, p.body)
	}
	body := html.UnescapeString(p.body)
	for _, kept := range []string{`value="0 25 * * *"`, `value="Europe/London"`, `value="report.build"`, `value="reports"`, `"to": "ops"`, `value="5m"`, `value="once" selected`, `value="skip" selected`} {
		if !strings.Contains(body, kept) {
			t.Errorf("the refused form lost %s", kept)
		}
	}
	if _, err := crons.Get(ctx, "acme", "report"); !errors.Is(err, cron.ErrNotFound) {
		t.Fatalf("a refused form created the entry: %v", err)
	}
	// A bad zone, bad JSON, a reserved kind: each refused at its field.
	for field, change := range map[string][]string{
		"timezone": {"schedule", "0 3 * * *", "timezone", "Mars/Olympus"},
		"job.args": {"schedule", "0 3 * * *", "job.args", "{to: ops}"},
		"job.kind": {"schedule", "0 3 * * *", "job.kind", "gaffer.signal"},
		"missed":   {"schedule", "0 3 * * *", "missed", "sometimes"},
	} {
		f := formWith(csrf)
		for k, v := range bad {
			f[k] = v
		}
		for i := 0; i < len(change); i += 2 {
			f.Set(change[i], change[i+1])
		}
		p := b.post("/ui/cron", f)
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, `<label class="field bad">`) || !fieldAtFault(p.body, field) {
			t.Errorf("%s: %d, want the form again with the error at %s", field, p.status, field)
		}
	}
	// Created.
	good := formWith(csrf)
	for k, v := range bad {
		good[k] = v
	}
	good.Set("schedule", "0 3 * * *")
	if p := b.post("/ui/cron", good); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/cron/acme/report" {
		t.Fatalf("create: %d %s %q\n%s", p.status, p.header.Get("Location"), flash(t, p), p.body)
	}
	got, err := crons.Get(ctx, "acme", "report")
	if err != nil || got.Schedule != "0 3 * * *" || got.Timezone != "Europe/London" || got.Job.Queue != "reports" || got.Job.Priority != 3 ||
		got.Job.Timeout != 5*time.Minute || got.Missed != "once" || got.Overlap != "skip" || string(got.Job.Args) != `{"to":"ops"}` {
		t.Fatalf("created %+v, %v", got, err)
	}
	// The same name again: refused at the name.
	if p := b.post("/ui/cron", good); p.status != http.StatusBadRequest || !fieldAtFault(p.body, "name") {
		t.Fatalf("duplicate: %d", p.status)
	}
	// The edit form shows the entry; a bad edit keeps the typing and
	// changes nothing; a good one saves.
	p = b.get("/ui/cron/acme/report/edit")
	if p.status != http.StatusOK || !strings.Contains(p.body, `value="0 3 * * *"`) || strings.Contains(p.body, `name="name"`) {
		t.Fatalf("edit form: %d", p.status)
	}
	edit := formWith(csrf, "schedule", "*/5 * * * *", "timezone", "Nowhere/Land", "job.kind", "report.build", "job.args", `{"to":"ceo"}`)
	if p := b.post("/ui/cron/acme/report/edit", edit); p.status != http.StatusBadRequest || !fieldAtFault(p.body, "timezone") ||
		!strings.Contains(p.body, `value="Nowhere/Land"`) || !strings.Contains(p.body, `value="*/5 * * * *"`) {
		t.Fatalf("bad edit: %d\n%s", p.status, p.body)
	}
	if got, _ := crons.Get(ctx, "acme", "report"); got.Schedule != "0 3 * * *" {
		t.Fatalf("a refused edit changed the schedule to %q", got.Schedule)
	}
	edit.Set("timezone", "UTC")
	edit.Set("paused", "yes")
	if p := b.post("/ui/cron/acme/report/edit", edit); p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "saved") {
		t.Fatalf("edit: %d %q", p.status, flash(t, p))
	}
	if got, _ := crons.Get(ctx, "acme", "report"); got.Schedule != "*/5 * * * *" || got.Timezone != "UTC" || !got.Paused || string(got.Job.Args) != `{"to":"ceo"}` {
		t.Fatalf("after the edit: %+v", got)
	}

	// A tenant's token: its own tenant only, held to the quota, and only
	// with jobs:write.
	acme := e.browser()
	acme.login(e.token("acme", auth.ScopeJobsRead, auth.ScopeJobsWrite))
	acsrf := acme.csrf()
	if p := acme.post("/ui/cron", formWith(acsrf, "tenant", "globex", "name", "x", "schedule", "@daily", "job.kind", "k")); p.status != http.StatusBadRequest || !strings.Contains(p.body, "acts for tenant acme") {
		t.Fatalf("acme writing for globex: %d", p.status)
	}
	if p := acme.post("/ui/cron", formWith(acsrf, "name", "fast", "schedule", "@every 10s", "job.kind", "k")); p.status != http.StatusBadRequest || !fieldAtFault(p.body, "schedule") {
		t.Fatalf("acme over its quota: %d\n%s", p.status, p.body)
	}
	if p := acme.post("/ui/cron", formWith(acsrf, "name", "slow", "schedule", "@every 10m", "job.kind", "k")); p.status != http.StatusSeeOther {
		t.Fatalf("acme's own entry: %d %q", p.status, flash(t, p))
	}
	if _, err := crons.Get(ctx, "acme", "slow"); err != nil {
		t.Fatal(err)
	}
	if p := acme.get("/ui/cron/default/nightly/edit"); p.status != http.StatusNotFound {
		t.Fatalf("acme's edit form of another tenant's entry: %d", p.status)
	}
	reader := e.browser()
	reader.login(e.token("acme", auth.ScopeJobsRead))
	if p := reader.get("/ui/cron/new"); p.status != http.StatusForbidden {
		t.Fatalf("a read-only token's new cron form: %d", p.status)
	}
	if p := reader.post("/ui/cron/acme/slow/delete", formWith(reader.csrf())); p.status != http.StatusForbidden {
		t.Fatalf("a read-only token deleting: %d", p.status)
	}
	// Delete.
	if p := b.post("/ui/cron/acme/report/delete", formWith(csrf)); p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "deleted") {
		t.Fatalf("delete: %d %q", p.status, flash(t, p))
	}
	if _, err := crons.Get(ctx, "acme", "report"); !errors.Is(err, cron.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// fieldAtFault reports whether the page shows an error at field.
func fieldAtFault(body, field string) bool {
	i := strings.Index(body, `name="`+field+`"`)
	if i < 0 {
		return false
	}
	start := strings.LastIndex(body[:i], "<label")
	end := strings.Index(body[i:], "</label>")
	return start >= 0 && end >= 0 && strings.Contains(body[start:i+end], `fielderr`)
}

// The limit forms create, edit and delete limits as PUT and DELETE
// /v1/limits/{name} do: the admin scope, job.Limit's validation at its
// field, a tenant's admin token confined to its own tenant's limits.
func TestLimitForms(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := b.csrf()
	if p := b.get("/ui/queues"); !strings.Contains(p.body, `href="/ui/limits/new"`) {
		t.Fatal("the queues page offers no new limit")
	}
	if p := b.post("/ui/limits", formWith(csrf, "name", "mail-slow", "queue", "mail", "concurrency", "0", "rate", "0")); p.status != http.StatusBadRequest ||
		!fieldAtFault(p.body, "concurrency") || !strings.Contains(p.body, `value="mail"`) {
		t.Fatalf("a limit without a cap: %d\n%s", p.status, p.body)
	}
	if p := b.post("/ui/limits", formWith(csrf, "name", "mail-slow", "queue", "mail", "rate", "10", "period", "soon")); p.status != http.StatusBadRequest || !fieldAtFault(p.body, "period") {
		t.Fatalf("a bad period: %d", p.status)
	}
	if p := b.post("/ui/limits", formWith(csrf, "name", "Mail Slow", "concurrency", "2")); p.status != http.StatusBadRequest || !fieldAtFault(p.body, "name") {
		t.Fatalf("a bad name: %d", p.status)
	}
	if _, err := e.jobs.Limit(ctx, "mail-slow"); !errors.Is(err, job.ErrLimitNotFound) {
		t.Fatalf("refused forms created a limit: %v", err)
	}
	if p := b.post("/ui/limits", formWith(csrf, "name", "mail-slow", "queue", "mail", "key", "tenant", "concurrency", "2", "rate", "10", "period", "1m")); p.status != http.StatusSeeOther {
		t.Fatalf("create: %d %q\n%s", p.status, flash(t, p), p.body)
	}
	l, err := e.jobs.Limit(ctx, "mail-slow")
	if err != nil || l.Queue != "mail" || l.Key != "tenant" || l.Concurrency != 2 || l.Rate != 10 || l.Period != time.Minute {
		t.Fatalf("created %+v, %v", l, err)
	}
	if p := b.post("/ui/limits", formWith(csrf, "name", "mail-slow", "concurrency", "5")); p.status != http.StatusBadRequest || !fieldAtFault(p.body, "name") {
		t.Fatalf("creating over an existing limit: %d", p.status)
	}
	if p := b.get("/ui/limits/mail-slow/edit"); p.status != http.StatusOK || !strings.Contains(p.body, `value="1m0s"`) {
		t.Fatalf("edit form: %d", p.status)
	}
	if p := b.post("/ui/limits/mail-slow/edit", formWith(csrf, "queue", "mail", "concurrency", "7")); p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d %q", p.status, flash(t, p))
	}
	if l, _ := e.jobs.Limit(ctx, "mail-slow"); l.Concurrency != 7 || l.Rate != 0 {
		t.Fatalf("after the edit: %+v", l)
	}
	// A tenant's admin token: its own limits only.
	acme := e.browser()
	acme.login(e.token("acme", auth.ScopeAdmin))
	acsrf := acme.csrf()
	if p := acme.get("/ui/limits/mail-slow/edit"); p.status != http.StatusNotFound {
		t.Fatalf("acme's edit form of a shared limit: %d", p.status)
	}
	if p := acme.post("/ui/limits/mail-slow/edit", formWith(acsrf, "concurrency", "1000")); p.status != http.StatusSeeOther || !strings.HasPrefix(flash(t, p), "Refused") {
		t.Fatalf("acme editing a shared limit: %d %q", p.status, flash(t, p))
	}
	if p := acme.post("/ui/limits/mail-slow/delete", formWith(acsrf)); !strings.HasPrefix(flash(t, p), "Refused") {
		t.Fatalf("acme deleting a shared limit: %q", flash(t, p))
	}
	if p := acme.post("/ui/limits", formWith(acsrf, "name", "acme-mail", "tenant", "globex", "concurrency", "1")); p.status != http.StatusBadRequest || !strings.Contains(p.body, "acts for tenant acme") {
		t.Fatalf("acme setting globex's limit: %d", p.status)
	}
	if p := acme.post("/ui/limits", formWith(acsrf, "name", "acme-mail", "queue", "mail", "concurrency", "1")); p.status != http.StatusSeeOther {
		t.Fatalf("acme's own limit: %d %q", p.status, flash(t, p))
	}
	if l, err := e.jobs.Limit(ctx, "acme-mail"); err != nil || l.Tenant != "acme" {
		t.Fatalf("acme's limit: %+v %v", l, err)
	}
	// jobs:write is not enough: limits need admin.
	writer := e.browser()
	writer.login(e.token("acme", auth.ScopeJobsRead, auth.ScopeJobsWrite, auth.ScopeClusterRead))
	if p := writer.post("/ui/limits", formWith(writer.csrf(), "name", "w", "concurrency", "1")); p.status != http.StatusForbidden {
		t.Fatalf("a token without admin creating a limit: %d", p.status)
	}
	if p := writer.get("/ui/limits/new"); p.status != http.StatusForbidden {
		t.Fatalf("a token without admin, new limit form: %d", p.status)
	}
	if p := b.post("/ui/limits/mail-slow/delete", formWith(csrf)); p.status != http.StatusSeeOther || !strings.Contains(flash(t, p), "deleted") {
		t.Fatalf("delete: %d %q", p.status, flash(t, p))
	}
	if _, err := e.jobs.Limit(ctx, "mail-slow"); !errors.Is(err, job.ErrLimitNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// Every action and form (each POST route the handler registered, the new
// forms among them) refuses a request without the session's CSRF token,
// one from another origin, and one from a token without write scopes,
// and changes nothing.
func TestEveryActionNeedsCSRFOriginAndScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := cron.NewClient(e.st.Pool()).Create(ctx, cron.Entry{Name: "nightly", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.jobs.SetLimit(ctx, job.Limit{Name: "mail-slow", Queue: "mail", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	admin := e.browser()
	admin.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := admin.csrf()
	reader := e.browser()
	reader.login(e.token("default", auth.ScopeJobsRead, auth.ScopeClusterRead))
	rcsrf := reader.csrf()
	// What a form would carry if it were let through.
	fields := formWith("", "name", "x", "schedule", "@hourly", "job.kind", "k", "concurrency", "1", "step", "approve", "payload", "{}", "confirm", "purge", "all", "yes")
	before := e.snapshot()
	n := 0
	for _, pattern := range e.h.Patterns() {
		method, path, _ := strings.Cut(pattern, " ")
		if method != http.MethodPost {
			continue
		}
		n++
		path = pathParam.ReplaceAllStringFunc(path, func(m string) string { return pathExamples[m[1:len(m)-1]] })
		with := func(c string) url.Values {
			f := url.Values{}
			for k, v := range fields {
				f[k] = v
			}
			if c != "" {
				f.Set("csrf", c)
			} else {
				f.Del("csrf")
			}
			return f
		}
		if p := admin.post(path, with("")); p.status != http.StatusForbidden || !strings.Contains(p.body, "CSRF token is missing") {
			t.Errorf("%s without CSRF: %d", pattern, p.status)
		}
		if p := admin.postFrom("https://evil.example", path, with(csrf)); p.status != http.StatusForbidden || !strings.Contains(p.body, "another site") {
			t.Errorf("%s from another origin: %d", pattern, p.status)
		}
		if p := reader.post(path, with(rcsrf)); p.status != http.StatusForbidden || !strings.Contains(p.body, "lacks the") {
			t.Errorf("%s by a read-only token: %d", pattern, p.status)
		}
	}
	if n < 20 {
		t.Fatalf("only %d POST routes found", n)
	}
	after := e.snapshot()
	for table, sum := range before {
		if after[table] != sum {
			t.Errorf("gaffer.%s changed after requests that were all refused", table)
		}
	}
}
