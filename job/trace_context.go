package job

import (
	"context"
	"encoding/hex"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// MaxTraceStateBytes bounds the tracestate stored with a job: the W3C
// Trace Context's own bound for what a participant must pass on. Longer
// ones lose entries as that specification says (those over 128 bytes
// first, then from the end).
const MaxTraceStateBytes = 512

// traceParentLen is the length of a version-00 traceparent, the only
// form stored.
const traceParentLen = 55

// traceContextOf is the W3C trace context of the span in ctx, as stored
// with a job: a version-00 traceparent and a bounded tracestate, or ""
// and "" when ctx holds no valid span context. Whatever the caller sent
// was parsed into ctx already (the API extracts its headers with the
// OpenTelemetry propagator, which drops a malformed traceparent), so
// what is stored is re-rendered, never copied.
func traceContextOf(ctx context.Context) (parent, state string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return formatTraceParent(sc), boundTraceState(sc.TraceState())
}

// formatTraceParent renders sc as a version-00 traceparent.
func formatTraceParent(sc trace.SpanContext) string {
	var b [traceParentLen]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// parseTraceParent reads a stored traceparent (and its tracestate) back
// into a remote span context; ok is false for anything but a valid
// version-00 traceparent.
func parseTraceParent(parent, state string) (sc trace.SpanContext, ok bool) {
	if len(parent) != traceParentLen || !strings.HasPrefix(parent, "00-") || parent[35] != '-' || parent[52] != '-' {
		return sc, false
	}
	tid, err := trace.TraceIDFromHex(parent[3:35])
	if err != nil {
		return sc, false
	}
	sid, err := trace.SpanIDFromHex(parent[36:52])
	if err != nil {
		return sc, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(parent[53:])); err != nil {
		return sc, false
	}
	ts, _ := trace.ParseTraceState(state) // stored by us: valid, or "" after a bad one
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), TraceState: ts, Remote: true})
	return sc, sc.IsValid()
}

// boundTraceState renders ts in at most MaxTraceStateBytes: entries
// longer than 128 bytes go first, then entries from the end.
func boundTraceState(ts trace.TraceState) string {
	s := ts.String()
	if len(s) <= MaxTraceStateBytes {
		return s
	}
	var members []string
	ts.Walk(func(k, v string) bool {
		members = append(members, k+"="+v)
		return true
	})
	for i := 0; joinedLen(members) > MaxTraceStateBytes && i < len(members); {
		if len(members[i]) > 128 {
			members = slices.Delete(members, i, i+1)
		} else {
			i++
		}
	}
	for joinedLen(members) > MaxTraceStateBytes {
		members = members[:len(members)-1]
	}
	return strings.Join(members, ",")
}

// joinedLen is the length of the members joined with commas.
func joinedLen(members []string) int {
	n := max(len(members)-1, 0)
	for _, m := range members {
		n += len(m)
	}
	return n
}
