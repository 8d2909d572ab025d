package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/webhook"
	"github.com/gafferhq/gaffer/workflow"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is an API server on a fresh database, and a client that checks
// every response against the OpenAPI document.
type env struct {
	t      *testing.T
	st     *store.Store
	srv    *httptest.Server
	api    *api.Server
	tokens *auth.Tokens
	doc    *openapi3.T
	router routers.Router
	admin  string // a token spanning tenants, all scopes
	writer string // tenant default: jobs:read, jobs:write
	reader string // tenant default: jobs:read
	acme   string // tenant acme: jobs:read, jobs:write
	ops    string // tenant default: jobs:read, cluster:read
}

func loadDoc(t testing.TB) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatalf("load OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("OpenAPI document is invalid: %v", err)
	}
	return doc
}

func newEnv(t *testing.T, mut ...func(*api.Config)) *env {
	t.Helper()
	st := pgtest.NewStore(t)
	tokens := auth.NewTokens(st.Pool())
	cfg := api.Config{Pool: st.Pool(), Tokens: tokens, Jobs: job.NewClient(st.Pool(), nil), DLQ: dlq.NewClient(st.Pool()), Cron: cron.NewClient(st.Pool()), Workflows: workflow.NewClient(st.Pool())}
	// As on a node: the http kind's checks run where its jobs enter.
	hooks, err := webhook.New(context.Background(), webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	withHooks(hooks)(&cfg)
	// No node runs here to register kinds: the unknown_kind check is off
	// but in the tests of it (TestEnqueueRefusesUnknownKinds).
	cfg.AllowUnknownKinds = true
	for _, m := range mut {
		m(&cfg)
	}
	s, err := api.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	doc := loadDoc(t)
	doc.Servers = openapi3.Servers{{URL: srv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, srv: srv, api: s, tokens: tokens, doc: doc, router: router}
	mk := func(tenant string, scopes ...string) string {
		text, _, err := tokens.Create(context.Background(), auth.NewTokenRequest{Name: "test", Tenant: tenant, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	e.admin = mk("*", "admin")
	e.writer = mk("default", "jobs:read", "jobs:write")
	e.reader = mk("default", "jobs:read")
	e.acme = mk("acme", "jobs:read", "jobs:write")
	e.ops = mk("default", "jobs:read", "cluster:read")
	return e
}

// withHooks makes the env's clients check http jobs with hooks' policy,
// as a node whose registry holds hooks does.
func withHooks(hooks *webhook.Handler) func(*api.Config) {
	return func(c *api.Config) {
		reg := job.NewRegistry()
		hooks.Register(reg)
		c.Jobs, c.Cron, c.Workflows = c.Jobs.WithKinds(reg), c.Cron.WithKinds(reg), c.Workflows.WithKinds(reg)
	}
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

func (r response) problem(t *testing.T) api.Problem {
	t.Helper()
	var p api.Problem
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("error response Content-Type %q, body %s", ct, r.Body)
	}
	r.decode(t, &p)
	return p
}

// do sends a request and validates the response against the OpenAPI
// document (status, content type and body schema).
func (e *env) do(token, method, path string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		raw, _ = json.Marshal(b)
	}
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	r := response{Status: resp.StatusCode, Header: resp.Header, Body: out}
	e.validate(req, raw, r)
	return r
}

// validate fails the test on each way the exchange departs from the
// OpenAPI document (see check).
func (e *env) validate(req *http.Request, body []byte, r response) {
	e.t.Helper()
	if err := e.check(req, body, r); err != nil {
		e.t.Errorf("%s %s → %d: %v\nrequest body: %s\nresponse body: %s", req.Method, req.URL.Path, r.Status, err, body, r.Body)
	}
}

// check compares an exchange with the OpenAPI document: the route must
// be documented (doUnrouted sends the requests that are meant not to
// be), the response must match it (status, headers, content type,
// body), and the request must match it too — or, when it does not, the
// server must have refused it (4xx): a request the document calls
// invalid but the server accepts means one of the two is wrong.
func (e *env) check(req *http.Request, body []byte, r response) error {
	route, params, err := e.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("the route is not in the OpenAPI document: %w", err)
	}
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	var errs []error
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && (r.Status < 400 || r.Status >= 500) {
		errs = append(errs, fmt.Errorf("the OpenAPI document refuses the request, the server did not: %w", err))
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.Status, Header: r.Header,
		Body: io.NopCloser(bytes.NewReader(r.Body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, fmt.Errorf("the response does not match the OpenAPI document: %w", err))
	}
	return errors.Join(errs...)
}

// doUnrouted sends a request no documented operation has, and checks
// that it is not in the document and that the answer is the documented
// 404 or 405 problem (with Allow).
func (e *env) doUnrouted(token, method, path string) response {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if _, _, err := e.router.FindRoute(req); err == nil {
		e.t.Fatalf("%s %s is in the OpenAPI document", method, path)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	r := response{Status: resp.StatusCode, Header: resp.Header, Body: out}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		e.t.Fatalf("%s %s → %d: %v; body %s", method, path, r.Status, err, out)
	}
	if err := e.doc.Components.Schemas["Problem"].Value.VisitJSON(v); err != nil {
		e.t.Errorf("%s %s → %d: not a documented Problem: %v", method, path, r.Status, err)
	}
	switch {
	case r.Status == http.StatusNotFound:
	case r.Status == http.StatusMethodNotAllowed && r.Header.Get("Allow") != "":
	default:
		e.t.Errorf("%s %s → %d (Allow %q), want 404, or 405 with Allow", method, path, r.Status, r.Header.Get("Allow"))
	}
	return r
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) expectProblem(r response, status int, code string) api.Problem {
	e.t.Helper()
	if r.Status != status {
		e.t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	p := r.problem(e.t)
	if p.Code != code || p.Status != status || p.Title == "" {
		e.t.Fatalf("problem %+v, want code %q", p, code)
	}
	return p
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
