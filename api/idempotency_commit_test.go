package api_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

// A POST with an Idempotency-Key whose write committed but whose answer
// never reached the API (the connection dropped after the commit) must
// not run again on the client's retry: the retry gets the first request's
// answer, and there is one run, one job — not two. The API reaches
// PostgreSQL through a proxy that slows every answer down; once the write
// is visible in the database the proxy drops the connections, so the API
// sees an error for a write that happened. Red when the key is released
// on any 5xx (the retry then creates a second run).
func TestIdempotencyKeyAfterAnUnseenCommit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, path, body, count string
	}{
		{"enqueue", "/v1/jobs", `{"kind":"charge","args":{"amount":100}}`, `SELECT count(*) FROM gaffer.jobs`},
		{"workflow", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"k"}]}`, `SELECT count(*) FROM gaffer.workflow_runs`},
		{"cron trigger", "/v1/cron/nightly/trigger", ``, `SELECT count(*) FROM gaffer.jobs`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			direct := pgtest.NewStore(t)
			if _, err := cron.NewClient(direct.Pool()).Create(ctx, cron.Entry{Name: "nightly", Schedule: "@daily", Job: cron.JobTemplate{Kind: "k"}}); err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(direct.Pool().Config().ConnString())
			if err != nil {
				t.Fatal(err)
			}
			proxy, err := faultproxy.Start(u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			u.Host = proxy.Addr()
			st, err := store.Open(ctx, u.String(), 4)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tokens := auth.NewTokens(st.Pool())
			token, _, err := tokens.Create(ctx, auth.NewTokenRequest{Name: "t", Scopes: []string{auth.ScopeJobsWrite}})
			if err != nil {
				t.Fatal(err)
			}
			s, err := api.New(api.Config{Pool: st.Pool(), Tokens: tokens, Jobs: job.NewClient(st.Pool(), nil), DLQ: dlq.NewClient(st.Pool()),
				Cron: cron.NewClient(st.Pool()), Workflows: workflow.NewClient(st.Pool()), AllowUnknownKinds: true})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s)
			defer srv.Close()
			doc := loadDoc(t)
			doc.Servers = openapi3.Servers{{URL: srv.URL}}
			router, err := gorillamux.NewRouter(doc)
			if err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, st: direct, srv: srv, doc: doc, router: router}
			count := func() int { return e.count(c.count) }

			proxy.SetLatency(300 * time.Millisecond)
			first := make(chan response, 1)
			go func() { first <- e.do(token, "POST", c.path, c.body, "Idempotency-Key", "k-1") }()
			deadline := time.Now().Add(20 * time.Second)
			for count() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the first request never committed")
				}
				time.Sleep(5 * time.Millisecond)
			}
			// Committed; the answer is still on its way back. Drop it.
			proxy.Set(faultproxy.Reset)
			proxy.Set(faultproxy.Pass)
			proxy.SetLatency(0)
			r1 := <-first
			if r1.Status < 500 {
				t.Skipf("the first request's answer arrived (%d) before the connection dropped; nothing to test", r1.Status)
			}
			r2 := e.do(token, "POST", c.path, c.body, "Idempotency-Key", "k-1")
			if n := count(); n != 1 {
				t.Fatalf("%d rows after a retry of a committed request (first answer %d, retry %d %s)", n, r1.Status, r2.Status, r2.Body)
			}
			if r2.Status != 201 || r2.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retry: %d replayed=%q %s; want the first request's 201, replayed", r2.Status, r2.Header.Get("Idempotent-Replayed"), r2.Body)
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(r2.Body, &body); err != nil || len(body) == 0 {
				t.Fatalf("replayed body %s", r2.Body)
			}
		})
	}
}
