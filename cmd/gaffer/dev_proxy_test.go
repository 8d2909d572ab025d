package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeDevNodes serves one handler per dev node on loopback, as the nodes
// of a devCluster, for the proxy's unit tests (the dev tests run real
// node processes).
func fakeDevNodes(t *testing.T, handlers ...http.HandlerFunc) (*devCluster, []*httptest.Server) {
	t.Helper()
	cl := &devCluster{}
	var servers []*httptest.Server
	for i, h := range handlers {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		n := &devNode{name: "dev-" + string(rune('1'+i)), addr: strings.TrimPrefix(s.URL, "http://"), done: make(chan struct{})}
		n.answers.Store(true)
		cl.nodes = append(cl.nodes, n)
		servers = append(servers, s)
	}
	return cl, servers
}

// A node whose node has stopped answers 503, marked, without touching the
// request (its HTTP server is closing): dev sends the request, body and
// all, to the next node. A node whose port refuses (killed) is passed
// over too. Before, the client got the 503 "node dev-1 has stopped".
func TestDevProxySendsOnFromAStoppedNode(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	cl, servers := fakeDevNodes(t,
		func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // as a stopped node does
			w.Header().Set(nodeStoppedHeader, "dev-1")
			http.Error(w, "node dev-1 has stopped", http.StatusServiceUnavailable)
		},
		func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, r.Method+" "+string(b))
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		},
		func(w http.ResponseWriter, r *http.Request) {
			t.Errorf("dev-3 was sent %s %s: dev-2 answered", r.Method, r.URL)
		})
	h, err := newDevProxy(cl, "", nil).handler("")
	if err != nil {
		t.Fatal(err)
	}
	dev := httptest.NewServer(h)
	defer dev.Close()
	for _, body := range []string{`{"kind":"noop","args":{"n":1}}`, ""} {
		method := "POST"
		if body == "" {
			method = "GET"
		}
		req, _ := http.NewRequest(method, dev.URL+"/v1/jobs", strings.NewReader(body))
		if body == "" {
			req.Body = nil
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s through dev with dev-1 stopped: %d %s", method, resp.StatusCode, b)
		}
	}
	// dev-1 killed: its port refuses.
	servers[0].Close()
	req, _ := http.NewRequest("POST", dev.URL+"/v1/jobs", strings.NewReader(`{"kind":"noop","args":{"n":2}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST through dev with dev-1 killed: %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{`POST {"kind":"noop","args":{"n":1}}`, "GET ", `POST {"kind":"noop","args":{"n":2}}`}
	if !slices.Equal(got, want) {
		t.Fatalf("dev-2 got %q, want %q", got, want)
	}
}
