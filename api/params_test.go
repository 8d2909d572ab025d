package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/api"
)

// syncBuffer is a log the server writes while the test reads it.
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

// hostileValues are values no parameter takes, as they go on the wire:
// percent-encoded in a path or query, raw bytes in a header.
var hostileValues = []struct{ name, escaped, raw string }{
	{"NUL", "%00", "\x00"},
	{"NUL inside", "a%00b", "a\x00b"},
	{"invalid UTF-8", "%ff", "\xff"},
	{"truncated UTF-8", "a%c3", "a\xc3"},
	{"escape sequence", "%1b%5b31m", "\x1b[31m"},
	{"DEL", "%7f", "\x7f"},
	{"C1 control", "%c2%85", "\xc2\x85"},
	{"newline", "a%0aforged", ""}, // a header cannot carry it
	{"tab", "a%09b", "a\tb"},
	// Longer than any parameter's bound; digits match every pattern, so
	// only the length is at fault.
	{"over-long", strings.Repeat("1", 4097), strings.Repeat("1", 4097)},
}

// exampleValue is a value p takes: its example, or one its type implies.
func exampleValue(t *testing.T, p api.Param) string {
	t.Helper()
	switch p.Type.(type) {
	case int, int64:
		return "1"
	case bool:
		return "true"
	case time.Time:
		return "2026-01-02T15:04:05Z"
	}
	if p.Example == "" {
		t.Fatalf("parameter %s (%s) has no Example", p.Name, p.In)
	}
	return p.Example
}

// rawExchange sends one request as bytes over a loopback connection (so
// that a header may carry bytes net/http's client refuses to send) and
// reads the answer.
func rawExchange(t *testing.T, addr, method, target string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: 0\r\n", method, target, addr)
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&req, "%s: %s\r\n", headers[i], headers[i+1])
	}
	req.WriteString("\r\n")
	if _, err := c.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// snapshot is every row of every table of the gaffer schema, hashed per
