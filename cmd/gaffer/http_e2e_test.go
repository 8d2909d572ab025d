package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawRequest is an HTTP/1.1 request written by hand, so that a test can
// send its body as slowly as an attacker would.
type rawRequest struct {
	method, path string
	header       map[string]string
	body         string
	// contentLength is announced; it may exceed len(body), for a body that
	// never ends.
	contentLength int
}

func (r rawRequest) head(host string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", r.method, r.path, host, r.contentLength)
	for k, v := range r.header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	return b.String()
}

// trickle sends req's head at once, then its body one byte every interval.
// It returns the connection and a channel that yields what the server sent
// once it closes the connection.
func trickle(t *testing.T, addr string, req rawRequest, interval time.Duration) (closed <-chan string, stop func()) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, req.head(addr)); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn) // until the server closes (EOF or reset)
		out <- string(b)
	}()
	quit := make(chan struct{})
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; i < req.contentLength; i++ {
			c := byte(' ')
			if i < len(req.body) {
				c = req.body[i]
			}
			if _, err := conn.Write([]byte{c}); err != nil {
				return
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once bool
	return out, func() {
		if !once {
			once = true
			close(quit)
			conn.Close()
		}
	}
}

// A client that sends its headers and then dribbles the body (slowloris)
// is cut off by --http-read-timeout, on the dashboard's sign-in form and
// on the API, instead of holding a connection and a goroutine for as long
// as it likes. Red without http.Server.ReadTimeout: the connections stay
// open until the test gives up.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	token := strings.TrimSpace(e.ok("tokens", "create", "--name", "slow", "--scopes", "jobs:write"))
	const readTimeout = 2 * time.Second
	e.env = append(e.env, "GAFFER_HTTP_READ_TIMEOUT="+readTimeout.String())
	_, base := e.server("slow-1")
	addr := strings.TrimPrefix(base, "http://")

	reqs := map[string]rawRequest{
		"/ui/login": {method: "POST", path: "/ui/login", contentLength: 10000, body: "token=",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		"/v1/jobs": {method: "POST", path: "/v1/jobs", contentLength: 10000, body: `{"kind":"noop","args":{"pad":"`,
			header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token}},
	}
	type result struct {
		path  string
		after time.Duration
		resp  string
		cut   bool
	}
	results := make(chan result, len(reqs))
	for path, req := range reqs {
		go func() {
			start := time.Now()
			closed, stop := trickle(t, addr, req, 100*time.Millisecond)
			defer stop()
			select {
			case resp := <-closed:
				results <- result{path, time.Since(start), resp, true}
			case <-time.After(readTimeout + 8*time.Second):
				results <- result{path, time.Since(start), "", false}
			}
		}()
	}
	for range reqs {
		r := <-results
		if !r.cut {
			t.Errorf("%s: a body sent a byte every 100ms still held the connection after %s (read timeout %s)", r.path, r.after.Round(time.Millisecond), readTimeout)
			continue
		}
		if r.after < readTimeout-100*time.Millisecond || r.after > readTimeout+4*time.Second {
			t.Errorf("%s: cut off after %s, want about the read timeout %s; server sent %q", r.path, r.after.Round(time.Millisecond), readTimeout, r.resp)
		}
		if strings.Contains(r.resp, " 201 ") || strings.Contains(r.resp, " 303 ") {
			t.Errorf("%s: the truncated request was accepted: %q", r.path, r.resp)
		}
	}
	// The node still serves everyone else.
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz after the slow clients: %v %v", resp, err)
	}
	resp.Body.Close()
}

// A request header larger than 64 KiB is refused with 431 rather than read
// (Go's default would read up to 1 MiB per connection).
func TestHugeHeaderIsRefused(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	_, base := e.server("hdr-1")
	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 100<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 100 KiB header: %d, want 431", resp.StatusCode)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 8<<10))
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("an 8 KiB header: %v %v", resp, err)
	}
	resp.Body.Close()
}

