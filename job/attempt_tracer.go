package job

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gafferhq/gaffer/internal/redact"
)

// TracerName is the instrumentation scope of the attempt spans.
const TracerName = "github.com/gafferhq/gaffer/job"

// Span attributes of an attempt. See docs/configuration.md, "Tracing".
const (
	AttrJobID     = attribute.Key("gaffer.job.id")
	AttrKind      = attribute.Key("gaffer.job.kind")
	AttrQueue     = attribute.Key("gaffer.job.queue")
	AttrTenant    = attribute.Key("gaffer.job.tenant")
	AttrAttempt   = attribute.Key("gaffer.job.attempt")
	AttrOutcome   = attribute.Key("gaffer.job.outcome")
	AttrErrorKind = attribute.Key("gaffer.job.error_kind")
	AttrNode      = attribute.Key("gaffer.node")
)

// Outcomes of an attempt, the values of AttrOutcome.
const (
	OutcomeCompleted = "completed" // the job completed
	OutcomeRetry     = "retry"     // it failed and will run again after its backoff
	OutcomeFailed    = "failed"    // it failed for good: the job is in the DLQ
	OutcomeCancelled = "cancelled" // the job was cancelled
	OutcomeSnoozed   = "snoozed"   // it asked to run again later (not a failed attempt)
	// OutcomeLost: the attempt no longer owned the job (its lease expired
	// or another attempt took over), or its outcome could not be written;
	// the job runs again.
	OutcomeLost = "lost"
	// OutcomeReleased: the node stopped and gave the job back without
	// using up the attempt.
	OutcomeReleased = "released"
)

// maxSpanErrorBytes bounds an error message recorded on a span: handler
// errors are anyone's text, and an exporter's batch has a size.
const maxSpanErrorBytes = 2048

// attemptTracer starts and ends the spans of a worker's attempts. A nil
// *attemptTracer is tracing switched off: every method does nothing.
//
// Each attempt is a span of kind consumer that is a root, not a child of
// the context the job was enqueued in, and links to that context: a job
// runs long after the request that enqueued it ended, up to
// MaxAttempts times, and one request may enqueue thousands of jobs; and
// a remote parent's sampled flag, which a tenant sets, would decide
// whether the operator's sampler records (see docs/configuration.md, "Tracing").
type attemptTracer struct {
	tracer trace.Tracer
	node   attribute.KeyValue
}

// newAttemptTracer returns the tracer of tp's attempt spans, or nil when
// tp is nil or the no-op provider: then attempts pay nothing for tracing.
// The global provider is not a default: until one is installed it still
// makes a span of every attempt, which records nothing but costs
// allocations on the claim-to-complete path.
func newAttemptTracer(tp trace.TracerProvider, node string) *attemptTracer {
	if tp == nil {
		return nil
	}
	if _, off := tp.(noop.TracerProvider); off {
		return nil
	}
	return &attemptTracer{tracer: tp.Tracer(TracerName), node: AttrNode.String(node)}
}

// start begins j's attempt span and returns ctx carrying it. known is
// whether the kind has a handler here: only registered kinds, which the
// operator chose, name spans.
func (t *attemptTracer) start(ctx context.Context, j *Job, known bool) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	name := "process unregistered kind"
	if known {
		name = "process " + j.Kind
	}
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			AttrJobID.Int64(j.ID), AttrKind.String(j.Kind), AttrQueue.String(j.Queue),
			AttrTenant.String(j.Tenant), AttrAttempt.Int(j.Attempt), t.node,
			attribute.String("messaging.system", "gaffer"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", j.Queue),
		),
	}
	if sc, ok := ParseTraceContext(j.TraceParent, j.TraceState); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return t.tracer.Start(ctx, name, opts...)
}

// attemptEnd is how an attempt ended, for its span.
type attemptEnd struct {
	outcome string
	// err is the handler's error, or why the outcome could not be
	// written; errKind and stack as in AttemptError.
	err     error
	errKind string
	stack   string
}

// end records how the attempt ended and ends span (nil: tracing off).
func endAttempt(span trace.Span, a attemptEnd) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrOutcome.String(a.outcome))
	if a.errKind != "" {
		span.SetAttributes(AttrErrorKind.String(a.errKind))
	}
	var msg string
	if a.err != nil {
		// Stored errors are redacted (a failed call's error quotes its
		// URL); so is what goes to the operator's trace backend.
		msg = boundText(redact.URLs(a.err.Error()), maxSpanErrorBytes)
		attrs := []attribute.KeyValue{
			attribute.String("exception.type", fmt.Sprintf("%T", a.err)),
			attribute.String("exception.message", msg),
		}
		if a.stack != "" {
			attrs = append(attrs, attribute.String("exception.stacktrace", boundText(a.stack, 8*maxSpanErrorBytes)))
		}
		span.AddEvent("exception", trace.WithAttributes(attrs...))
	}
	switch a.outcome {
	case OutcomeRetry, OutcomeFailed, OutcomeLost:
		if msg == "" {
			msg = a.outcome
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// boundText cuts s to at most n bytes, on a rune boundary.
func boundText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") // a rune cut in two is dropped
}
