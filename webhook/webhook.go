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
// Gaffer-Attempt, the W3C traceparent (and tracestate) of the attempt's
// span when the node traces, else of the trace the job was enqueued in,
// if any (either replaces traceparent and tracestate headers from the
// job's args), and the Standard Webhooks headers webhook-id (the same
// on every attempt), webhook-timestamp and — when the job's tenant has a
// signing secret — webhook-signature: the HMAC-SHA256 of
// "id.timestamp.body" under each of the tenant's secrets that still sign
// (see Sign, Verifier, Secrets). Secrets are per tenant: a tenant cannot
// have the cluster sign anything with another tenant's secret, and the
// timestamp lets receivers refuse a captured delivery replayed later.
//
// Calls are made on a tenant's behalf, so they go only where the operator
// allows: every connection, redirects included, is dialled through the
// outbound guard (internal/egress), which refuses loopback, private,
// link-local and other internal addresses and the node's own API,
// PostgreSQL and etcd unless Config.Allow opens them. A refused call fails
// the job for good with attempt error kind "destination_blocked" and one
// message, whatever listens there. Validate refuses what is visibly such a
// destination (an address literal in any spelling, localhost) where the
// job enters. No proxy is used, not even one from the environment.
//
// Redirects are followed up to five times. While they stay on the first
// URL's origin (scheme, host and port) the call is repeated as made, its
// headers included; once one leaves it, the job's own headers, the body
// and webhook-signature are no longer sent (Idempotency-Key,
// Gaffer-Job-Id, Gaffer-Attempt, webhook-id and webhook-timestamp still
// are). 301, 302 and 303 turn the
// call into a GET without a body; 307 and 308 keep the method, and the
// body only on the first origin. No Referer is ever sent.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/internal/egress"
	"github.com/gafferhq/gaffer/job"
)

// Kind is the job kind this package handles.
const Kind = "http"

// Config configures the handler. Zero values take the defaults shown.
type Config struct {
	// Allow opens destinations the outbound guard refuses by default: each
	// entry a CIDR ("10.20.0.0/16"), an address ("10.20.0.7", "[fd00::7]"),
	// a host name ("hooks.internal": the addresses it resolves to) or
	// host:port ("hooks.internal:8443", "127.0.0.1:9000"). Default: none.
	Allow []string
	// OwnEndpoints are the node's own API, PostgreSQL and etcd endpoints,
	// as "host:port" or URLs. They are refused even on public addresses
	// unless Allow names one exactly as host:port, and so are their ports
	// on every address of this host (all of loopback, 0.0.0.0, the
	// interface addresses and OwnHosts).
	OwnEndpoints []string
	// OwnHosts are addresses and host names of this cluster that its
	// interfaces do not show (a NAT's public address): every port of
	// OwnEndpoints is refused there too. An entry with a port is one more
	// own endpoint. Default: none.
	OwnHosts []string
	// DefaultTimeout bounds a call whose args set none. Default 30s.
	DefaultTimeout time.Duration
	// MaxResultBytes of the response body kept in the job's result.
	// Default 64 KiB.
	MaxResultBytes int64
	// UserAgent header. Default "gaffer-webhook".
	UserAgent string
	// Logger gets a line for every refused call, with the reason the
	// tenant is not told. Default: no logging.
	Logger hclog.Logger
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
	// SecretHeaders names headers (of Headers) whose values are secrets:
	// if the receiver's answer repeats one, it is masked before the
	// answer is stored as the job's result. Authorization,
	// Proxy-Authorization, Cookie and X-Api-Key always are.
	SecretHeaders []string `json:"secret_headers,omitempty"`
}

// Host is the destination's host, its ASCII letters lower-cased: the http
// kind's fairness key, and the key its default limit (http-per-host)
// counts calls under — gaffer.url_host reads the same host out of the
// URL in SQL (TestURLHostMatchesSQL checks they agree).
func (a Args) Host() string {
	u, err := url.Parse(a.URL)
	if err != nil {
		return ""
	}
	return asciiLower(u.Hostname())
}

// asciiLower lower-cases the ASCII letters of s, whatever the locale, as
// gaffer.url_host does.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// alwaysSecret are the headers whose values are masked in stored
// results whether or not the job names them.
var alwaysSecret = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key"}

// secretValues are the values of a's secret headers worth masking.
func (a Args) secretValues() []string {
	names := append(slices.Clone(alwaysSecret), a.SecretHeaders...)
	var out []string
	for k, v := range a.Headers {
		for _, n := range names {
			if strings.EqualFold(k, n) && len(v) >= 4 {
				out = append(out, v)
				if _, cred, ok := strings.Cut(v, " "); ok && len(cred) >= 4 { // "Bearer <token>"
					out = append(out, cred)
				}
			}
		}
	}
	// Longest first, so that a value containing another is masked whole.
	slices.SortFunc(out, func(x, y string) int { return len(y) - len(x) })
	return out
}