// SIGTERM (server) and SIGINT (dev, Ctrl-C) stop the HTTP server
// gracefully: a request in flight when the signal lands — here an enqueue
// whose body is still arriving — completes with 201, the listener stops
// accepting at once, the node claims nothing more, and the process then
// drains and exits 0. Red with the old `defer srv.Close()`: the node
// stopped first (closing its pool) and the connection was cut, so the
// request failed; red without SetClaiming(false) at the signal: the node
// ran the job enqueued while its HTTP server was stopping.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"server", syscall.SIGTERM}, {"dev", syscall.SIGINT}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			e.ok("migrate", "up")
			var proc *serverProc
			var base, token string
			if c.name == "server" {
				token = strings.TrimSpace(e.ok("tokens", "create", "--name", "graceful", "--scopes", "jobs:write"))
				proc, base = e.server("graceful-1")
			} else {
				token = "gft_graceful-dev-token-0123456789"
				addr := freeAddr(t)
				proc, base = e.start("graceful-dev", addr, "dev", "--addr", addr, "--token", token, "--drain-timeout", "5s")
			}
			addr := strings.TrimPrefix(base, "http://")
			body := `{"kind":"noop","args":{"graceful":true}}`
			req := rawRequest{method: "POST", path: "/v1/jobs", body: body, contentLength: len(body),
				header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token, "Connection": "close"}}
			// The body takes about 2s to arrive; the signal lands after 300ms.
			closed, stop := trickle(t, addr, req, 50*time.Millisecond)
			defer stop()
			time.Sleep(300 * time.Millisecond)
			if err := proc.process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			// New connections are refused while the request finishes.
			refused := make(chan error, 1)
			go func() {
				deadline := time.Now().Add(1500 * time.Millisecond)
				for time.Now().Before(deadline) {
					conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
					if err != nil {
						refused <- nil
						return
					}
					conn.Close()
					time.Sleep(20 * time.Millisecond)
				}
				refused <- errors.New("the listener still accepted connections 1.5s after the signal")
			}()
			var raw string
			select {
			case raw = <-closed:
			case <-time.After(20 * time.Second):
				t.Fatal("no answer to the in-flight request 20s after the signal")
			}
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
			if err != nil {
				t.Fatalf("the request in flight at the signal got no answer (%v): %q", err, raw)
			}
			if resp.StatusCode != http.StatusCreated {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("the request in flight at the signal: %d %s", resp.StatusCode, b)
			}
			if err := <-refused; err != nil {
				t.Error(err)
			}
			if err := waitExit(proc, 20*time.Second); err != nil {
				t.Fatalf("after the signal: %v", err)
			}
			if n := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE args->>'graceful' = 'true'`); n != "1" {
				t.Fatalf("%s jobs enqueued by the request in flight, want 1", n)
			}
			// The node claimed nothing from the signal on (G6): the job
			// waits for another node.
			if s := e.scalar(`SELECT state FROM gaffer.jobs WHERE args->>'graceful' = 'true'`); s != "pending" {
				t.Fatalf("the job enqueued after the signal is %s, want pending: the stopping node claimed it", s)
			}
		})
	}
}

// The graceful stop is bounded: a request that would outlast
// --shutdown-timeout is cut off at it, then the node drains for at most
// --drain-timeout (a job still running then is released), and the
// process exits 0 within the sum of the two. Red with an unbounded
// srv.Shutdown: the process waits on the slow request until
// --http-read-timeout (30s) cuts it.
func TestGracefulStopIsBounded(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	token := strings.TrimSpace(e.ok("tokens", "create", "--name", "bounded", "--scopes", "jobs:write,jobs:read"))
	// A webhook that answers only when the test ends: the job calling it
	// runs until the drain deadline releases it.
	called := make(chan struct{}, 1)
	hang := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer hook.Close()
	defer close(hang)
	const shutdownTimeout, drainTimeout = 2 * time.Second, 2 * time.Second
	proc, base := e.server("bounded-1", "--webhook-allow", strings.TrimPrefix(hook.URL, "http://"),
		"--shutdown-timeout", shutdownTimeout.String(), "--drain-timeout", drainTimeout.String())
	e.env = append(e.env, "GAFFER_URL="+base, "GAFFER_TOKEN="+token)
	var enq struct {
		Job struct {
			ID int64 `json:"id"`
		} `json:"job"`
	}
	e.jsonOK(&enq, "jobs", "enqueue", "--kind", "http", "--args", fmt.Sprintf(`{"url":%q,"timeout":"5m"}`, hook.URL))
	select {
	case <-called:
	case <-time.After(20 * time.Second):
		t.Fatal("the http job never called its webhook")
	}
	// An enqueue whose body would take 1000s to arrive.
	addr := strings.TrimPrefix(base, "http://")
	req := rawRequest{method: "POST", path: "/v1/jobs", contentLength: 10000, body: `{"kind":"noop","args":{"pad":"`,
		header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token}}
	closed, stop := trickle(t, addr, req, 100*time.Millisecond)
	defer stop()
	time.Sleep(300 * time.Millisecond)
	signalled := time.Now()
	if err := proc.process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	bound := shutdownTimeout + drainTimeout
	if err := waitExit(proc, bound+10*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	took := time.Since(signalled)
	t.Logf("exited %s after SIGTERM (--shutdown-timeout %s + --drain-timeout %s)", took.Round(time.Millisecond), shutdownTimeout, drainTimeout)
	// Each phase ran to its deadline (the request and the job outlast
	// both), and no longer.
	if took < bound-200*time.Millisecond || took > bound+3*time.Second {
		t.Errorf("exited %s after SIGTERM, want about %s", took.Round(time.Millisecond), bound)
	}
	select {
	case raw := <-closed:
		if strings.Contains(raw, " 201 ") {
			t.Errorf("the request cut off at the shutdown timeout was accepted: %q", raw)
		}
	case <-time.After(5 * time.Second):
		t.Error("the slow request's connection is still open after the process exited")
	}
	if s := e.scalar(`SELECT state FROM gaffer.jobs WHERE id = $1`, enq.Job.ID); s != "pending" {
		t.Errorf("the job running at the drain deadline is %s, want pending (released for another node)", s)
	}
}
