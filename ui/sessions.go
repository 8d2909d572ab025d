package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/auth"
)

// hsts is the Strict-Transport-Security value sent over TLS: browsers
// then refuse plain HTTP to this host for a year.
const hsts = "max-age=31536000"

// sessionID reads the request's session cookie: a well-formed id, or "".
// Anything else (an old cookie that held a token, junk) is no session.
func sessionID(r *http.Request) (id string, present bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return "", false
	}
	if !auth.WellFormedSessionID(c.Value) {
		return "", true
	}
	return c.Value, true
}

// signedIn authenticates the request's session. When there is none, it
// answers the request itself — a redirect to the sign-in form (deleting a
// cookie that names no live session), or 429 when the client's address
// has used up its failed authentications — and returns false.
func (h *Handler) signedIn(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	id, present := sessionID(r)
	if !present {
		h.toLogin(w, r)
		return auth.Principal{}, false
	}
	client := h.cfg.TrustedProxies.ClientAddr(r)
	if wait, blocked := h.cfg.Failures.Blocked(client); blocked {
		h.tooManyFailures(w, r, wait)
		return auth.Principal{}, false
	}
	if id != "" {
		p, err := h.cfg.Sessions.Principal(r.Context(), id)
		if err == nil {
			return p, true
		}
		if !errors.Is(err, auth.ErrNoSession) {
			h.log.Error("check dashboard session", "error", err)
			h.renderError(w, r, auth.Principal{}, "", http.StatusServiceUnavailable, "The session could not be checked: the database did not answer. Try again.")
			return auth.Principal{}, false
		}
	}
	// Expired, signed out, revoked, or never issued: one failure, and the
	// browser forgets the cookie.
	h.cfg.Failures.Fail(client)
	http.SetCookie(w, h.cookie(r, sessionCookie, "", -1))
	h.toLogin(w, r)
	return auth.Principal{}, false
}

// cookie is one of the dashboard's cookies: HttpOnly, SameSite=Strict,
// scoped to /ui/, and Secure when the browser reached the node over TLS
// (directly, or through a trusted proxy that says so).
func (h *Handler) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/ui/", MaxAge: maxAge, HttpOnly: true,
		Secure: h.cfg.TrustedProxies.HTTPS(r), SameSite: http.SameSiteStrictMode}
}

// csrf is the session's CSRF token: an HMAC of a fixed label keyed by the
// session id, which only the signed-in browser holds (the cookie is
// HttpOnly). It is bound to the session: another session's token, or one
// from before a sign-out, does not match.
func (h *Handler) csrf(r *http.Request) string {
	id, _ := sessionID(r)
	if id == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(id))
	m.Write([]byte("gaffer dashboard csrf v2"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validCSRF reports whether the submitted form carries the session's
// CSRF token.
func (h *Handler) validCSRF(r *http.Request) bool {
	want := h.csrf(r)
	return want != "" && hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(want))
}

func (h *Handler) toLogin(w http.ResponseWriter, r *http.Request) {
	next := r.URL.RequestURI()
	if r.Method != http.MethodGet {
		next = "/ui/"
	}
	http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(next), http.StatusSeeOther)
}

// tooManyFailures answers a client whose address has used up its failed
// authentications: 429 with Retry-After, on the sign-in form.
func (h *Handler) tooManyFailures(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", auth.RetryAfter(wait))
	msg := fmt.Sprintf("Too many failed sign-ins from your address. Try again in %s seconds.", auth.RetryAfter(wait))
	h.render(w, r, http.StatusTooManyRequests, "login", &view{Title: "Sign in", Data: loginData{Next: "/ui/", Error: msg}})
}

type loginData struct {
	Next  string
	Error string
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	next := r.URL.Query().Get("next")
	if !localPath(next) {
		next = "/ui/"
	}
	h.render(w, r, http.StatusOK, "login", &view{Title: "Sign in", Data: loginData{Next: next}})
}

// login checks a token and starts a session. Failed attempts count
// against the client's address; once its budget is spent, attempts are
// refused (429) before the token is looked at.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	client := h.cfg.TrustedProxies.ClientAddr(r)
	if wait, blocked := h.cfg.Failures.Blocked(client); blocked {
		h.tooManyFailures(w, r, wait)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !sameOrigin(r) || r.ParseForm() != nil {
		http.Error(w, "bad sign-in request", http.StatusBadRequest)
		return
	}
	next := r.PostForm.Get("next")
	if !localPath(next) {
		next = "/ui/"
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	fail := func(status int, msg string) {
		h.render(w, r, status, "login", &view{Title: "Sign in", Data: loginData{Next: next, Error: msg}})
	}
	if token == "" {
		fail(http.StatusUnauthorized, "Enter an API token.")
		return
	}
	p, err := h.cfg.Tokens.Authenticate(r.Context(), token)
	if errors.Is(err, auth.ErrBadToken) {
		h.cfg.Failures.Fail(client)
		fail(http.StatusUnauthorized, "That token is not valid (unknown or revoked).")
		return
	}
	if err != nil {
		h.log.Error("dashboard sign-in", "error", err)
		fail(http.StatusUnauthorized, "The token could not be checked: the database did not answer. Try again.")
		return
	}
	if !p.Allows(auth.ScopeJobsRead) {
		fail(http.StatusUnauthorized, "That token lacks the jobs:read scope the dashboard needs.")
		return
	}
	id, err := h.cfg.Sessions.Start(r.Context(), p)
	if err != nil {
		h.log.Error("dashboard sign-in", "error", err)
		fail(http.StatusServiceUnavailable, "The session could not be stored: the database did not answer. Try again.")
		return
	}
	// A session this browser held before is over: one browser, one
	// session.
	if old, _ := sessionID(r); old != "" {
		if err := h.cfg.Sessions.End(r.Context(), old); err != nil {
			h.log.Warn("end the previous dashboard session", "error", err)
		}
	}
	http.SetCookie(w, h.cookie(r, sessionCookie, id, int(h.cfg.Sessions.Length().Seconds())))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session on the server, then in the browser: a copy of
// the cookie signs nobody in afterwards.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	r.ParseForm()
	if !sameOrigin(r) || !h.validCSRF(r) {
		http.Error(w, "bad sign-out request", http.StatusForbidden)
		return
	}
	id, _ := sessionID(r)
	if err := h.cfg.Sessions.End(r.Context(), id); err != nil {
		h.log.Error("dashboard sign-out", "error", err)
		h.renderError(w, r, auth.Principal{}, "", http.StatusServiceUnavailable, "The session could not be ended: the database did not answer. Try again.")
		return
	}
	http.SetCookie(w, h.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// setFlash leaves a message for the next page the browser loads.
func (h *Handler) setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	if msg == "" {
		return
	}
	http.SetCookie(w, h.cookie(r, flashCookie, base64.RawURLEncoding.EncodeToString([]byte(msg)), 60))
}

func (h *Handler) takeFlash(w http.ResponseWriter, r *http.Request) string {
	if r.Header.Get("X-Gaffer-Live") != "" {
		return ""
	}
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, h.cookie(r, flashCookie, "", -1))
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	return string(b)
}
