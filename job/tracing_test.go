package job_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/job"
)

// tracer is a tracer provider whose spans end up in an in-memory
// exporter, synchronously: a span is there once End returns.
func tracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp, exp
}

// attemptSpans waits until the exporter holds n spans of job id's
// attempts, and returns them by attempt number.
func attemptSpans(t *testing.T, exp *tracetest.InMemoryExporter, id int64, n int) map[int64]tracetest.SpanStub {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := map[int64]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			a := attrs(s)
			if a[job.AttrJobID].AsInt64() == id {
				out[a[job.AttrAttempt].AsInt64()] = s
			}
		}
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: %d attempt spans exported, want %d", id, len(out), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// A job enqueued inside a span stores that span's trace context, and each
// of its attempts is a span of its own trace that links to it, named after
// the kind, with the job's id, kind, queue, attempt and outcome; the
// handler runs inside its attempt's span. Remove the link or an attribute
// and this fails.
func TestAttemptSpansLinkToTheEnqueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp, exp := tracer(t)
	var (
		mu      sync.Mutex
		inSpans = map[int]trace.SpanContext{}
	)
	e.reg.HandleFunc("flaky", func(ctx context.Context, j *job.Job) error {
		mu.Lock()
		inSpans[j.Attempt] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		if j.Attempt == 1 {
			return errors.New("boom")
		}
		return nil
	}, job.KindOptions{Backoff: job.ConstantBackoff(time.Millisecond)})

	ctx, enqueueSpan := tp.Tracer("test").Start(context.Background(), "enqueue")
	state, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	parent := enqueueSpan.SpanContext().WithTraceState(state)
	ctx = trace.ContextWithSpanContext(ctx, parent)
	res, err := e.client.Enqueue(ctx, job.Request{Kind: "flaky", Queue: "traced", MaxAttempts: 3})
	enqueueSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	wantParent := fmt.Sprintf("00-%s-%s-01", parent.TraceID(), parent.SpanID())
	if res.Job.TraceParent != wantParent || res.Job.TraceState != "vendor=abc" {
		t.Fatalf("stored trace context %q %q, want %q %q", res.Job.TraceParent, res.Job.TraceState, wantParent, "vendor=abc")
	}
	e.startWorker(job.WorkerConfig{TracerProvider: tp, NodeID: "node-t", Queues: map[string]int{"traced": 1}, PollInterval: 20 * time.Millisecond})
	e.waitState(res.Job.ID, job.Completed)

	spans := attemptSpans(t, exp, res.Job.ID, 2)
	for attempt, outcome := range map[int64]string{1: job.OutcomeRetry, 2: job.OutcomeCompleted} {
		s, ok := spans[attempt]
		if !ok {
			t.Fatalf("no span of attempt %d", attempt)
		}
		if s.Name != "process flaky" || s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("attempt %d: span %q of kind %s, want \"process flaky\", consumer", attempt, s.Name, s.SpanKind)
		}
		if s.Parent.IsValid() || s.SpanContext.TraceID() == parent.TraceID() {
			t.Errorf("attempt %d: the span is a child of %s, want a root of its own trace", attempt, s.Parent.SpanID())
		}
		if len(s.Links) != 1 || !s.Links[0].SpanContext.Equal(parent.WithRemote(true)) {
			t.Errorf("attempt %d: links %+v, want one to the enqueue's span %s", attempt, s.Links, parent.SpanID())
		}
		a := attrs(s)
		want := map[attribute.Key]attribute.Value{
			job.AttrJobID: attribute.Int64Value(res.Job.ID), job.AttrKind: attribute.StringValue("flaky"),
			job.AttrQueue: attribute.StringValue("traced"), job.AttrAttempt: attribute.Int64Value(attempt),
			job.AttrOutcome: attribute.StringValue(outcome), job.AttrTenant: attribute.StringValue("default"),
			job.AttrNode: attribute.StringValue("node-t"),
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("attempt %d: %s = %v, want %v", attempt, k, a[k].Emit(), v.Emit())
			}
		}
		mu.Lock()
		in := inSpans[int(attempt)]
		mu.Unlock()
		if !in.Equal(s.SpanContext) {
			t.Errorf("attempt %d: the handler ran in span %s, want its attempt's %s", attempt, in.SpanID(), s.SpanContext.SpanID())
		}
	}
	if s := spans[1]; s.Status.Code != codes.Error || len(s.Events) == 0 || s.Events[0].Name != "exception" {
		t.Errorf("failed attempt: status %+v, events %+v; want an error and an exception event", s.Status, s.Events)
	}
	if s := spans[2]; s.Status.Code == codes.Error {
		t.Errorf("completed attempt has status %+v", s.Status)
	}
}

// A job enqueued outside any trace stores none, and its attempt's span
// has no link.
func TestAttemptSpanWithoutEnqueueTrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp, exp := tracer(t)
	e.reg.HandleFunc("plain", func(ctx context.Context, j *job.Job) error { return job.Permanent(errors.New("no")) })
	e.startWorker(job.WorkerConfig{TracerProvider: tp, PollInterval: 20 * time.Millisecond})
	j := e.enqueue(job.Request{Kind: "plain"})
	if j.TraceParent != "" || j.TraceState != "" {
		t.Fatalf("stored trace context %q %q, want none", j.TraceParent, j.TraceState)
	}
	e.waitState(j.ID, job.Failed)
	s := attemptSpans(t, exp, j.ID, 1)[1]
	if len(s.Links) != 0 {
		t.Errorf("links %+v, want none", s.Links)
	}
	if got := attrs(s)[job.AttrOutcome].AsString(); got != job.OutcomeFailed {
		t.Errorf("outcome %q, want %q", got, job.OutcomeFailed)
	}
}

// EnqueueMany stores the caller's trace context with every job.
func TestEnqueueManyStoresTraceContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp, _ := tracer(t)
	ctx, span := tp.Tracer("test").Start(context.Background(), "enqueue")
	defer span.End()
	ids, err := e.client.EnqueueMany(ctx, []job.Request{{Kind: "a"}, {Kind: "b"}, {Kind: "c", UniqueKey: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("00-%s-%s-01", span.SpanContext().TraceID(), span.SpanContext().SpanID())
	for _, id := range ids {
		j, err := e.client.Get(context.Background(), "", id)
		if err != nil {
			t.Fatal(err)
		}
		if j.TraceParent != want {
			t.Errorf("job %d: traceparent %q, want %q", id, j.TraceParent, want)
		}
	}
}
