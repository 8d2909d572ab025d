package main

import (
	"net/http"
	"strings"
	"testing"
)

// With --metrics-token, /metrics (which names the cluster's queues and
// kinds) answers only the bearer of that token; the health endpoints stay
// open for probes.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	_, base := e.server("metrics-1", "--metrics-token", "scrape-secret-0123")
	get := func(path, auth string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for auth, want := range map[string]int{
		"":                                401,
		"Bearer wrong":                    401,
		"Bearer scrape-secret-012":        401,
		"Basic c2NyYXBlLXNlY3JldC0wMTIz":  401,
		"Bearer scrape-secret-0123":       200,
		"Bearer scrape-secret-0123 extra": 401,
	} {
		if got := get("/metrics", auth); got != want {
			t.Errorf("/metrics with %q: %d, want %d", auth, got, want)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if got := get(path, ""); got != 200 {
			t.Errorf("%s without a token: %d", path, got)
		}
	}
	// Help goes to stdout, exit 0.
	if help, _, code := e.gaffer("server", "--help"); code != 0 || !strings.Contains(help, "GAFFER_METRICS_TOKEN") {
		t.Errorf("server --help (exit %d) does not name GAFFER_METRICS_TOKEN", code)
	}
}
