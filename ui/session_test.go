package ui_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/ui"
)

// sessionCookie returns the gaffer_session cookie a response set, or nil.
func sessionCookie(p page) *http.Cookie {
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "gaffer_session" {
			return c
		}
	}
	return nil
}

// replay is a fresh browser that sends only the given session cookie: an
// attacker who copied it.
func (e *env) replay(c *http.Cookie) *browser {
	b := e.browser()
	u, _ := url.Parse(e.srv.URL + "/ui/")
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: c.Name, Value: c.Value, Path: "/ui/"}})
	return b
}

// The cookie holds a random session id, not the API token: a stolen
// cookie (or one read from a browser's store) does not give away the
// token, and the session can be ended on the server. Red when the cookie
// held the token itself.
func TestSessionCookieIsNotTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := e.token(auth.AllTenants, auth.ScopeAdmin)
	b := e.browser()
	p := b.post("/ui/login", url.Values{"token": {token}, "next": {"/ui/"}})
	c := sessionCookie(p)
	if p.status != http.StatusSeeOther || c == nil {
		t.Fatalf("sign-in: %d, cookie %v", p.status, c)
	}
	if strings.Contains(c.Value, token) || strings.Contains(token, c.Value) {
		t.Fatalf("the session cookie %q carries the API token", c.Value)
	}
	id, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(id) < 16 {
		t.Fatalf("session id %q: %d random bytes (%v), want at least 16 (128 bits)", c.Value, len(id), err)
	}
	// The session survives page loads.
	for _, path := range []string{"/ui/", "/ui/jobs", "/ui/queues", "/ui/"} {
		if p := b.get(path); p.status != http.StatusOK {
			t.Fatalf("GET %s with the session: %d", path, p.status)
		}
	}
	// The database holds the session hashed: neither the id nor the token
	// appears in it.
	var n int
	err = e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gaffer.ui_sessions
		WHERE position(convert_to($1, 'UTF8') in id_hash) > 0 OR position($2 in id_hash) > 0 OR position(convert_to($3, 'UTF8') in id_hash) > 0`,
		c.Value, id, token).Scan(&n)
	if err != nil || n != 0 {
		t.Fatalf("%d sessions stored with the id or token in clear (%v)", n, err)
	}
	if err := e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gaffer.ui_sessions WHERE expires_at > now() + interval '11 hours'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d sessions expiring in 12h (%v), want 1", n, err)
	}
}

// Signing out ends the session on the server: the old cookie, replayed,
// no longer signs anyone in. Red when the cookie was the token (signing
// out only asked the browser to forget it).
func TestLogoutEndsTheSessionOnTheServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := e.browser()
	p := b.post("/ui/login", url.Values{"token": {e.token(auth.AllTenants, auth.ScopeAdmin)}, "next": {"/ui/"}})
	stolen := sessionCookie(p)
	if stolen == nil {
		t.Fatalf("sign-in set no session cookie: %d", p.status)
	}
	if p := e.replay(stolen).get("/ui/"); p.status != http.StatusOK {
		t.Fatalf("the copied cookie before sign-out: %d", p.status)
	}
	p = b.post("/ui/logout", url.Values{"csrf": {b.csrf()}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", p.status)
	}
	if c := sessionCookie(p); c == nil || c.MaxAge >= 0 {
		t.Fatalf("sign-out did not delete the cookie: %v", c)
	}
	if p := e.replay(stolen).get("/ui/"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/login") {
		t.Fatalf("the copied cookie after sign-out: %d %q, want a redirect to sign in", p.status, p.header.Get("Location"))
	}
	if p := e.replay(stolen).post("/ui/queues/default/pause", url.Values{"csrf": {"anything"}}); p.status != http.StatusSeeOther || e.paused("default") {
		t.Fatalf("an action with the copied cookie after sign-out: %d, paused %v", p.status, e.paused("default"))
	}
}

// Revoking the API token ends its dashboard sessions on their next
// request, also when another node revoked it (this node's token cache
// knows nothing of it). Red with the token in the cookie: the cached
// token kept the session alive for the cache's lifetime.
func TestRevokedTokenEndsItsSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doomedText, doomed, err := e.tokens.Create(context.Background(), auth.NewTokenRequest{Name: "doomed", Tenant: "default", Scopes: []string{auth.ScopeJobsRead}})
	if err != nil {
		t.Fatal(err)
	}
	text := e.token("default", auth.ScopeJobsRead)
	b1, b2, kept := e.browser(), e.browser(), e.browser()
	b1.login(doomedText)
	b2.login(doomedText)
	kept.login(text)
	for _, b := range []*browser{b1, b2, kept} {
		if p := b.get("/ui/jobs"); p.status != http.StatusOK {
			t.Fatalf("before the revocation: %d", p.status)
		}
	}
	// Another node revokes it: straight in the database, as `gaffer
	// tokens revoke` does.
	if err := e.st.RevokeToken(context.Background(), doomed.ID); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*browser{b1, b2} {
		if p := b.get("/ui/jobs"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/login") {
			t.Fatalf("a session of the revoked token: %d %q, want a redirect to sign in", p.status, p.header.Get("Location"))
		}
	}
	if p := kept.get("/ui/jobs"); p.status != http.StatusOK {
		t.Fatalf("another token's session after the revocation: %d", p.status)
	}
}

