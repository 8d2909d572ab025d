package webhook_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gafferhq/gaffer/job"
)

// Every test here sends traffic to loopback only: 127.0.0.1 stands in
// for "internal" (the node's /metrics, etcd's JSON gateway), and
// receivers that are meant to be reached are opened with an allow entry.

// recorder is a loopback server that records what reached it.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*recorded
}

type recorded struct {
	method, path string
	header       http.Header
	body         string
}

func newRecorder(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rc := &recorder{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, &recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: string(b)})
		rc.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *recorder) requests() []*recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*recorded(nil), rc.reqs...)
}

// hostPort is the receiver's 127.0.0.1:port, for an allow entry.
func (rc *recorder) hostPort() string { return strings.TrimPrefix(rc.URL, "http://") }

func (rc *recorder) port() int { return rc.Listener.Addr().(*net.TCPAddr).Port }

// failedBlocked waits for the job to fail and checks it did so at once,
// marked destination_blocked.
func (e *env) failedBlocked(id int64) *job.Job {
	e.t.Helper()
	f := e.wait(id, func(x *job.Job) bool { return x.State == job.Failed || x.State == job.Completed })
	if f.State != job.Failed || f.Attempt != 1 || len(f.Errors) != 1 || f.Errors[0].Kind != job.KindDestinationBlocked {
		e.t.Fatalf("job %d: %s after %d attempts, errors %+v; want failed at once, destination_blocked", id, f.State, f.Attempt, f.Errors)
	}
	return f
}

// A tenant aims http jobs at the node's internals on loopback — by
// address, by localhost, at etcd's gateway — enqueued past the API's
// check (as a Go program can): each job fails for good at once, and
// nothing reaches the target.
func TestInternalDestinationsBlocked(t *testing.T) {
	t.Parallel()
	internal := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "gaffer_jobs_total 42") })
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	e := start(t, false)
	urls := []string{
		internal.URL + "/metrics",
		fmt.Sprintf("http://localhost:%d/v3/kv/range", internal.port()),
		fmt.Sprintf("http://LocalHost.:%d/v3/kv/deleterange", internal.port()),
		closedURL + "/metrics",
	}
	var texts []string
	for _, u := range urls {
		j := e.enqueue(map[string]any{"url": u, "body": map[string]string{"key": "L2dhZmZlcg=="}})
		f := e.failedBlocked(j.ID)
		texts = append(texts, strings.Replace(f.Errors[0].Error, u, "URL", 1))
	}
	t.Logf("recorded as: %q", texts)
	if n := len(internal.requests()); n != 0 {
		t.Fatalf("%d requests reached the internal server", n)
	}
	// One text whatever is there: a listening port and a closed one read
	// alike, and neither says refused, EOF or a status.
	for _, txt := range texts {
		if txt != texts[0] || strings.Contains(txt, "refused") || strings.Contains(txt, "EOF") || strings.Contains(txt, "HTTP") {
			t.Fatalf("errors differ or tell what listens: %q", texts)
		}
	}
}

// A receiver that is allowed redirects to one that is not: the hop is
// refused like a direct call.
func TestRedirectToBlockedDestinationBlocked(t *testing.T) {
	t.Parallel()
	internal := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "secret metrics") })
	public := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, internal.URL+"/metrics", http.StatusFound)
	})
	e := start(t, false, public.hostPort())
	j := e.enqueue(map[string]any{"url": public.URL + "/hook"})
	f := e.failedBlocked(j.ID)
	t.Logf("recorded as: %s", f.Errors[0].Error)
	if len(public.requests()) != 1 || len(internal.requests()) != 0 {
		t.Fatalf("public saw %d requests, internal %d; want 1 and 0", len(public.requests()), len(internal.requests()))
	}
}

