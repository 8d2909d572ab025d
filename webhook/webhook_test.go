package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type call struct {
	header http.Header
	body   []byte
	method string
}

type receiver struct {
	mu    sync.Mutex
	calls []call
	reply func(n int, w http.ResponseWriter)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.calls = append(rc.calls, call{header: r.Header.Clone(), body: b, method: r.Method})
	n := len(rc.calls)
	rc.mu.Unlock()
	rc.reply(n, w)
}

func (rc *receiver) get(i int) call {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.calls[i]
}

type env struct {
	t      *testing.T
	st     *store.Store
	client *job.Client
}

// start runs a worker with the http kind; allow opens destinations (the
// test receivers on loopback, which the guard refuses by default).
func start(t *testing.T, secret string, allow ...string) *env {
	t.Helper()
	st := pgtest.NewStore(t)
	reg := job.NewRegistry()
	h, err := webhook.New(context.Background(), webhook.Config{Secret: secret, DefaultTimeout: 2 * time.Second, Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(reg)
	w, err := job.NewWorker(job.WorkerConfig{Store: st, Registry: reg, NodeID: "n", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return &env{t: t, st: st, client: job.NewClient(st, nil)}
}

func (e *env) enqueue(args map[string]any) *job.Job {
	e.t.Helper()
	raw, _ := json.Marshal(args)
	res, err := e.client.Enqueue(context.Background(), job.Request{Kind: "http", Args: json.RawMessage(raw), MaxAttempts: 3})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Job
}

func (e *env) wait(id int64, cond func(*job.Job) bool) *job.Job {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, _ := e.client.Get(context.Background(), "", id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %d: %s attempt %d errors %+v", id, j.State, j.Attempt, j.Errors)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) retryNow(id int64) {
	e.st.Pool().Exec(context.Background(), `UPDATE gaffer.jobs SET run_at = now() WHERE id = $1`, id)
}

func TestSuccessSignsAndRecords(t *testing.T) {
	t.Parallel()
	rc := &receiver{reply: func(n int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := start(t, "s3cret", srv.Listener.Addr().String())
	j := e.enqueue(map[string]any{"url": srv.URL + "/hook", "body": map[string]int{"order": 7}, "headers": map[string]string{"X-Tenant": "acme"}})
	done := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
	c := rc.get(0)
	if c.method != "POST" || string(c.body) != `{"order": 7}` || c.header.Get("Content-Type") != "application/json" || c.header.Get("X-Tenant") != "acme" {
		t.Fatalf("request %s %s %v", c.method, c.body, c.header)
	}
	if c.header.Get("Idempotency-Key") != c.header.Get("Gaffer-Job-Id") || c.header.Get("Gaffer-Attempt") != "1" {
		t.Fatalf("headers %v", c.header)
	}
	if c.header.Get("Gaffer-Signature") != webhook.Sign("s3cret", c.body) {
		t.Fatalf("signature %q does not verify", c.header.Get("Gaffer-Signature"))
	}
	var res webhook.Result
	json.Unmarshal(done.Result, &res)
	if res.Status != 200 || string(res.Body) != `{"ok": true}` {
		t.Fatalf("result %s", done.Result)
	}
}

func TestRetryPermanentAndRetryAfter(t *testing.T) {
	t.Parallel()
	rc := &receiver{reply: func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(503) // retried
		case 2:
			w.Write([]byte("ok")) // then succeeds
		}
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	// Loopback is refused by default; the receivers here are opened by
	// the one CIDR.
	e := start(t, "", "127.0.0.0/8")
	j := e.enqueue(map[string]any{"url": srv.URL, "method": "put"})
	e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Retrying })
	e.retryNow(j.ID)
	done := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
	first, second := rc.get(0), rc.get(1)
	if first.header.Get("Idempotency-Key") != second.header.Get("Idempotency-Key") || second.header.Get("Gaffer-Attempt") != "2" || second.method != "PUT" {
		t.Fatalf("retry headers %v / %v", first.header, second.header)
	}
	if first.header.Get("Gaffer-Signature") != "" {
		t.Fatal("signed without a secret")
	}
	var res webhook.Result
	json.Unmarshal(done.Result, &res)
	if string(res.Body) != `"ok"` {
		t.Fatalf("non-JSON body kept as %s", res.Body)
	}

	// 4xx other than 429: failed for good on the first attempt.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }))
	defer bad.Close()
	j2 := e.enqueue(map[string]any{"url": bad.URL})
	f := e.wait(j2.ID, func(x *job.Job) bool { return x.State == job.Failed })
	if f.Attempt != 1 {
		t.Fatalf("404 retried: attempt %d", f.Attempt)
	}

	// 429 with Retry-After: retrying, due then.
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(429)
	}))
	defer limited.Close()
	j3 := e.enqueue(map[string]any{"url": limited.URL})
	r := e.wait(j3.ID, func(x *job.Job) bool { return x.State == job.Retrying })
	if d := r.RunAt.Sub(*r.AttemptedAt); d < 119*time.Second || d > 125*time.Second {
		t.Fatalf("429 Retry-After 120: due %s after the attempt", d)
	}
}

func TestTimeoutRetries(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	e := start(t, "", slow.Listener.Addr().String())
	j := e.enqueue(map[string]any{"url": slow.URL, "timeout": "200ms"})
	r := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Retrying })
	if len(r.Errors) != 1 || r.Errors[0].Error == "" {
		t.Fatalf("errors %+v", r.Errors)
	}
	t.Logf("timeout recorded as: %s", r.Errors[0].Error)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	h, err := webhook.New(context.Background(), webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, field string }{
		{`{}`, "args.url"},
		{`{"url":"ftp://x"}`, "args.url"},
		{`{"url":"/relative"}`, "args.url"},
		{`{"url":"http://x:0/"}`, "args.url"},
		{`{"url":"http://x:70000/"}`, "args.url"},
		{`{"url":"http://x","method":"BREW"}`, "args.method"},
		{`{"url":"http://x","headers":{"Idempotency-Key":"mine"}}`, "args.headers"},
		{`{"url":"http://x","timeout":"forever"}`, "args.timeout"},
		{`{"url":"http://x","retries":3}`, "args"},
		{`[1]`, "args"},
	} {
		_, _, err := h.Validate(json.RawMessage(c.args))
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("Validate(%s) = %v, want a %s error", c.args, err, c.field)
		}
	}
	if _, _, err := h.Validate(json.RawMessage(`{"url":"https://example.com/x","method":"get","timeout":"5s"}`)); err != nil {
		t.Fatal(err)
	}
	// A malformed URL is not repeated with its secrets.
	_, _, err = h.Validate(json.RawMessage(`{"url":"ftp://bob:hunter2@x/?key=s3cret"}`))
	if err == nil || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Validate of a bad URL with secrets: %v", err)
	}
}

