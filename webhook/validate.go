package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/gafferhq/gaffer/internal/egress"
	"github.com/gafferhq/gaffer/job"
)

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true}

// reserved headers are set by the handler and cannot be overridden.
var reserved = map[string]bool{"Idempotency-Key": true, "Gaffer-Job-Id": true, "Gaffer-Attempt": true, "Webhook-Id": true, "Webhook-Timestamp": true, "Webhook-Signature": true, "Content-Length": true, "Host": true}

// DestinationError is Validate's error for a URL the node will not call,
// whatever DNS says: an address literal (in any spelling) or localhost
// that the outbound guard refuses, or a host that is a number in a
// non-canonical spelling. Field names the arg, "args.url".
type DestinationError struct {
	Field   string
	Message string
}

func (e *DestinationError) Error() string { return e.Field + ": " + e.Message }

// refusedLiteral is the one text for every refused literal: it does not
// say whether the address is private, loopback or the cluster's own.
const refusedLiteral = "destination not allowed: %q is a loopback, private, link-local or otherwise internal address, or one of the cluster's own endpoints; http jobs call only destinations the operator allowed (--webhook-allow)"

// Validate checks raw args and returns them decoded, with the method
// defaulted and upper-cased. Errors are *job.ValidationError naming the
// field ("args.url", …), or *DestinationError for a URL whose host is,
// by its spelling alone, a destination h refuses. Host names are not
// resolved: those that lead inside are refused when the call is made.
func (h *Handler) Validate(raw json.RawMessage) (Args, time.Duration, error) {
	var a Args
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, 0, &job.ValidationError{Field: "args", Message: "http job args must be an object with url, method, headers, body, timeout, secret_headers: " + err.Error()}
	}
	if a.Method == "" {
		a.Method = "POST"
	}
	a.Method = strings.ToUpper(a.Method)
	u, err := url.Parse(a.URL)
	if a.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		got := "an empty string"
		switch {
		case err != nil:
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // its text repeats the URL, secrets and all
			}
			got = "a string that does not parse: " + err.Error()
		case a.URL != "":
			got = strconv.Quote(redact(u))
		}
		return a, 0, &job.ValidationError{Field: "args.url", Message: "must be an absolute http or https URL, got " + got}
	}
	port, ok := urlPort(u)
	if !ok {
		return a, 0, &job.ValidationError{Field: "args.url", Message: fmt.Sprintf("the port must be a number from 1 to 65535, got %q", u.Port())}
	}
	if !methods[a.Method] {
		return a, 0, &job.ValidationError{Field: "args.method", Message: fmt.Sprintf("must be GET, POST, PUT, PATCH, DELETE or HEAD, got %q", a.Method)}
	}
	for k, v := range a.Headers {
		if reserved[http.CanonicalHeaderKey(k)] {
			return a, 0, &job.ValidationError{Field: "args.headers", Message: fmt.Sprintf("header %q is set by Gaffer", k)}
		}
		// RFC 9110: a name is a token; a value is visible characters,
		// spaces and tabs, no controls. Checked here, not by the HTTP
		// client at call time, where it would fail every attempt.
		if !httpguts.ValidHeaderFieldName(k) {
			return a, 0, &job.ValidationError{Field: "args.headers", Message: fmt.Sprintf("header name %q is not an RFC 9110 token", k)}
		}
		if !httpguts.ValidHeaderFieldValue(v) || !utf8.ValidString(v) {
			return a, 0, &job.ValidationError{Field: "args.headers", Message: fmt.Sprintf("the value of header %q has control characters or is not UTF-8", k)}
		}
	}
	if len(a.SecretHeaders) > 32 {
		return a, 0, &job.ValidationError{Field: "args.secret_headers", Message: fmt.Sprintf("at most 32 names, got %d", len(a.SecretHeaders))}
	}
	for _, n := range a.SecretHeaders {
		if !httpguts.ValidHeaderFieldName(n) {
			return a, 0, &job.ValidationError{Field: "args.secret_headers", Message: fmt.Sprintf("%q is not a header name", n)}
		}
	}
	var timeout time.Duration
	if a.Timeout != "" {
		if timeout, err = time.ParseDuration(a.Timeout); err != nil || timeout <= 0 || timeout > time.Hour {
			return a, 0, &job.ValidationError{Field: "args.timeout", Message: fmt.Sprintf("must be a duration from 1ms to 1h, such as \"10s\", got %q", a.Timeout)}
		}
	}
	if err := h.policy.CheckLiteral(u.Hostname(), port); err != nil {
		var se *egress.SpellingError
		if errors.As(err, &se) {
			return a, 0, &DestinationError{Field: "args.url", Message: "destination not allowed: " + se.Error()}
		}
		return a, 0, &DestinationError{Field: "args.url", Message: fmt.Sprintf(refusedLiteral, u.Hostname())}
	}
	if err := checkHost(u.Hostname()); err != nil {
		return a, 0, err
	}
	return a, timeout, nil
}

// MaxHostLen is the longest host an http job may name: a DNS name's limit.
const MaxHostLen = 253

// checkHost refuses a host the http kind does not take: longer than a
// DNS name, or not in the one spelling per destination that its
// fairness key and its per-host limit count it under (Args.Host, and
// gaffer.url_host in store/schema/limits.sql, which must agree): a
// non-ASCII name (write its IDNA form, xn--…), a trailing dot, a percent
// escape or an IPv6 zone. Otherwise "Example.com." or a zone would be a
// second key for the same destination, and its calls would not count
// against the others'.
func checkHost(host string) error {
	bad := func(why string) error {
		return &job.ValidationError{Field: "args.url", Message: "the host " + why}
	}
	switch {
	case len(host) > MaxHostLen:
		return bad(fmt.Sprintf("must be at most %d bytes, got %d", MaxHostLen, len(host)))
	case strings.HasSuffix(host, "."):
		return bad("must not end with a dot")
	case strings.ContainsRune(host, '%'):
		return bad("must not hold a percent escape or an IPv6 zone")
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			return bad("must be ASCII: write an internationalized name in its IDNA form (xn--…)")
		}
	}
	return nil
}

// urlPort is the port a URL is called on.
func urlPort(u *url.URL) (uint16, bool) {
	p := u.Port()
	if p == "" {
		if u.Scheme == "https" {
			return 443, true
		}
		return 80, true
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return uint16(n), err == nil && n > 0
}
