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
// was parsed into ctx already (the API's headers by ParseTraceContext),
// so what is stored is re-rendered from the parsed ids, never copied.
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

// maxTraceStateInput bounds the tracestate text ParseTraceContext
// reads: the most a valid one can hold (32 members of a 256-byte key and
// a 256-byte value). Anything longer is invalid, and is not parsed.
const maxTraceStateInput = 32*(256+1+256) + 31

// ParseTraceContext reads W3C Trace Context headers strictly, as the API
// does with an enqueue's. traceparent must be a version-00 traceparent,
// exactly: "00-", 32 lowercase hex digits of trace id, "-", 16 of parent
// id, "-", 2 of flags, neither id all zeros, nothing before or after;
// ok is false for anything else (another version included), and the
// caller then ignores the trace context altogether. tracestate ("" for
// none; several headers joined with commas) comes along only with a
// valid traceparent, and is dropped, the traceparent kept, when it is not
// a valid tracestate. The span context returned is remote.
func ParseTraceContext(traceparent, tracestate string) (sc trace.SpanContext, ok bool) {
	p := traceparent
	if len(p) != traceParentLen || p[:3] != "00-" || p[35] != '-' || p[52] != '-' ||
		!lowerHex(p[3:35]) || !lowerHex(p[36:52]) || !lowerHex(p[53:]) {
		return sc, false
	}
	tid, err := trace.TraceIDFromHex(p[3:35]) // refuses all zeros
	if err != nil {
		return sc, false
	}
	sid, err := trace.SpanIDFromHex(p[36:52])
	if err != nil {
		return sc, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(p[53:])); err != nil {
		return sc, false
	}
	var ts trace.TraceState
	if tracestate != "" && len(tracestate) <= maxTraceStateInput {
		if parsed, err := trace.ParseTraceState(tracestate); err == nil {
			ts = parsed
		}
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), TraceState: ts, Remote: true})
	return sc, sc.IsValid()
}

// lowerHex is whether s is all lowercase hex digits.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
