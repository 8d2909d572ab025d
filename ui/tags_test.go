package ui_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// The jobs page searches by tag: words and args.PATH=VALUE words, shows
// tags as chips (on the list and the job's page), and "all matching" acts
// on the search's result: the preview counts it and the confirmation
// form carries the search, so the confirmed cancel acts on exactly those
// jobs of the tenant. Red with the search left out of the confirmation
// form, or of the filter the bulk action gets.
func TestJobsTagSearchAndBulk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.enqueue(job.Request{Tenant: "acme", Kind: "report", Args: map[string]any{"customer": 42}, Tags: []string{"billing", "env:prod"}})
	b := e.enqueue(job.Request{Tenant: "acme", Kind: "report", Args: map[string]any{"customer": 7}, Tags: []string{"billing"}})
	c := e.enqueue(job.Request{Tenant: "acme", Kind: "report", Args: map[string]any{"customer": 42}})
	theirs := e.enqueue(job.Request{Tenant: "globex", Kind: "report", Args: map[string]any{"customer": 42}, Tags: []string{"billing"}})
	br := e.browser()
	br.login(e.token("acme", auth.ScopeJobsRead, auth.ScopeJobsWrite))

	shown := func(p string, id int64) bool { return strings.Contains(p, fmt.Sprintf(`href="/ui/jobs/%d"`, id)) }
	p := br.get("/ui/jobs?q=" + url.QueryEscape("tag:billing"))
	if p.status != 200 || !shown(p.body, a) || !shown(p.body, b) || shown(p.body, c) || shown(p.body, theirs) {
		t.Fatalf("tag:billing (%d): want jobs %d and %d only\n%s", p.status, a, b, p.body)
	}
	if !strings.Contains(p.body, `class="tag">env:prod</a>`) {
		t.Fatalf("the list shows no tag chips")
	}
	p = br.get("/ui/jobs?q=" + url.QueryEscape("tag:billing args.customer=42"))
	if !shown(p.body, a) || shown(p.body, b) || shown(p.body, c) {
		t.Fatalf("tag:billing args.customer=42: want job %d only", a)
	}
	p = br.get("/ui/jobs?tags_match=any&q=" + url.QueryEscape("tag:env:prod tag:nope"))
	if !shown(p.body, a) || shown(p.body, b) {
		t.Fatalf("any of env:prod, nope: want job %d only", a)
	}
	if p := br.get(fmt.Sprintf("/ui/jobs/%d", a)); !strings.Contains(p.body, `class="tag">billing</a>`) {
		t.Fatalf("the job page shows no tags")
	}
	if p := br.get("/ui/jobs?q=" + url.QueryEscape("tag:a,b")); p.status != http.StatusBadRequest {
		t.Fatalf("a bad tag: %d", p.status)
	}

	// All matching the search.
	p = br.get("/ui/jobs/bulk?action=cancel&q=" + url.QueryEscape("tag:billing"))
	if p.status != 200 || !strings.Contains(p.body, `id="bulk-count">2 jobs`) || !strings.Contains(p.body, `name="q" value="tag:billing"`) {
		t.Fatalf("count preview (%d):\n%s", p.status, p.body)
	}
	form := url.Values{"csrf": {br.csrf()}}
	for _, m := range regexpAll(`<input type="hidden" name="([a-z_]+)" value="([^"]*)">`, p.body) {
		if m[1] != "csrf" {
			form.Set(m[1], strings.ReplaceAll(m[2], "&#43;", "+"))
		}
	}
	p = br.post("/ui/jobs/bulk", form)
	if !strings.Contains(flash(t, p), "Cancelled 2 jobs") {
		t.Fatalf("confirmed cancel: flash %q (form %v)", flash(t, p), form)
	}
	if e.state(a) != "cancelled" || e.state(b) != "cancelled" || e.state(c) != "pending" || e.state(theirs) != "pending" {
		t.Fatalf("after the cancel: %s %s %s, globex's %s", e.state(a), e.state(b), e.state(c), e.state(theirs))
	}
}

// regexpAll is every match of pattern in s, with its groups.
func regexpAll(pattern, s string) [][]string {
	return regexp.MustCompile(pattern).FindAllStringSubmatch(s, -1)
}
