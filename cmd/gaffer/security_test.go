package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
)

// The attacks below send traffic to loopback only: the cluster's own
// API, etcd and PostgreSQL run there, and so do the stand-ins.

// etcdKV calls etcd's JSON gateway, as an attacker's http job would.
func etcdKV(t *testing.T, endpoint, op string, req map[string]string) map[string]any {
	t.Helper()
	body := map[string]string{}
	for k, v := range req {
		body[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	b, _ := json.Marshal(body)
	resp, err := http.Post(endpoint+"/v3/kv/"+op, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("etcd %s: %d %v", op, resp.StatusCode, err)
	}
	return out
}

// etcdKeys maps every key in etcd to its create revision: a key deleted
// (and re-created by its owner) shows up as a change.
func etcdKeys(t *testing.T, endpoint string) map[string]string {
	t.Helper()
	out := map[string]string{}
	kvs, _ := etcdKV(t, endpoint, "range", map[string]string{"key": "\x00", "range_end": "\x00"})["kvs"].([]any)
	for _, kv := range kvs {
		m := kv.(map[string]any)
		k, _ := base64.StdEncoding.DecodeString(m["key"].(string))
		v, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m["value"]))
		out[string(k)] = fmt.Sprint(m["create_revision"])
		if string(k) == "/canary" {
			out[string(k)] += "=" + string(v)
		}
	}
	return out
}

type enqueued struct {
	status      int
	code, field string
	id          int64
}

// enqueueHTTP posts an http job with a tenant's token.
func enqueueHTTP(t *testing.T, base, token, queue, target string) enqueued {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"url": target, "body": map[string]string{"key": "Lw==", "range_end": "AA==", "value": "cHduZWQ="}})
	req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(fmt.Sprintf(`{"kind":"http","queue":%q,"args":%s}`, queue, args)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Code, Field string
		Job         struct{ ID int64 }
	}
	json.NewDecoder(resp.Body).Decode(&out)
	return enqueued{resp.StatusCode, out.Code, out.Field, out.Job.ID}
}