// Handler runs "http" jobs and checks their args. Build it with New.
type Handler struct {
	cfg    Config
	policy *egress.Policy
	client *http.Client
	log    hclog.Logger
	// secrets gives each tenant's signing keys; nil signs nothing.
	secrets atomic.Pointer[Secrets]
}

// SetSecrets makes every call be signed with its job's tenant's secrets
// (webhook-signature). Call it before the node runs jobs.
func (h *Handler) SetSecrets(s *Secrets) { h.secrets.Store(s) }

// New checks cfg and returns the handler; a bad Allow, OwnEndpoints or
// OwnHosts entry is an error. ctx bounds resolving the host names in
// cfg.OwnEndpoints and cfg.OwnHosts; one that does not resolve is logged
// and refused by name only.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if cfg.DefaultTimeout == 0 {
		cfg.DefaultTimeout = 30 * time.Second
	}
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = 64 << 10
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "gaffer-webhook"
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	policy, err := egress.New(ctx, egress.Config{Allow: cfg.Allow, Own: cfg.OwnEndpoints, OwnHosts: cfg.OwnHosts})
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	for _, e := range policy.Unresolved() {
		cfg.Logger.Warn("own endpoint or host did not resolve; http jobs are refused it by name only", "endpoint", e)
	}
	client := &http.Client{
		Transport: policy.Transport(),
		// Redirects are followed by send, which decides what each hop
		// carries; the client would forward custom headers to other
		// origins and add a Referer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Handler{cfg: cfg, policy: policy, client: client, log: cfg.Logger.Named("webhook")}, nil
}

// Register adds h to r as the handler of the "http" kind.
func (h *Handler) Register(r *job.Registry) { r.Handle(Kind, h, job.KindOptions{Check: h.check}) }

// CodeDestinationNotAllowed is the ValidationError code of an http job
// whose URL names, by its spelling alone, a destination the node refuses.
const CodeDestinationNotAllowed = "destination_not_allowed"

// check is the http kind's check where a request enters: its args must be
// valid http args to an allowed destination, and its destination host
// becomes its fairness key unless it has one, so that one slow
// receiver's backlog does not hold up the tenant's calls elsewhere.
func (h *Handler) check(r *job.Request) error {
	raw, _ := r.Args.(json.RawMessage)
	a, _, err := h.Validate(raw)
	var de *DestinationError
	if errors.As(err, &de) {
		return &job.ValidationError{Field: de.Field, Message: de.Message, Code: CodeDestinationNotAllowed}
	}
	if err != nil {
		return err
	}
	if r.FairnessKey == "" {
		r.FairnessKey = a.Host()
	}
	return nil
}

// Result is what a completed call records.
type Result struct {
	Status int `json:"status"`
	// Body is the response body: JSON as is, anything else as a string,
	// cut at MaxResultBytes.
	Body      json.RawMessage `json:"body,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

// Work makes one attempt's call.
func (h *Handler) Work(ctx context.Context, j *job.Job) error {
	a, timeout, err := h.Validate(j.Args)
	var de *DestinationError
	switch {
	case errors.As(err, &de):
		h.log.Info("outbound call refused", "job_id", j.ID, "tenant", j.Tenant, "reason", de.Message)
		return job.DestinationBlocked(fmt.Errorf("%s %s: %w", a.Method, redactRaw(a.URL), egress.ErrBlocked))
	case err != nil:
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
	u, _ := url.Parse(a.URL) // Validate parsed it
	call := fmt.Sprintf("%s %s", a.Method, redact(u))
	var keys [][]byte
	if secrets := h.secrets.Load(); secrets != nil {
		// Never unsigned for a tenant that has a secret: if its keys
		// cannot be read, the attempt fails and is retried.
		if keys, err = secrets.signingKeys(ctx, j.Tenant); err != nil {
			return fmt.Errorf("%s: read the tenant's signing secrets: %w", call, err)
		}
	}
	resp, hop, err := h.send(ctx, j, a, u, body, keys)
	if err != nil {
		var be *egress.BlockedError
		var perm *job.PermanentError
		switch {
		case errors.As(err, &be):
			h.log.Info("outbound call refused", "job_id", j.ID, "tenant", j.Tenant, "host", be.Host, "addr", be.Addr, "reason", be.Reason)
			return job.DestinationBlocked(fmt.Errorf("%s: %s%w", call, hop, egress.ErrBlocked))
		case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("%s: %sno answer within %s", call, hop, timeout)
		case errors.As(err, &perm):
			return job.Permanent(fmt.Errorf("%s: %s%w", call, hop, perm.Err))
		}
		return fmt.Errorf("%s: %s%w", call, hop, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, h.cfg.MaxResultBytes+1))
	res := Result{Status: resp.StatusCode}
	if int64(len(raw)) > h.cfg.MaxResultBytes {
		raw, res.Truncated = raw[:h.cfg.MaxResultBytes], true
	}
	// A receiver may echo the request: its secrets are not stored.
	for _, v := range a.secretValues() {
		raw = bytes.ReplaceAll(raw, []byte(v), []byte("[redacted]"))
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
	status := fmt.Errorf("%s: %sHTTP %d", call, hop, resp.StatusCode)
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
