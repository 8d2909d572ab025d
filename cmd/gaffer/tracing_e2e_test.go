package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP trace receiver on loopback.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	// services are the service.name of each span's resource.
	services []string
	// other counts requests to anything but /v1/traces.
	other atomic.Int32
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/traces" {
		c.other.Add(1)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, s)
				c.services = append(c.services, service)
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// attempt waits for the span of job id's attempt and returns it with its
// service name.
func (c *collector) attempt(t *testing.T, id int64) (*tracepb.Span, string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c.mu.Lock()
		for i, s := range c.spans {
			for _, kv := range s.Attributes {
				if kv.Key == "gaffer.job.id" && kv.GetValue().GetIntValue() == id {
					c.mu.Unlock()
					return s, c.services[i]
				}
			}
		}
		c.mu.Unlock()
	}
	t.Fatalf("no span of job %d reached the collector", id)
	return nil, ""
}

// gaffer server with OTEL_EXPORTER_OTLP_ENDPOINT set exports a span of
// each attempt to the collector, linked to the traceparent the job was
// enqueued with, under OTEL_SERVICE_NAME; and its http jobs cannot reach
// the collector, even through a receiver the operator allowed and with
// all of loopback opened.
func TestServerExportsAttemptSpans(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	token := strings.TrimSpace(e.ok("tokens", "create", "--name", "tracer", "--scopes", "jobs:read,jobs:write"))
	col := &collector{}
	colSrv := httptest.NewServer(col)
	defer colSrv.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			return
		}
		io.Copy(io.Discard, r.Body)
	}))
	defer receiver.Close()
	e.env = append(e.env, "OTEL_EXPORTER_OTLP_ENDPOINT="+colSrv.URL, "OTEL_SERVICE_NAME=gaffer-e2e", "OTEL_BSP_SCHEDULE_DELAY=100")
	_, base := e.server("traced-1", "--queues", "default=4", "--webhook-allow", "127.0.0.0/8")

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest("POST", base+"/v1/jobs", strings.NewReader(`{"kind":"noop"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", parent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Job struct {
			ID          int64  `json:"id"`
			TraceParent string `json:"traceparent"`
		} `json:"job"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 201 || out.Job.TraceParent != parent {
		t.Fatalf("enqueue: %d, traceparent %q", resp.StatusCode, out.Job.TraceParent)
	}
	span, service := col.attempt(t, out.Job.ID)
	if service != "gaffer-e2e" || span.Name != "process noop" || span.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
		t.Errorf("span %q kind %s of service %q", span.Name, span.Kind, service)
	}
	if len(span.Links) != 1 || hex.EncodeToString(span.Links[0].TraceId) != parent[3:35] ||
		hex.EncodeToString(span.Links[0].SpanId) != parent[36:52] {
		t.Errorf("links %v, want one to %s", span.Links, parent)
	}
	if len(span.ParentSpanId) != 0 {
		t.Errorf("the attempt has parent %x, want a root", span.ParentSpanId)
	}

	// The collector is one of the node's own endpoints.
	target := colSrv.URL + "/leak"
	r := enqueueHTTP(t, base, token, "default", receiver.URL+"/hook?to="+url.QueryEscape(target))
	if r.status != 201 {
		t.Fatalf("enqueue via the receiver: %+v", r)
	}
	e.waitSQL("blocked at the collector", `SELECT state || ' ' || attempt || ' ' || (errors->0->>'kind') FROM gaffer.jobs WHERE id = $1`,
		"failed 1 destination_blocked", r.id)
	if n := col.other.Load(); n != 0 {
		t.Fatalf("%d requests from http jobs reached the collector", n)
	}
}