// table.
func (e *env) snapshot() map[string]string {
	e.t.Helper()
	ctx := context.Background()
	rows, err := e.st.Pool().Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'gaffer' AND table_type = 'BASE TABLE'`)
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
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
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

// Every path parameter, query parameter and checked header of every
// route in the route table (and so in the OpenAPI document, which
// describes exactly those) is checked where it enters: a hostile value
// (NUL, bytes that are not UTF-8, a control character, over-long) gets
// 400 invalid_parameter naming the parameter, logs no error, and changes
// nothing. The routes and their parameters come from the table, so a
// route added later is walked too.
func TestEveryParameterIsCheckedWhereItEnters(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := newEnv(t, func(c *api.Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
		c.RateLimit, c.RateBurst = 1e6, 1e6
	})
	addr := e.srv.Listener.Addr().String()
	before := e.snapshot()
	documented := map[string][]string{}
	described := map[string]string{}
	for path, item := range e.doc.Paths.Map() {
		for method, op := range item.Operations() {
			described[method+" "+path] = op.Description
			for _, p := range op.Parameters {
				documented[method+" "+path] = append(documented[method+" "+path], p.Value.In+" "+p.Value.Name)
			}
		}
	}
	expect := func(what string, status int, header http.Header, body []byte, field string) {
		t.Helper()
		var p api.Problem
		if header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil {
			t.Errorf("%s: %d %s %q, want a problem", what, status, header.Get("Content-Type"), body)
			return
		}
		if status != http.StatusBadRequest || p.Code != api.CodeInvalidParameter || p.Field != field {
			t.Errorf("%s: %d %s field %q (%s), want 400 invalid_parameter field %q", what, status, p.Code, p.Field, p.Detail, field)
		}
		if len(body) > 2048 {
			t.Errorf("%s: a problem of %d bytes repeats the value unbounded: %.200s", what, len(body), body)
		}
	}
	var walked, headers int
	for _, rt := range api.Routes() {
		if rt.Scope == "" {
			continue // served without a token, reads no parameter
		}
		var declared []string
		for _, p := range rt.Params {
			if p.Prefix {
				// OpenAPI cannot name a family of parameters: the
				// operation's description does.
				if !strings.Contains(described[rt.Pattern()], p.Name+"*") {
					t.Errorf("%s: the OpenAPI description does not name the parameters %s*", rt.Pattern(), p.Name)
				}
				continue
			}
			declared = append(declared, p.In+" "+p.Name)
		}
		if doc := documented[rt.Pattern()]; !slices.Equal(slices.Sorted(slices.Values(doc)), slices.Sorted(slices.Values(declared))) {
			t.Errorf("%s: the OpenAPI document lists parameters %v, the route table %v", rt.Pattern(), doc, declared)
		}
		// target is rt's path with each path parameter's example, but
		// name's value is v (escaped already).
		target := func(name, v string) string {
			path := rt.Path
			for _, p := range rt.Params {
				if p.In != "path" {
					continue
				}
				val := url.PathEscape(exampleValue(t, p))
				if p.Name == name {
					val = v
				}
				path = strings.ReplaceAll(path, "{"+p.Name+"}", val)
			}
			return path
		}
		for _, p := range rt.Params {
			for _, h := range hostileValues {
				what := fmt.Sprintf("%s %s %s=%s", rt.Pattern(), p.In, p.Name, h.name)
				switch p.In {
				case "path":
					status, hd, body := rawExchange(t, addr, rt.Method, target(p.Name, h.escaped), "Authorization", "Bearer "+e.admin)
					expect(what, status, hd, body, p.Name)
				case "query":
					name := queryName(p)
					status, hd, body := rawExchange(t, addr, rt.Method, target("", "")+"?"+url.QueryEscape(name)+"="+h.escaped, "Authorization", "Bearer "+e.admin)
					expect(what, status, hd, body, name)
				case "header":
					if p.Lenient || h.raw == "" {
						continue
					}
					headers++
					status, hd, body := rawExchange(t, addr, rt.Method, target("", ""), "Authorization", "Bearer "+e.admin, p.Name, h.raw)
					if strings.ContainsFunc(h.raw, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
						// net/http refuses a header with such a byte itself
						// (a plain 400), before any handler runs.
						if status != http.StatusBadRequest {
							t.Errorf("%s: %d %q, want net/http's 400", what, status, body)
						}
						continue
					}
					expect(what, status, hd, body, p.Name)
				}
				walked++
			}
		}
		// A query parameter the route does not take, or one given twice,
		// is refused too: a handler reads nothing the table does not
		// declare.
		status, hd, body := rawExchange(t, addr, rt.Method, target("", "")+"?undeclared=1", "Authorization", "Bearer "+e.admin)
		expect(rt.Pattern()+" undeclared query parameter", status, hd, body, "undeclared")
		status, hd, body = rawExchange(t, addr, rt.Method, target("", "")+"?%ff%00=1", "Authorization", "Bearer "+e.admin)
		expect(rt.Pattern()+" hostile query parameter name", status, hd, body, `\xff\x00`)
		for _, p := range rt.Params {
			if p.In == "query" {
				// Given once more than it may be: twice, or past its
				// Repeat.
				name, v := queryName(p), url.QueryEscape(exampleOrDigit(p))
				q := strings.Repeat(name+"="+v+"&", max(p.Repeat, 1)) + name + "=" + v
				status, hd, body = rawExchange(t, addr, rt.Method, target("", "")+"?"+q, "Authorization", "Bearer "+e.admin)
				expect(rt.Pattern()+" "+name+" once too often", status, hd, body, name)
			}
		}
	}
	if walked == 0 || headers == 0 {
		t.Fatalf("walked %d values (%d headers): the route table declares no parameters?", walked, headers)
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
	// The examples are values the routes take: no route refuses its own
	// example path (so the walk above tested each parameter alone).
	for _, rt := range api.Routes() {
		if rt.Scope == "" {
			continue
		}
		path := rt.Path
		for _, p := range rt.Params {
			if p.In == "path" {
				path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(exampleValue(t, p)))
			}
		}
		status, hd, body := rawExchange(t, addr, rt.Method, path, "Authorization", "Bearer "+e.admin)
		var p api.Problem
		if hd.Get("Content-Type") == "application/problem+json" && json.Unmarshal(body, &p) == nil && p.Code == api.CodeInvalidParameter {
			t.Errorf("%s %s: its examples are refused: %d %s", rt.Method, path, status, body)
		}
	}
}

// exampleOrDigit is a value of p's type, or "1".
func exampleOrDigit(p api.Param) string {
	if p.Example != "" {
		return p.Example
	}
	return "1"
}

// The longest cursor a list returns — a cron entry's, naming the longest
// tenant and name — is one the cursor parameter takes.
func TestLongestCursorIsTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tenant := "t" + strings.Repeat("x", 63)
	for _, last := range []string{"a", "b"} {
		name := "n" + strings.Repeat("y", 126) + last
		body := fmt.Sprintf(`{"tenant":%q,"name":%q,"schedule":"@daily","job":{"kind":"k"}}`, tenant, name)
		if r := e.do(e.admin, "POST", "/v1/cron", body); r.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
		}
	}
	var page struct {
		Data       []struct{ Name string }
		NextCursor string `json:"next_cursor"`
	}
	e.do(e.admin, "GET", "/v1/cron?limit=1", nil).decode(t, &page)
	if len(page.Data) != 1 || len(page.NextCursor) < 256 {
		t.Fatalf("first page: %+v", page)
	}
	first := page.Data[0].Name
	page.Data = nil
	r := e.do(e.admin, "GET", "/v1/cron?limit=1&cursor="+page.NextCursor, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("the cursor the list returned (%d bytes) is refused: %d %s", len(page.NextCursor), r.Status, r.Body)
	}
	r.decode(t, &page)
	if len(page.Data) != 1 || page.Data[0].Name == first {
		t.Fatalf("second page: %+v", page)
	}
}

// queryName is a name of the query parameter p: its name, or for a
// family of parameters (Param.Prefix) one of them.
func queryName(p api.Param) string {
	if p.Prefix {
		return p.Name + "x"
	}
	return p.Name
}
