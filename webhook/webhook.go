// Package webhook is the built-in "http" job kind: a job that calls a URL.
// It lets a cluster be useful with no Go code — API clients, cron entries
// and workflow steps enqueue "http" jobs.
//
// A 2xx answer completes the job (the status and, up to a limit, the body
// are its result). 429, 5xx, timeouts and network errors are failed
// attempts, retried with backoff (a 429's Retry-After sets the delay).
// Any other 4xx fails the job for good: retrying would not help.
//
// Every call carries Idempotency-Key (the job id, the same on every
// attempt, so the receiver can drop repeats), Gaffer-Job-Id,
// Gaffer-Attempt, and — when a secret is configured — Gaffer-Signature:
// "sha256=" and the hex HMAC-SHA256 of the request body under the secret.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/gafferhq/gaffer/job"
)

// Kind is the job kind this package handles.
const Kind = "http"

// Config configures the handler. Zero values take the defaults shown.
type Config struct {
	// Secret signs request bodies (Gaffer-Signature). Empty: no signature.
	Secret string
	// Client sends the requests. Default: a client with no overall
	// timeout (each call has its own).
	Client *http.Client
	// DefaultTimeout bounds a call whose args set none. Default 30s.
	DefaultTimeout time.Duration
	// MaxResultBytes of the response body kept in the job's result.
	// Default 64 KiB.
	MaxResultBytes int64
	// UserAgent header. Default "gaffer-webhook".
	UserAgent string
}

// Args are an "http" job's args.
type Args struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as JSON; absent or null sends no body.
	Body json.RawMessage `json:"body,omitempty"`
	// Timeout of one call, e.g. "10s". Default Config.DefaultTimeout.
	Timeout string `json:"timeout,omitempty"`
}

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true}

// reserved headers are set by the handler and cannot be overridden.
var reserved = map[string]bool{"Idempotency-Key": true, "Gaffer-Job-Id": true, "Gaffer-Attempt": true, "Gaffer-Signature": true, "Content-Length": true, "Host": true}

// Validate checks raw args and returns them decoded. Errors are
// *job.ValidationError naming the field (as "args.url", …).
func Validate(raw json.RawMessage) (Args, time.Duration, error) {
	var a Args
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, 0, &job.ValidationError{Field: "args", Message: "http job args must be an object with url, method, headers, body, timeout: " + err.Error()}
	}
	u, err := url.Parse(a.URL)
	if a.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return a, 0, &job.ValidationError{Field: "args.url", Message: fmt.Sprintf("must be an absolute http or https URL, got %q", a.URL)}
	}
	if a.Method == "" {
		a.Method = "POST"
	}
	a.Method = strings.ToUpper(a.Method)
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
	var timeout time.Duration
	if a.Timeout != "" {
		if timeout, err = time.ParseDuration(a.Timeout); err != nil || timeout <= 0 || timeout > time.Hour {
			return a, 0, &job.ValidationError{Field: "args.timeout", Message: fmt.Sprintf("must be a duration from 1ms to 1h, such as \"10s\", got %q", a.Timeout)}
		}
	}
	return a, timeout, nil
}

// Register adds the "http" kind to r.
func Register(r *job.Registry, cfg Config) {
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.DefaultTimeout == 0 {
		cfg.DefaultTimeout = 30 * time.Second
	}
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = 64 << 10
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "gaffer-webhook"
	}
	h := &handler{cfg: cfg}
	r.Handle(Kind, h)
}

type handler struct{ cfg Config }

// Result is what a completed call records.
type Result struct {
	Status int `json:"status"`
	// Body is the response body: JSON as is, anything else as a string,
	// cut at MaxResultBytes.
	Body      json.RawMessage `json:"body,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

func (h *handler) Work(ctx context.Context, j *job.Job) error {
	a, timeout, err := Validate(j.Args)
	if err != nil {
		return job.Permanent(err)
	}
	if timeout == 0 {
		timeout = h.cfg.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body []byte
	if len(a.Body) > 0 && string(a.Body) != "null" {
		body = a.Body
	}
	req, err := http.NewRequestWithContext(ctx, a.Method, a.URL, bytes.NewReader(body))
	if err != nil {
		return job.Permanent(err)
	}
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	req.Header.Set("User-Agent", h.cfg.UserAgent)
	req.Header.Set("Idempotency-Key", strconv.FormatInt(j.ID, 10))
	req.Header.Set("Gaffer-Job-Id", strconv.FormatInt(j.ID, 10))
	req.Header.Set("Gaffer-Attempt", strconv.Itoa(j.Attempt))
	if h.cfg.Secret != "" {
		req.Header.Set("Gaffer-Signature", Sign(h.cfg.Secret, body))
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%s %s: no answer within %s", a.Method, a.URL, timeout)
		}
		return fmt.Errorf("%s %s: %w", a.Method, a.URL, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, h.cfg.MaxResultBytes+1))
	res := Result{Status: resp.StatusCode}
	if int64(len(raw)) > h.cfg.MaxResultBytes {
		raw, res.Truncated = raw[:h.cfg.MaxResultBytes], true
	}
	switch {
	case len(raw) == 0:
	case !res.Truncated && json.Valid(raw) && job.CheckJSONText(raw) == nil:
		res.Body = raw
	default:
		s := strings.ToValidUTF8(string(raw), "\uFFFD")
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		res.Body, _ = json.Marshal(strings.ReplaceAll(s, "\x00", ""))
	}
	status := fmt.Errorf("%s %s: HTTP %d", a.Method, a.URL, resp.StatusCode)
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return j.SetResult(res)
	case code == http.StatusTooManyRequests:
		if d, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
			return job.RetryAfter(status, d)
		}
		return status
	case code >= 500:
		return status
	default:
		return job.Permanent(status)
	}
}

// Sign returns the Gaffer-Signature value for body under secret:
// "sha256=" and the hex HMAC-SHA256. Receivers compute the same over the
// raw body they received and compare in constant time.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return min(time.Duration(secs)*time.Second, 24*time.Hour), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), 24*time.Hour), true
	}
	return 0, false
}