// Across origins the caller's headers, its body and the original URL
// stay behind; Gaffer's idempotency headers go on, its signature does not.
func TestCrossOriginRedirectDropsHeadersBodyAndReferer(t *testing.T) {
	t.Parallel()
	other := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, `{"ok":true}`) })
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusFound} {
		first := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/landed", status)
		})
		e := start(t, true, first.hostPort(), other.hostPort())
		j := e.enqueue(map[string]any{"url": first.URL + "/hook?token=abc", "method": "PUT", "body": map[string]int{"order": 7},
			"headers": map[string]string{"X-Api-Key": "k-123", "Authorization": "Bearer t-456"}})
		e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
		got := other.requests()[len(other.requests())-1]
		h := got.header
		if h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" || h.Get("Referer") != "" || h.Get("Webhook-Signature") != "" || got.body != "" || h.Get("Content-Type") != "" {
			t.Fatalf("%d to another origin carried %s %q with %v", status, got.method, got.body, h)
		}
		if h.Get("Idempotency-Key") == "" || h.Get("Gaffer-Job-Id") == "" {
			t.Fatalf("%d to another origin lost the idempotency key: %v", status, h)
		}
		want := map[int]string{http.StatusTemporaryRedirect: "PUT", http.StatusFound: "GET"}[status]
		if got.method != want {
			t.Fatalf("%d: method %s, want %s", status, got.method, want)
		}
	}
}

// On the same origin a 307 repeats the call as it was (minus a Referer);
// a 303 becomes a GET without a body.
func TestSameOriginRedirects(t *testing.T) {
	t.Parallel()
	rc := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/307":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
		case "/303":
			http.Redirect(w, r, "/final", http.StatusSeeOther)
		default:
			fmt.Fprintln(w, `{"ok":true}`)
		}
	})
	e := start(t, true, rc.hostPort())
	for path, want := range map[string]string{"/307": "POST", "/303": "GET"} {
		j := e.enqueue(map[string]any{"url": rc.URL + path, "body": map[string]int{"order": 7}, "headers": map[string]string{"X-Api-Key": "k-123"}})
		e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
		reqs := rc.requests()
		orig, got := reqs[len(reqs)-2], reqs[len(reqs)-1]
		if got.method != want || got.path != "/final" || got.header.Get("Referer") != "" || got.header.Get("X-Api-Key") != "k-123" {
			t.Fatalf("%s: hop %s %s with %v", path, got.method, got.path, got.header)
		}
		if want == "POST" && (got.body != orig.body || got.body == "" || got.header.Get("Webhook-Signature") != orig.header.Get("Webhook-Signature")) {
			t.Fatalf("307: body %q (was %q), signature %q (was %q)", got.body, orig.body, got.header.Get("Webhook-Signature"), orig.header.Get("Webhook-Signature"))
		}
		if want == "GET" && got.body != "" {
			t.Fatalf("303: body %q re-sent", got.body)
		}
	}
}

// More than five redirects fail the job for good.
func TestTooManyRedirects(t *testing.T) {
	t.Parallel()
	var rc *recorder
	rc = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("/r%d", len(rc.requests())), http.StatusFound)
	})
	e := start(t, false, rc.hostPort())
	j := e.enqueue(map[string]any{"url": rc.URL + "/r0"})
	f := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Failed || x.State == job.Retrying })
	t.Logf("recorded as: %s", f.Errors[0].Error)
	if f.State != job.Failed || f.Attempt != 1 || !strings.Contains(f.Errors[0].Error, "redirect") {
		t.Fatalf("%s after %d attempts: %+v", f.State, f.Attempt, f.Errors)
	}
	if n := len(rc.requests()); n != 6 {
		t.Fatalf("%d requests, want 6 (the call and five redirects)", n)
	}
}

// The errors a failed call records hide the URL's credentials and query
// values.
func TestErrorsRedactURLSecrets(t *testing.T) {
	t.Parallel()
	failing := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	closed := httptest.NewServer(http.NotFoundHandler())
	closedHost := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()
	internal := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	e := start(t, false, failing.hostPort(), closedHost)
	for _, c := range []struct{ host, want string }{
		{failing.hostPort(), "HTTP 500"},
		{closedHost, "connection refused"},
		{internal.hostPort(), "destination not allowed"},
	} {
		u := "http://alice:pa55word@" + c.host + "/hook?token=s3cret&sig=abc&flag"
		j := e.enqueue(map[string]any{"url": u})
		f := e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Failed || x.State == job.Retrying })
		msg := f.Errors[0].Error
		redacted := "http://alice:***@" + c.host + "/hook?token=***&sig=***&flag"
		if strings.Contains(msg, "pa55word") || strings.Contains(msg, "s3cret") || strings.Contains(msg, "abc") || !strings.Contains(msg, redacted) || !strings.Contains(msg, c.want) {
			t.Fatalf("error %q: want %q and %q, without secrets", msg, redacted, c.want)
		}
	}
}
