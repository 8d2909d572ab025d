package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/job"
)

// enqueueTraced enqueues an http job to url inside a span of tp, with
// the args' own (stale) trace headers, and returns the job and the
// span's context.
func (e *env) enqueueTraced(tp trace.TracerProvider, url string) (*job.Job, trace.SpanContext) {
	e.t.Helper()
	ctx, span := tp.Tracer("test").Start(context.Background(), "enqueue")
	defer span.End()
	raw, _ := json.Marshal(map[string]any{"url": url, "headers": map[string]string{
		"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "stale=1"}})
	res, err := e.client.Enqueue(ctx, job.Request{Kind: "http", Args: raw})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Job, span.SpanContext()
}

// A node that traces sends its attempt span's traceparent: the receiver's
// spans are children of the attempt, which links to the enqueue. The
// args' own trace headers do not get through.
func TestCallCarriesTheAttemptsTraceparent(t *testing.T) {
	t.Parallel()
	rc := &receiver{reply: func(n int, w http.ResponseWriter) { w.WriteHeader(204) }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	e := startTraced(t, false, tp, srv.Listener.Addr().String())
	j, enqueued := e.enqueueTraced(tp, srv.URL)
	e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })

	// The attempt's span ends once its outcome is recorded, a moment
	// after the row says completed.
	var attempt trace.SpanContext
	for deadline := time.Now().Add(10 * time.Second); !attempt.IsValid(); time.Sleep(10 * time.Millisecond) {
		for _, s := range exp.GetSpans() {
			if s.Name == "process http" {
				attempt = s.SpanContext
				if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != enqueued.SpanID() {
					t.Errorf("the attempt links to %+v, want the enqueue's span", s.Links)
				}
			}
		}
		if !attempt.IsValid() && time.Now().After(deadline) {
			t.Fatal("no attempt span 10s after the job completed")
		}
	}
	h := rc.get(0).header
	want := "00-" + attempt.TraceID().String() + "-" + attempt.SpanID().String() + "-01"
	if got := h.Values("Traceparent"); len(got) != 1 || got[0] != want {
		t.Errorf("traceparent %q, want %q (the attempt's span)", got, want)
	}
	if got := h.Values("Tracestate"); len(got) != 0 {
		t.Errorf("tracestate %q, want none", got)
	}
}

// A node that does not trace sends the trace context the job was enqueued
// in: the receiver joins the enqueuer's trace.
func TestCallCarriesTheEnqueuesTraceparentWhenNotTracing(t *testing.T) {
	t.Parallel()
	rc := &receiver{reply: func(n int, w http.ResponseWriter) { w.WriteHeader(204) }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	tp := sdktrace.NewTracerProvider() // the enqueuer's; the node has none
	defer tp.Shutdown(context.Background())
	e := start(t, false, srv.Listener.Addr().String())
	j, enqueued := e.enqueueTraced(tp, srv.URL)
	e.wait(j.ID, func(x *job.Job) bool { return x.State == job.Completed })
	want := "00-" + enqueued.TraceID().String() + "-" + enqueued.SpanID().String() + "-01"
	if got := rc.get(0).header.Values("Traceparent"); len(got) != 1 || got[0] != want {
		t.Errorf("traceparent %q, want %q (the enqueue's span)", got, want)
	}
}
