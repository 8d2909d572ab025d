package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
)

// behindProxy configures the API as if it stood behind a proxy on
// loopback (the test client's address), which names the client in
// X-Forwarded-For.
func behindProxy(c *api.Config) {
	p, err := auth.ParseTrustedProxies("127.0.0.1/32, ::1")
	if err != nil {
		panic(err)
	}
	c.TrustedProxies = p
}

// Guessing tokens from one address is cut off after a burst of failures:
// 429 rate_limited with Retry-After, before the token is even looked up,
// and also for a good token from that address; another address is not
// affected. Red without the limiter: every guess got its 401 and went on.
func TestBadTokensAreLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, behindProxy)
	attacker := []string{"X-Forwarded-For", "203.0.113.7"}
	for i := range 10 {
		e.expectProblem(e.do(fmt.Sprintf("gft_guess-number-%03d", i), "GET", "/v1/jobs", nil, attacker...), http.StatusUnauthorized, "unauthorized")
	}
	r := e.do("gft_guess-number-010", "GET", "/v1/jobs", nil, attacker...)
	e.expectProblem(r, http.StatusTooManyRequests, "rate_limited")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 6 {
		t.Fatalf("Retry-After %q, want 1-6 seconds", r.Header.Get("Retry-After"))
	}
	// A blocked address is refused before its token is checked, so even a
	// right guess learns nothing.
	e.expectProblem(e.do(e.reader, "GET", "/v1/jobs", nil, attacker...), http.StatusTooManyRequests, "rate_limited")
	// Others are served, and have their own budget.
	if r := e.do(e.reader, "GET", "/v1/jobs", nil, "X-Forwarded-For", "203.0.113.8"); r.Status != http.StatusOK {
		t.Fatalf("another address: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do("gft_an-honest-typo", "GET", "/v1/jobs", nil, "X-Forwarded-For", "203.0.113.8"), http.StatusUnauthorized, "unauthorized")
	// The proxy's own entry and the client's spoofed entries to its left
	// do not move the attacker to a fresh budget.
	e.expectProblem(e.do("gft_guess-number-011", "GET", "/v1/jobs", nil, "X-Forwarded-For", "198.51.100.1, 203.0.113.7, 127.0.0.1"), http.StatusTooManyRequests, "rate_limited")
}

// A client that is not a trusted proxy cannot choose the address its
// failures count against by sending X-Forwarded-For: without trusted
// proxies every guess below comes from the loopback peer. Red if the
// header were believed from anyone: each guess would get a fresh budget.
func TestUntrustedPeerCannotSpoofForwardedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var last response
	for i := range 11 {
		last = e.do(fmt.Sprintf("gft_guess-number-%03d", i), "GET", "/v1/jobs", nil, "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
	}
	e.expectProblem(last, http.StatusTooManyRequests, "rate_limited")
}
