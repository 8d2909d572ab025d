package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/api/internal/apidoc"
	"github.com/gafferhq/gaffer/auth"
)

// The committed document is what the Go generates: CI fails until a
// change to a route or a body type is followed by go generate ./api.
func TestOpenAPIDocumentIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := apidoc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	got := api.OpenAPI()
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("api/openapi.json is not what the Go generates; run go generate ./api\nfirst difference, line %d:\ncommitted: %s\ngenerated: %s", i+1, g, w)
		}
	}
}

// The document is valid OpenAPI 3.0, and says each operation's scope the
// way 3.0 allows: a security requirement of an http scheme lists no
// scopes (only oauth2 and openIdConnect schemes have them), so the scope
// is in the description and in x-gaffer-scope.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc := loadDoc(t) // loads and validates
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Fatalf("openapi %q, want 3.0.x", doc.OpenAPI)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			scope, _ := op.Extensions[apidoc.ScopeExtension].(string)
			if op.Security == nil {
				t.Errorf("%s: no security requirement", where)
				continue
			}
			if len(*op.Security) == 0 {
				if scope != "" {
					t.Errorf("%s: needs no token but names scope %q", where, scope)
				}
				continue
			}
			if !slices.Contains(auth.Scopes, scope) || !strings.Contains(op.Description, scope) {
				t.Errorf("%s: scope %q (description %q), want one of %v, named in the description", where, scope, op.Description, auth.Scopes)
			}
			for _, req := range *op.Security {
				for name, scopes := range req {
					scheme := doc.Components.SecuritySchemes[name]
					if scheme == nil {
						t.Errorf("%s: unknown security scheme %q", where, name)
						continue
					}
					if typ := scheme.Value.Type; typ != "oauth2" && typ != "openIdConnect" && len(scopes) > 0 {
						t.Errorf("%s: the %s scheme %q is given scopes %v; OpenAPI 3.0 allows scopes for oauth2 and openIdConnect only", where, typ, name, scopes)
					}
				}
			}
		}
	}
}