// behindProxy makes the dashboard trust the test client's loopback
// address as a reverse proxy that names the client in X-Forwarded-For.
func behindProxy(c *ui.Config) {
	p, err := auth.ParseTrustedProxies("127.0.0.1/32, ::1")
	if err != nil {
		panic(err)
	}
	c.TrustedProxies = p
}

// signIn submits the sign-in form with extra request headers.
func (b *browser) signIn(token string, header ...string) page {
	b.e.t.Helper()
	return b.postFrom(b.e.srv.URL, "/ui/login", url.Values{"token": {token}, "next": {"/ui/"}}, header...)
}

// Guessing tokens on the sign-in form from one address is cut off after
// a burst of failures with 429 and Retry-After — even a right token from
// that address is refused, unchecked — while another address signs in
// as usual. Red without the limiter: every guess got its 401.
func TestLoginBruteForceIsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, behindProxy)
	good := e.token("default", auth.ScopeJobsRead)
	attacker := []string{"X-Forwarded-For", "203.0.113.7"}
	for i := range 10 {
		if p := e.browser().signIn(fmt.Sprintf("gft_guess-%03d", i), attacker...); p.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, p.status)
		}
	}
	p := e.browser().signIn("gft_guess-010", attacker...)
	if p.status != http.StatusTooManyRequests || !strings.Contains(p.body, "Too many failed sign-ins") {
		t.Fatalf("guess 11: %d, want 429 saying why:\n%s", p.status, p.body)
	}
	if s, err := strconv.Atoi(p.header.Get("Retry-After")); err != nil || s < 1 || s > 6 {
		t.Fatalf("Retry-After %q, want 1-6 seconds", p.header.Get("Retry-After"))
	}
	if p := e.browser().signIn(good, attacker...); p.status != http.StatusTooManyRequests || sessionCookie(p) != nil {
		t.Fatalf("a right token from the blocked address: %d, cookie %v; want 429 and no session", p.status, sessionCookie(p))
	}
	other := e.browser()
	if p := other.signIn(good, "X-Forwarded-For", "203.0.113.8"); p.status != http.StatusSeeOther || sessionCookie(p) == nil {
		t.Fatalf("another address signing in: %d", p.status)
	}
}

// A visitor that is not a trusted proxy cannot pick the address its
// failed sign-ins count against: X-Forwarded-For from it is ignored.
// Red if the header were believed from anyone.
func TestLoginLimitIgnoresForwardedForFromUntrustedPeers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var p page
	for i := range 11 {
		p = e.browser().signIn(fmt.Sprintf("gft_guess-%03d", i), "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
	}
	if p.status != http.StatusTooManyRequests {
		t.Fatalf("11th guess with a fresh spoofed X-Forwarded-For: %d, want 429", p.status)
	}
}

// The session cookie is Secure, and HSTS is sent, exactly when the
// browser reached the node over TLS: served by the node itself, or
// through a trusted proxy that says X-Forwarded-Proto: https. The header
// from anyone else is ignored. Red without the HSTS header, or with a
// Secure flag that trusted any X-Forwarded-Proto.
func TestSecureCookieAndHSTSOnlyOverTLS(t *testing.T) {
	t.Parallel()
	plain, proxied, tls := newEnv(t), newEnv(t, behindProxy), newTLSEnv(t)
	for _, c := range []struct {
		name   string
		e      *env
		header []string
		secure bool
	}{
		{"plain HTTP", plain, nil, false},
		{"X-Forwarded-Proto from an untrusted peer", plain, []string{"X-Forwarded-Proto", "https"}, false},
		{"trusted proxy, https", proxied, []string{"X-Forwarded-Proto", "https"}, true},
		{"trusted proxy, http", proxied, []string{"X-Forwarded-Proto", "http"}, false},
		{"trusted proxy, no header", proxied, nil, false},
		{"TLS", tls, nil, true},
	} {
		b := c.e.browser()
		p := b.signIn(c.e.token("default", auth.ScopeJobsRead), c.header...)
		cookie := sessionCookie(p)
		if p.status != http.StatusSeeOther || cookie == nil {
			t.Fatalf("%s: sign-in %d", c.name, p.status)
		}
		if cookie.Secure != c.secure {
			t.Errorf("%s: session cookie Secure=%v, want %v", c.name, cookie.Secure, c.secure)
		}
		if got := p.header.Get("Strict-Transport-Security"); (got != "") != c.secure {
			t.Errorf("%s: Strict-Transport-Security %q, want it only over TLS", c.name, got)
		}
	}
	// Over TLS the Secure cookie comes back and the session works.
	b := tls.browser()
	b.login(tls.token("default", auth.ScopeJobsRead))
	if p := b.get("/ui/jobs"); p.status != http.StatusOK || p.header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("a page over TLS: %d, HSTS %q", p.status, p.header.Get("Strict-Transport-Security"))
	}
}
