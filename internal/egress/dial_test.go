package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests connect to loopback only.

// The guard refuses in the dialer, before connecting: whether or not
// something listens, the error is the same and nothing is accepted.
func TestDialRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	ctx := context.Background()
	p := newPolicy(t, Config{})
	var texts []string
	for _, addr := range []string{ln.Addr().String(), fmt.Sprintf("localhost:%d", port), fmt.Sprintf("[::ffff:127.0.0.1]:%d", port),
		fmt.Sprintf("2130706433:%d", port), fmt.Sprintf("0x7f.1:%d", port), closedAddr} {
		c, err := p.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s: connected", addr)
		}
		var be *BlockedError
		if !errors.Is(err, ErrBlocked) || !errors.As(err, &be) {
			t.Fatalf("dial %s: %v, want ErrBlocked", addr, err)
		}
		if strings.Contains(err.Error(), "refused") {
			t.Fatalf("dial %s: %q tells what listens", addr, err)
		}
		texts = append(texts, be.Error())
	}
	if texts[0] != texts[len(texts)-1] {
		t.Fatalf("a listening port and a closed one give different errors: %q, %q", texts[0], texts[len(texts)-1])
	}
	if _, err := p.DialContext(ctx, "udp", ln.Addr().String()); !errors.Is(err, ErrBlocked) {
		t.Fatalf("udp dial: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the listener", n)
	}

	// Opened by an exact entry, the same address connects.
	open := newPolicy(t, Config{Allow: []string{ln.Addr().String()}})
	c, err := open.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("allowed dial: %v", err)
	}
	c.Close()
}

// The transport dials through the policy and never through a proxy: a
// proxy would be checked instead of the destination.
func TestTransportDialsThroughThePolicy(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	p := newPolicy(t, Config{})
	tr := p.Transport()
	defer tr.CloseIdleConnections()
	if tr.Proxy != nil {
		t.Fatal("the transport takes a proxy (from the environment?)")
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/metrics")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s: HTTP %d, want refused", srv.URL, resp.StatusCode)
	}
	if !errors.Is(err, ErrBlocked) || hits.Load() != 0 {
		t.Fatalf("GET %s: %v, %d hits; want ErrBlocked and none", srv.URL, err, hits.Load())
	}
	open := newPolicy(t, Config{Allow: []string{strings.TrimPrefix(srv.URL, "http://")}})
	resp, err = (&http.Client{Transport: open.Transport()}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatalf("%d hits, want 1", hits.Load())
	}
}

// A service bound to every interface (here: a stand-in for etcd on
// 127.0.0.2, the port of the etcd endpoint at 127.0.0.1) is refused
// with all of loopback opened, dialled directly and through a redirect
// from an allowed receiver, and nothing reaches it; the allowed
// receiver itself is called.
func TestOwnPortRefusedOnAnotherLoopbackAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, `{"etcdserver":"3.5"}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	target := "http://" + ln.Addr().String() + "/version"
	port := ln.Addr().(*net.TCPAddr).Port
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hook" {
			http.Redirect(w, r, target, http.StatusFound)
		}
	}))
	defer receiver.Close()

	p := newPolicy(t, Config{Allow: []string{"127.0.0.0/8", "::1"}, Own: []string{fmt.Sprintf("http://127.0.0.1:%d", port)}})
	client := &http.Client{Transport: p.Transport()}
	for _, u := range []string{target, receiver.URL + "/hook"} {
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("GET %s: HTTP %d, want refused", u, resp.StatusCode)
		} else if !errors.Is(err, ErrBlocked) {
			t.Errorf("GET %s: %v, want ErrBlocked", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the own port on 127.0.0.2", n)
	}
	resp, err := client.Get(receiver.URL + "/other")
	if err != nil {
		t.Fatalf("the allowed receiver: %v", err)
	}
	resp.Body.Close()
}
