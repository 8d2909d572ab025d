package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/ui"
)

// syncBuffer is a log the handler writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hostileValues are percent-encoded values no parameter takes.
var hostileValues = []struct{ name, escaped string }{
	{"NUL", "%00"},
	{"NUL inside", "a%00b"},
	{"invalid UTF-8", "%ff"},
	{"truncated UTF-8", "a%c3"},
	{"escape sequence", "%1b%5b31m"},
	{"DEL", "%7f"},
	{"C1 control", "%c2%85"},
	{"newline", "a%0aforged"},
	{"tab", "a%09b"},
	// Longer than any bound; digits match every pattern.
	{"over-long", strings.Repeat("1", 4097)},
}

// pathExamples are values the dashboard's path parameters take.
var pathExamples = map[string]string{"id": "1", "node": "node-x", "queue": "mail", "tenant": "default", "name": "nightly", "limit": "mail-slow", "step": "approve"}

// queryNames are the query parameters the pages read, and one they do not.
var queryNames = []string{"tenant", "after_tenant", "queue", "after", "cron_entry", "before", "workflow_run", "kind", "state", "show", "error", "undeclared"}

var pathParam = regexp.MustCompile(`\{([^}.$]+)\}`)

func (e *env) snapshot() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	rows, err := e.st.Pool().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'gaffer' AND table_type = 'BASE TABLE'
		AND table_name NOT IN ('ui_sessions', 'api_tokens')`) // a session's and a token's last use
	if err != nil {
		e.t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			e.t.Fatal(err)
		}
		tables = append(tables, name)
	}
	out := map[string]string{}
	for _, table := range tables {
		var sum string
		q := fmt.Sprintf(`SELECT md5(coalesce(string_agg(t::text, E'\n' ORDER BY t::text), '')) FROM gaffer.%q t`, table)
		if err := e.st.Pool().QueryRow(ctx, q).Scan(&sum); err != nil {
			e.t.Fatal(err)
		}
		out[table] = sum
	}
	return out
}

// Every path parameter of every dashboard route, the query parameters
// its pages read (and one they do not), and a POST's form fields are
// checked where they enter: a hostile value gets 400 naming the
// parameter (an action: a refusal flash naming it), logs no error and
// changes nothing. The routes come from the handler, so one added later
// is walked too.
func TestEveryDashboardParameterIsChecked(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, func(c *ui.Config) { c.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace}) })
	b := e.browser()
	b.login(e.token(auth.AllTenants, auth.ScopeAdmin))
	csrf := b.csrf()
	if err := e.st.RegisterNode(context.Background(), "node-x", "host", "dev", "2025c", map[string]int{"default": 1}, nil); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot()
	expect := func(method, target string, form url.Values, name string) {
		t.Helper()
		if method == http.MethodGet {
			p := b.get(target)
			if p.status != http.StatusBadRequest || !strings.Contains(p.body, name+" must") {
				t.Errorf("GET %.200s: %d, want 400 naming %s", target, p.status, name)
			}
			return
		}
		f := url.Values{"csrf": {csrf}}
		for k, v := range form {
			f[k] = v
		}
		p := b.post(target, f)
		if msg := flash(t, p); p.status != http.StatusSeeOther || !strings.HasPrefix(msg, "Refused: "+name+" must") {
			t.Errorf("POST %.200s %.200v: %d flash %q, want a refusal naming %s", target, form, p.status, msg, name)
		}
	}
	patterns := e.h.Patterns()
	if len(patterns) == 0 {
		t.Fatal("the handler registered no routes")
	}
	for _, pattern := range patterns {
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.TrimSuffix(path, "{$}")
		fill := func(name, v string) string {
			return pathParam.ReplaceAllStringFunc(path, func(m string) string {
				n := m[1 : len(m)-1]
				if n == name {
					return v
				}
				ex, ok := pathExamples[n]
				if !ok {
					t.Fatalf("%s: no example for {%s} in pathExamples", pattern, n)
				}
				return ex
			})
		}
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			for _, h := range hostileValues {
				expect(method, fill(m[1], h.escaped), nil, m[1])
			}
		}
		names := queryNames
		if method == http.MethodPost {
			names = []string{"tenant", "undeclared"}
			for _, h := range hostileValues {
				raw, _ := url.QueryUnescape(h.escaped)
				expect(method, fill("", ""), url.Values{"undeclared": {raw}}, "undeclared")
			}
		}
		for _, q := range names {
			for _, h := range hostileValues {
				expect(method, fill("", "")+"?"+q+"="+h.escaped, nil, q)
			}
		}
	}
	if l := logs.String(); strings.Contains(l, "[ERROR]") {
		t.Errorf("refused parameters logged errors:\n%s", l)
	}
	after := e.snapshot()
	for table, sum := range before {
		if after[table] != sum {
			t.Errorf("gaffer.%s changed after requests that were all refused", table)
		}
	}
}

// The page a sign-in returns to is a dashboard path a Location header
// carries as it is: one with a control character or bytes that are not
// UTF-8 is dropped for the overview.
func TestSignInReturnsOnlyToCleanPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := e.token("default", auth.ScopeJobsRead)
	for _, next := range []string{"/ui/jobs\x00", "/ui/jobs\xff", "/ui/jobs\x1b[31m", "/ui/jobs\r\nSet-Cookie: x=1", "/ui/" + strings.Repeat("a", 2000)} {
		b := e.browser()
		p := b.post("/ui/login", url.Values{"token": {token}, "next": {next}})
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" {
			t.Errorf("sign-in with next %q: %d to %q, want the overview", next, p.status, p.header.Get("Location"))
		}
	}
	b := e.browser()
	if p := b.post("/ui/login", url.Values{"token": {token}, "next": {"/ui/jobs?state=failed"}}); p.header.Get("Location") != "/ui/jobs?state=failed" {
		t.Errorf("sign-in with a clean next: to %q", p.header.Get("Location"))
	}
}