// Literal internal destinations are refused where the job enters, in every
// spelling a resolver might accept; names are left for dial time.
func TestValidateRefusesLiteralDestinations(t *testing.T) {
	t.Parallel()
	h, err := webhook.New(context.Background(), webhook.Config{Allow: []string{"127.0.0.1:9000"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"http://127.0.0.1:8080/metrics", "http://localhost:2379/v3/kv/range", "http://api.localhost/", "http://[::1]:8080/",
		"http://[::ffff:127.0.0.1]/", "http://0.0.0.0:8080/", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/",
		"http://192.168.1.1/", "http://[fe80::1%25eth0]/", "http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/",
		"http://127.1/", "http://１２７.０.０.１/", "http://127.0.0.1:9001/",
	} {
		_, _, err := h.Validate(json.RawMessage(fmt.Sprintf(`{"url":%q}`, u)))
		var de *webhook.DestinationError
		if !errors.As(err, &de) || de.Field != "args.url" {
			t.Errorf("Validate(%s) = %v, want a DestinationError on args.url", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9000/hook", "https://example.com/", "http://hooks.internal/", "http://203.0.113.7/"} {
		if _, _, err := h.Validate(json.RawMessage(fmt.Sprintf(`{"url":%q}`, u))); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", u, err)
		}
	}
}