// documented lists the document's operations as net/http patterns.
func documented(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// Every route the server registers is documented, and every documented
// one registered.
func TestEveryRouteIsDocumented(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	served := e.api.Patterns()
	slices.Sort(served)
	doc := documented(e.doc)
	for _, p := range served {
		if !slices.Contains(doc, p) {
			t.Errorf("%s is served but not in the OpenAPI document", p)
		}
	}
	for _, p := range doc {
		if !slices.Contains(served, p) {
			t.Errorf("%s is in the OpenAPI document but not served", p)
		}
	}
}

// fill puts a value in each {parameter} of a documented path.
func fill(op *openapi3.Operation, path string) string {
	for _, p := range op.Parameters {
		if p.Value.In != "path" {
			continue
		}
		v := "x"
		if p.Value.Schema.Value.Type.Is("integer") {
			v = "1"
		}
		path = strings.ReplaceAll(path, "{"+p.Value.Name+"}", v)
	}
	return path
}

// Every documented operation is served, by the handler of its path and
// method (not the 404 and 405 answers for requests no route matches),
// behind the scope the document names: without a token 401, with a
// token lacking the scope 403, and with a token of just that scope, not
// refused for its scope.
func TestEveryDocumentedRouteIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := func(scopes ...string) string {
		text, _, err := e.tokens.Create(context.Background(), auth.NewTokenRequest{Name: "probe", Tenant: "default", Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	with, without := map[string]string{}, map[string]string{}
	for _, scope := range auth.Scopes {
		with[scope] = token(scope)
		var others []string
		for _, o := range auth.Scopes {
			if o != scope && o != auth.ScopeAdmin {
				others = append(others, o)
			}
		}
		without[scope] = token(others...)
	}
	for path, item := range e.doc.Paths.Map() {
		for method, op := range item.Operations() {
			url := fill(op, path)
			scope, _ := op.Extensions[apidoc.ScopeExtension].(string)
			if scope == "" {
				if r := e.do("", method, url, nil); r.Status != http.StatusOK {
					t.Errorf("%s %s without a token: %d %s", method, url, r.Status, r.Body)
				}
				continue
			}
			r := e.do("", method, url, nil)
			if p := r.problem(t); r.Status != http.StatusUnauthorized || p.Code != api.CodeUnauthorized {
				t.Errorf("%s %s without a token: %d %s, want 401", method, url, r.Status, r.Body)
			}
			r = e.do(without[scope], method, url, nil)
			if p := r.problem(t); r.Status != http.StatusForbidden || !strings.Contains(p.Detail, scope+" scope") {
				t.Errorf("%s %s without scope %s: %d %s, want 403 naming the scope", method, url, scope, r.Status, r.Body)
			}
			r = e.do(with[scope], method, url, nil)
			if operator, _ := op.Extensions[apidoc.OperatorExtension].(bool); operator {
				// A tenant's token holding the scope is refused all the
				// same; a spanning one is not.
				if p := r.problem(t); r.Status != http.StatusForbidden || !strings.Contains(p.Detail, "spanning tenants") {
					t.Errorf("%s %s (operator's) with a tenant's token of scope %s: %d %s, want 403", method, url, scope, r.Status, r.Body)
				}
				r = e.do(e.admin, method, url, nil)
			}
			if r.Status == http.StatusForbidden && strings.Contains(string(r.Body), " scope") {
				t.Errorf("%s %s with scope %s: refused for its scope: %s", method, url, scope, r.Body)
			}
		}
	}
}

// matches reports whether a documented path template matches path, as
// the mux matches a pattern: a {name} segment takes any one segment.
func matches(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if ts[i] != ps[i] && !(strings.HasPrefix(ts[i], "{") && ps[i] != "") {
			return false
		}
	}
	return true
}

// A path served with other methods answers 405 with Allow listing them
// (GET brings HEAD), before any token is checked, as it answers 404 for
// a path no route has.
func TestWrongMethodAnswers405(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for path, item := range e.doc.Paths.Map() {
		var op *openapi3.Operation
		for _, o := range item.Operations() {
			op = o
		}
		url := fill(op, path)
		var allow []string
		for other, item := range e.doc.Paths.Map() {
			if !matches(other, url) {
				continue
			}
			for m := range item.Operations() {
				allow = append(allow, m)
				if m == http.MethodGet {
					allow = append(allow, http.MethodHead)
				}
			}
		}
		slices.Sort(allow)
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			if slices.Contains(allow, m) {
				continue
			}
			r := e.doUnrouted("", m, url)
			e.expectProblem(r, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
			if got := r.Header.Get("Allow"); got != strings.Join(allow, ", ") {
				t.Errorf("%s %s: Allow %q, want %q", m, url, got, strings.Join(allow, ", "))
			}
		}
	}
	e.expectProblem(e.doUnrouted("", http.MethodGet, "/v1/jobs/1/frob"), http.StatusNotFound, api.CodeNotFound)
}

func TestServedOpenAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Get(e.srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(b, api.OpenAPI()) {
		t.Fatalf("served document differs (status %d)", resp.StatusCode)
	}
}

// The exchange check is not vacuous: it fails an undocumented route, a
// response unlike the document, and a request the document refuses but
// the server accepted — and passes that request when the server refused
// it.
func TestExchangeCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := func(method, path string) *http.Request {
		r := httptest.NewRequest(method, e.srv.URL+path, nil)
		r.Header.Set("Content-Type", "application/json")
		return r
	}
	problem := func(status int, code string) response {
		return response{Status: status, Header: http.Header{"Content-Type": {"application/problem+json"}},
			Body: []byte(`{"type":"t","title":"t","status":` + strconv.Itoa(status) + `,"code":"` + code + `"}`)}
	}
	queue := response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"name":"q","paused":true}`)}
	cases := []struct {
		name    string
		req     *http.Request
		body    []byte
		res     response
		failure string
	}{
		{"documented", req("POST", "/v1/queues/q/pause"), nil, queue, ""},
		{"undocumented route", req("POST", "/v1/queues/q/frob"), nil, queue, "not in the OpenAPI document"},
		{"undocumented member", req("POST", "/v1/queues/q/pause"), nil,
			response{Status: 200, Header: queue.Header, Body: []byte(`{"name":"q","paused":true,"extra":1}`)}, "response does not match"},
		{"undocumented status", req("POST", "/v1/queues/q/pause"), nil,
			response{Status: 202, Header: queue.Header, Body: queue.Body}, "response does not match"},
		{"undocumented code", req("GET", "/v1/jobs/1"), nil, problem(400, "already_replayed"), "response does not match"},
		{"refused request accepted", req("PUT", "/v1/tenants/t"), []byte(`{"weight":0}`),
			response{Status: 200, Header: queue.Header, Body: []byte(`{"tenant":"t","weight":1}`)}, "refuses the request"},
		{"refused request refused", req("PUT", "/v1/tenants/t"), []byte(`{"weight":0}`), problem(400, "invalid_field"), ""},
	}
	for _, c := range cases {
		err := e.check(c.req, c.body, c.res)
		switch {
		case c.failure == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.failure != "" && (err == nil || !strings.Contains(err.Error(), c.failure)):
			t.Errorf("%s: %v, want a failure saying %q", c.name, err, c.failure)
		}
	}
}

// The OpenAPI libraries are build-time tools: the gaffer binary serves
// the committed document and does not carry them.
func TestBinaryDoesNotCarryTheGenerator(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/gafferhq/gaffer/cmd/gaffer").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/getkin/") || strings.HasSuffix(dep, "/api/internal/apidoc") {
			t.Errorf("cmd/gaffer depends on %s", dep)
		}
	}
}
