package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/job"
)

// maxRedirects is how many redirects one call follows.
const maxRedirects = 5

// send makes the call to u and follows its redirects. It returns the
// final response, or an error; hop describes where the call was when it
// ended ("" for the first URL, "redirect 2 to <redacted URL>: " after).
// Each hop goes through h.client, whose transport dials through the
// outbound guard.
func (h *Handler) send(ctx context.Context, j *job.Job, a Args, u *url.URL, body []byte, keys [][]byte) (resp *http.Response, hop string, err error) {
	first := origin(u)
	sent := time.Now() // one webhook-timestamp for the attempt's every hop
	method := a.Method
	sameOrigin := true // no hop has left the first URL's origin
	for n := 0; ; n++ {
		if n > 0 {
			hop = fmt.Sprintf("redirect %d to %s: ", n, redact(u))
		}
		req, err := h.request(ctx, j, a, method, u, body, sameOrigin, keys, sent)
		if err != nil {
			return nil, hop, job.Permanent(err)
		}
		resp, err := h.client.Do(req)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // its text repeats the URL, secrets and all
			}
			return nil, hop, err
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			return resp, hop, nil
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if n == maxRedirects {
			return nil, hop, job.Permanent(fmt.Errorf("stopped after %d redirects", maxRedirects))
		}
		next, err := u.Parse(loc)
		if err != nil || (next.Scheme != "http" && next.Scheme != "https") || next.Host == "" {
			return nil, hop, job.Permanent(fmt.Errorf("HTTP %d redirects to something other than an http or https URL", resp.StatusCode))
		}
		next.Fragment, next.RawFragment = "", ""
		if origin(next) != first {
			sameOrigin = false
		}
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
			if method != http.MethodHead {
				method = http.MethodGet
			}
			body = nil
		default: // 307, 308: the same method; the body only on the first origin
			if !sameOrigin {
				body = nil
			}
		}
		u = next
	}
}

// request builds one hop's request. Off the first origin it carries none
// of the job's headers and no signature (another origin must not get a
// delivery it could pass on as the tenant's).
func (h *Handler) request(ctx context.Context, j *job.Job, a Args, method string, u *url.URL, body []byte, sameOrigin bool, keys [][]byte, sent time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if sameOrigin {
		for k, v := range a.Headers {
			req.Header.Set(k, v)
		}
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", h.cfg.UserAgent)
	req.Header.Set("Idempotency-Key", strconv.FormatInt(j.ID, 10))
	req.Header.Set("Gaffer-Job-Id", strconv.FormatInt(j.ID, 10))
	req.Header.Set("Gaffer-Attempt", strconv.Itoa(j.Attempt))
	id := MessageID(j.ID)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(sent.Unix(), 10))
	if sameOrigin && len(keys) > 0 {
		req.Header.Set(HeaderSignature, Sign(keys, id, sent, body))
	}
	setTraceContext(ctx, req.Header, j)
	return req, nil
}

// setTraceContext sets the call's W3C trace context: the attempt's span
// when the node traces, else the trace context the job was enqueued in
// (the receiver then joins the enqueuer's trace). Either replaces
// traceparent and tracestate headers from the job's args, which would
// name another parent; with neither, those are sent as they are.
func setTraceContext(ctx context.Context, h http.Header, j *job.Job) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc, _ = job.ParseTraceContext(j.TraceParent, j.TraceState)
	}
	if !sc.IsValid() {
		return
	}
	h.Del("Traceparent")
	h.Del("Tracestate")
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.HeaderCarrier(h))
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// origin is a URL's scheme, host and port, the port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