// A tenant token with only jobs:write aims http jobs at the node's own
// /metrics, at the embedded etcd's gateway and at PostgreSQL: literal
// addresses are refused at the door; reached through a redirect from a
// receiver the operator allowed, each fails destination_blocked after one
// attempt without a request reaching the target; etcd is unchanged.
func TestTenantCannotReachClusterInternals(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	tenant := strings.TrimSpace(e.ok("tokens", "create", "--name", "attacker", "--tenant", "acme", "--scopes", "jobs:write"))
	etcdKV(t, e.etcd, "put", map[string]string{"key": "/canary", "value": "still here"})

	var internalHits atomic.Int32
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		internalHits.Add(1)
		fmt.Fprintln(w, "internal secrets")
	}))
	defer internal.Close()
	// The receiver the operator allowed; the tenant controls where it
	// redirects (307 keeps the method).
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			return
		}
		io.Copy(io.Discard, r.Body)
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	defer receiver.Close()
	recvHost := strings.TrimPrefix(receiver.URL, "http://")

	_, base := e.server("sec-1", "--webhook-allow", recvHost)
	e.waitSQL("registered", `SELECT count(*) FROM gaffer.nodes WHERE id = 'sec-1'`, "1")
	before := etcdKeys(t, e.etcd)
	pg, err := url.Parse(e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	apiPort := base[strings.LastIndex(base, ":")+1:]
	targets := []string{
		base + "/metrics",
		e.etcd + "/v3/kv/range", e.etcd + "/v3/kv/put", e.etcd + "/v3/kv/deleterange",
		"http://" + pg.Host + "/",
		internal.URL + "/",
	}

	// At the door: every literal spelling of loopback.
	literal := append(append([]string{}, targets...),
		"http://localhost:"+apiPort+"/metrics", "http://[::1]:"+apiPort+"/metrics", "http://127.1:"+apiPort+"/metrics",
		"http://2130706433:"+apiPort+"/metrics", "http://0x7f.1:"+apiPort+"/metrics", "http://0.0.0.0:"+apiPort+"/metrics")
	for _, target := range literal {
		if r := enqueueHTTP(t, base, tenant, "default", target); r.status != 400 || r.code != "destination_not_allowed" || r.field != "args.url" {
			t.Errorf("enqueue at %s: %+v, want 400 destination_not_allowed on args.url", target, r)
		}
	}
	if n := e.scalar(`SELECT count(*) FROM gaffer.jobs`); n != "0" {
		t.Fatalf("%s jobs written by refused enqueues", n)
	}

	// Past the door, through the allowed receiver's redirect: refused
	// where the connection would be made.
	for _, target := range targets {
		r := enqueueHTTP(t, base, tenant, "default", receiver.URL+"/hook?to="+url.QueryEscape(target))
		if r.status != 201 {
			t.Fatalf("enqueue via the receiver: %+v", r)
		}
		e.waitSQL("blocked at "+target, `SELECT state || ' ' || attempt || ' ' || (errors->0->>'kind') FROM gaffer.jobs WHERE id = $1`,
			"failed 1 destination_blocked", r.id)
	}
	if n := internalHits.Load(); n != 0 {
		t.Fatalf("%d requests reached the internal stand-in", n)
	}
	// The allowed receiver itself is called.
	r := enqueueHTTP(t, base, tenant, "default", receiver.URL+"/hook")
	e.waitSQL("the allowed receiver is called", `SELECT state FROM gaffer.jobs WHERE id = $1`, "completed", r.id)

	// An operator who opens all of loopback (as gaffer dev does) still
	// does not open the node's own API — here listening on every
	// interface, as the default --addr :8080 does — nor PostgreSQL or etcd.
	port := freeAddr(t)[len("127.0.0.1:"):]
	_, base2 := e.serverListening("sec-2", ":"+port, "127.0.0.1:"+port, "--webhook-allow", "127.0.0.0/8", "--queues", "open=4")
	for _, target := range []string{base2 + "/metrics", "http://localhost:" + port + "/metrics", e.etcd + "/v3/kv/deleterange", "http://" + pg.Host + "/"} {
		if r := enqueueHTTP(t, base2, tenant, "open", target); r.status != 400 || r.code != "destination_not_allowed" {
			t.Errorf("loopback open: enqueue at %s: %+v, want 400 destination_not_allowed", target, r)
		}
	}
	r = enqueueHTTP(t, base2, tenant, "open", internal.URL+"/opened")
	e.waitSQL("an opened loopback receiver is called", `SELECT state FROM gaffer.jobs WHERE id = $1`, "completed", r.id)

	after := etcdKeys(t, e.etcd)
	if fmt.Sprint(after["/canary"]) != fmt.Sprint(before["/canary"]) {
		t.Fatalf("the canary key changed: %q → %q", before["/canary"], after["/canary"])
	}
	for k, rev := range before {
		if after[k] != rev {
			t.Errorf("etcd key %q: %q → %q", k, rev, after[k])
		}
	}
}

// gaffer dev opens loopback, so a receiver on the developer's machine
// works, and says so; its own API, PostgreSQL and etcd stay refused.
func TestDevOpensLoopbackButNotItself(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	addr := freeAddr(t)
	token := "dev-token-for-the-security-test"
	banner := startDev(t, []string{"DATABASE_URL=" + dbURL}, "--addr", addr, "--token", token).out.String()
	if !strings.Contains(banner, "outbound:  http jobs may call loopback (127.0.0.0/8, ::1)") || !strings.Contains(banner, "own API, PostgreSQL and etcd ports stay refused") {
		t.Fatalf("the banner does not say what dev opens:\n%s", banner)
	}
	etcd := ""
	for _, line := range strings.Split(banner, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd:"); ok {
			etcd = strings.TrimSpace(v)
		}
	}
	pg, err := url.Parse(dbURL)
	if err != nil || etcd == "" {
		t.Fatalf("db %q (%v), etcd %q", dbURL, err, etcd)
	}
	base := "http://" + addr

	var hits atomic.Int32
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	defer local.Close()
	r := enqueueHTTP(t, base, token, "default", local.URL+"/hook")
	if r.status != 201 {
		t.Fatalf("a local receiver: %+v", r)
	}
	for _, target := range []string{base + "/metrics", "http://localhost" + addr[strings.LastIndex(addr, ":"):] + "/metrics",
		etcd + "/v3/kv/deleterange", "http://" + pg.Host + "/"} {
		if r := enqueueHTTP(t, base, token, "default", target); r.status != 400 || r.code != "destination_not_allowed" {
			t.Errorf("dev: enqueue at %s: %+v, want 400 destination_not_allowed", target, r)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for hits.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the local receiver was never called")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// forward listens on listen and passes each connection to target, as a
// service bound to every interface answers on each address of the
// machine; it counts the connections it accepts.
func forward(t *testing.T, listen, target string) *atomic.Int32 {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("listen on %s: %v", listen, err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go io.Copy(s, c)
				io.Copy(c, s)
			}()
		}
	}()
	return &accepted
}

