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
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/internal/clock"
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

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.calls)
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
	// secret is the default tenant's signing secret, when signed.
	secret string
	// keyClock ages the worker's cache of signing keys.
	keyClock *clock.Fake
}

// start runs a worker with the http kind; allow opens destinations (the
// test receivers on loopback, which the guard refuses by default). With
// signed, the default tenant gets a signing secret (env.secret).
func start(t *testing.T, signed bool, allow ...string) *env {
	t.Helper()
	return startTraced(t, signed, nil, allow...)
}

// startTraced is start with a worker whose attempts are spans of tp (nil:
// the global provider).
func startTraced(t *testing.T, signed bool, tp trace.TracerProvider, allow ...string) *env {
	t.Helper()
	st := pgtest.NewStore(t)
	reg := job.NewRegistry()
	h, err := webhook.New(context.Background(), webhook.Config{DefaultTimeout: 2 * time.Second, Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	secrets := webhook.NewSecrets(st.Pool())
	keyClock := clock.NewFake(time.Now())
	secrets.SetClock(keyClock)
	h.SetSecrets(secrets)
	var secret string
	if signed {
		if _, secret, err = secrets.Rotate(context.Background(), "default", 0); err != nil {
			t.Fatal(err)
		}
	}
	h.Register(reg)
	w, err := job.NewWorker(job.WorkerConfig{Pool: st.Pool(), Registry: reg, NodeID: "n", PollInterval: 50 * time.Millisecond,
		TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return &env{t: t, st: st, client: job.NewClient(st.Pool(), nil), secret: secret, keyClock: keyClock}
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

// The body is sent as it was enqueued, byte for byte, and the signature
// covers those bytes: a receiver that hashes or verifies it sees what the
// sender wrote.
func TestBodySentAsEnqueued(t *testing.T) {
	t.Parallel()
	rc := &receiver{reply: func(n int, w http.ResponseWriter) { w.WriteHeader(204) }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := start(t, true, srv.Listener.Addr().String())
	const body = `{"z":1.50, "a" : [1e3,"<&>"],"u":"\u00e9"}`
	res, err := e.client.Enqueue(context.Background(), job.Request{Kind: "http",
		Args: json.RawMessage(`{"url":"` + srv.URL + `/hook","body":` + body + `}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.wait(res.Job.ID, func(x *job.Job) bool { return x.State == job.Completed })
	c := rc.get(0)
	if string(c.body) != body {
		t.Fatalf("sent %s, want %s", c.body, body)
	}
	if _, err := (webhook.Verifier{Secrets: []string{e.secret}}).Verify(c.header, []byte(body)); err != nil {
		t.Fatalf("the signature does not cover the body as enqueued: %v", err)
	}
}

func TestSuccessSignsAndRecords(t *testing.T) {
	t.Parallel()
	rc := &receiver{reply: func(n int, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := start(t, true, srv.Listener.Addr().String())
	j := e.enqueue(map[string]any{"url": srv.URL + "/hook", "body": map[string]int{"order": 7}, "headers": map[string]string{"X-Tenant": "acme"}})
	done := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
	c := rc.get(0)
	if c.method != "POST" || string(c.body) != `{"order":7}` || c.header.Get("Content-Type") != "application/json" || c.header.Get("X-Tenant") != "acme" {
		t.Fatalf("request %s %s %v", c.method, c.body, c.header)
	}
	if c.header.Get("Idempotency-Key") != c.header.Get("Gaffer-Job-Id") || c.header.Get("Gaffer-Attempt") != "1" {
		t.Fatalf("headers %v", c.header)
	}
	if id, err := (webhook.Verifier{Secrets: []string{e.secret}}).Verify(c.header, c.body); err != nil || id != webhook.MessageID(j.ID) {
		t.Fatalf("delivery does not verify: %v (id %q); headers %v", err, id, c.header)
	}
	var res webhook.Result
	json.Unmarshal(done.Result, &res)
	if res.Status != 200 || string(res.Body) != `{"ok":true}` {
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
	e := start(t, false, "127.0.0.0/8")
	j := e.enqueue(map[string]any{"url": srv.URL, "method": "put"})
	e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Retrying })
	e.retryNow(j.ID)
	done := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
	first, second := rc.get(0), rc.get(1)
	if first.header.Get("Idempotency-Key") != second.header.Get("Idempotency-Key") || second.header.Get("Gaffer-Attempt") != "2" || second.method != "PUT" {
		t.Fatalf("retry headers %v / %v", first.header, second.header)
	}
	if first.header.Get("Webhook-Signature") != "" {
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
	e := start(t, false, slow.Listener.Addr().String())
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

// Each delivery is signed with its own tenant's secret: tenant acme's job,
// aimed at globex's receiver, does not verify there (a tenant cannot have
// the cluster sign for another). A rotation signs with both secrets until
// the old one is deleted.
func TestDeliveriesAreSignedWithTheirTenantsSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := &receiver{reply: func(n int, w http.ResponseWriter) {}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	e := start(t, false, srv.Listener.Addr().String())
	secrets := webhook.NewSecrets(e.st.Pool())
	_, acme, err := secrets.Rotate(ctx, "acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, globex, err := secrets.Rotate(ctx, "globex", 0)
	if err != nil {
		t.Fatal(err)
	}
	send := func(tenant string) call {
		t.Helper()
		n := rc.count()
		res, err := e.client.Enqueue(ctx, job.Request{Kind: "http", Tenant: tenant, Args: map[string]any{"url": srv.URL, "body": map[string]string{"pay": "globex"}}})
		if err != nil {
			t.Fatal(err)
		}
		e.wait(res.Job.ID, func(x *job.Job) bool { return x.State == job.Completed })
		return rc.get(n)
	}
	c := send("acme")
	if _, err := (webhook.Verifier{Secrets: []string{globex}}).Verify(c.header, c.body); !errors.Is(err, webhook.ErrBadSignature) {
		t.Fatalf("acme's delivery verified with globex's secret: %v", err)
	}
	if _, err := (webhook.Verifier{Secrets: []string{acme}}).Verify(c.header, c.body); err != nil {
		t.Fatalf("acme's delivery does not verify with acme's secret: %v", err)
	}
	// A tenant with no secret gets unsigned deliveries, never another's.
	if c := send("initech"); c.header.Get(webhook.HeaderSignature) != "" || c.header.Get(webhook.HeaderID) == "" {
		t.Fatalf("a tenant without a secret: signature %q id %q", c.header.Get(webhook.HeaderSignature), c.header.Get(webhook.HeaderID))
	}

	// Rotation. The sender caches keys for KeyCacheFor; a new Secrets
	// on the worker side is not needed: Rotate forgets its own cache, and
	// the worker's Secrets is another instance, so its cache is aged out
	// (on its clock).
	old, _ := secrets.List(ctx, "acme")
	_, acme2, err := secrets.Rotate(ctx, "acme", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.keyClock.Advance(webhook.KeyCacheFor)
	if c = send("acme"); len(strings.Fields(c.header.Get(webhook.HeaderSignature))) != 2 {
		t.Fatalf("no second signature %s after the rotation: %q", webhook.KeyCacheFor, c.header.Get(webhook.HeaderSignature))
	}
	for _, s := range []string{acme, acme2} {
		if _, err := (webhook.Verifier{Secrets: []string{s}}).Verify(c.header, c.body); err != nil {
			t.Fatalf("during the rotation, a receiver with one secret refuses: %v", err)
		}
	}
	if err := secrets.Delete(ctx, "acme", old[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := secrets.Delete(ctx, "globex", old[0].ID); !errors.Is(err, webhook.ErrSecretNotFound) {
		t.Fatalf("deleting acme's secret as globex: %v", err)
	}
	e.keyClock.Advance(webhook.KeyCacheFor)
	if c = send("acme"); len(strings.Fields(c.header.Get(webhook.HeaderSignature))) != 1 {
		t.Fatalf("the deleted secret still signs %s after its deletion: %q", webhook.KeyCacheFor, c.header.Get(webhook.HeaderSignature))
	}
	if _, err := (webhook.Verifier{Secrets: []string{acme}}).Verify(c.header, c.body); err == nil {
		t.Fatal("the deleted secret still verifies")
	}
	// At most MaxLiveSecrets live secrets a tenant.
	for range webhook.MaxLiveSecrets {
		_, _, err = secrets.Rotate(ctx, "busy", time.Hour)
	}
	if _, _, err := secrets.Rotate(ctx, "busy", time.Hour); !errors.Is(err, webhook.ErrTooManySecrets) {
		t.Fatalf("rotation past the limit: %v", err)
	}
}

// Header values the job marks secret (and Authorization, Cookie,
// X-Api-Key always) are not stored in its result when the receiver
// echoes them back.
func TestSecretHeadersAreNotStored(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"auth": r.Header.Get("Authorization"), "key": r.Header.Get("X-Signing-Key"), "plain": r.Header.Get("X-Plain")})
	}))
	defer echo.Close()
	e := start(t, false, echo.Listener.Addr().String())
	j := e.enqueue(map[string]any{"url": echo.URL, "headers": map[string]string{
		"Authorization": "Bearer tok-very-secret-123", "X-Signing-Key": "k3y-material-xyz", "X-Plain": "visible-value"},
		"secret_headers": []string{"X-Signing-Key"}})
	done := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
	res := string(done.Result)
	for _, secret := range []string{"tok-very-secret-123", "k3y-material-xyz"} {
		if strings.Contains(res, secret) {
			t.Errorf("result stores %q: %s", secret, res)
		}
	}
	if !strings.Contains(res, "visible-value") || !strings.Contains(res, "[redacted]") {
		t.Fatalf("result %s", res)
	}
}

// By default at most 10 http jobs run at once per destination host (the
// http-per-host limit): a slow receiver holds at most 10 slots, and a job
// for another host runs meanwhile.
func TestHTTPPerHostLimitByDefault(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int64
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		inFlight.Add(-1)
	}))
	defer slow.Close()
	defer close(release)
	var other atomic.Int64
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.Add(1) }))
	defer fast.Close()
	_, fastPort, _ := strings.Cut(fast.Listener.Addr().String(), ":")
	st := pgtest.NewStore(t)
	reg := job.NewRegistry()
	h, err := webhook.New(context.Background(), webhook.Config{DefaultTimeout: 30 * time.Second,
		Allow: []string{slow.Listener.Addr().String(), "localhost:" + fastPort}})
	if err != nil {
		t.Fatal(err)
	}
	h.Register(reg)
	w, err := job.NewWorker(job.WorkerConfig{Pool: st.Pool(), Registry: reg, NodeID: "n", PollInterval: 50 * time.Millisecond,
		Queues: map[string]int{"default": 30}})
	if err != nil {
		t.Fatal(err)
	}
	client := job.NewClient(st.Pool(), nil)
	ctx := context.Background()
	for range 25 {
		if _, err := client.Enqueue(ctx, job.Request{Kind: "http", Args: map[string]any{"url": slow.URL}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Start(ctx)
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		w.Stop(stop)
	})
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls in flight to the slow host", inFlight.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := client.Enqueue(ctx, job.Request{Kind: "http", Args: map[string]any{"url": "http://localhost:" + fastPort + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		j, _ := client.Get(ctx, "", res.Job.ID)
		if j.State == job.Completed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other host's job is %s while the slow host holds its 10 slots", j.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // several claims more: none may pass the limit
	if p := peak.Load(); p != 10 {
		t.Fatalf("peak %d calls at once to one host, want 10 (the default limit)", p)
	}
}