// etcd, PostgreSQL and the node's API also answer on 127.0.0.2 (as
// services bound to every interface do), and the operator opens all of
// loopback for a local receiver: a tenant's http job to 127.0.0.2 on
// any of their ports is refused at the door, and through a redirect from
// the allowed receiver it fails destination_blocked when dialled —
// nothing reaches them there, while the receiver itself is called.
func TestTenantCannotReachClusterOnAnotherLoopbackAddress(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	tenant := strings.TrimSpace(e.ok("tokens", "create", "--name", "attacker", "--tenant", "acme", "--scopes", "jobs:write"))
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprintln(w, `{"ok":true}`)
	}))
	defer receiver.Close()
	_, base := e.server("own-1", "--webhook-allow", "127.0.0.0/8", "--queues", "default=4")
	e.waitSQL("registered", `SELECT count(*) FROM gaffer.nodes WHERE id = 'own-1'`, "1")

	pg, err := url.Parse(e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	var reached []*atomic.Int32
	for _, hostPort := range []string{strings.TrimPrefix(e.etcd, "http://"), pg.Host, strings.TrimPrefix(base, "http://")} {
		_, port, err := net.SplitHostPort(hostPort)
		if err != nil {
			t.Fatal(err)
		}
		reached = append(reached, forward(t, "127.0.0.2:"+port, hostPort))
		targets = append(targets, "http://127.0.0.2:"+port+"/version")
	}
	// The stand-ins do reach the services: what the guard refuses is real.
	if resp, err := http.Get(targets[0]); err != nil || resp.StatusCode != 200 {
		t.Fatalf("etcd through 127.0.0.2: %v", err)
	} else {
		resp.Body.Close()
	}
	before := make([]int32, len(reached))
	for i, n := range reached {
		before[i] = n.Load()
	}

	for _, target := range targets {
		if r := enqueueHTTP(t, base, tenant, "default", target); r.status != 400 || r.code != "destination_not_allowed" || r.field != "args.url" {
			t.Errorf("enqueue at %s: %+v, want 400 destination_not_allowed on args.url", target, r)
		}
		r := enqueueHTTP(t, base, tenant, "default", receiver.URL+"/hook?to="+url.QueryEscape(target))
		if r.status != 201 {
			t.Fatalf("enqueue via the receiver: %+v", r)
		}
		const outcome = `SELECT state || ' ' || attempt || ' ' || coalesce(errors->0->>'kind', left(result::text, 80)) FROM gaffer.jobs WHERE id = $1`
		e.waitSQL("blocked at "+target+" through a redirect", outcome, "failed 1 destination_blocked", r.id)
	}
	r := enqueueHTTP(t, base, tenant, "default", receiver.URL+"/hook")
	e.waitSQL("the allowed receiver is called", `SELECT state FROM gaffer.jobs WHERE id = $1`, "completed", r.id)
	for i, n := range reached {
		if got := n.Load() - before[i]; got != 0 {
			t.Errorf("%d connections reached %s", got, targets[i])
		}
	}
}
