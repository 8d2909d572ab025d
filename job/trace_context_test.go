package job_test

import (
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/job"
)

const validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// The traceparent a tenant sends is read strictly: one exact version-00
// form, or nothing.
func TestParseTraceContext(t *testing.T) {
	t.Parallel()
	sc, ok := job.ParseTraceContext(validParent, "")
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" ||
		!sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("valid traceparent: %v %+v", ok, sc)
	}
	if sc, ok := job.ParseTraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""); !ok || sc.IsSampled() {
		t.Fatalf("unsampled traceparent: %v %+v", ok, sc)
	}
	for name, p := range map[string]string{
		"empty":            "",
		"uppercase hex":    strings.ToUpper(validParent),
		"uppercase flags":  validParent[:53] + "0A",
		"zero trace id":    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"zero parent id":   "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"version ff":       "ff" + validParent[2:],
		"future version":   "01" + validParent[2:],
		"future with tail": "01" + validParent[2:] + "-what-ever",
		"trailing data":    validParent + "-00",
		"trailing space":   validParent + " ",
		"leading space":    " " + validParent,
		"short trace id":   "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
		"long":             validParent + strings.Repeat("a", 8000),
		"not hex":          "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
		"wrong separator":  "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
		"plus sign":        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-+1",
		"newline":          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7\n01",
	} {
		if _, ok := job.ParseTraceContext(p, "a=b"); ok {
			t.Errorf("%s: %q accepted", name, p)
		}
	}
	// A bad tracestate is dropped; the traceparent stays.
	for name, s := range map[string]string{
		"bad key":        "UPPER=1",
		"33 members":     strings.Repeat("k=v,", 32) + "z=v",
		"duplicate keys": "a=1,a=2",
		"huge":           "a=" + strings.Repeat("x", 100000),
	} {
		sc, ok := job.ParseTraceContext(validParent, s)
		if !ok || sc.TraceState().Len() != 0 {
			t.Errorf("%s: ok %v, tracestate %q; want the traceparent without it", name, ok, sc.TraceState())
		}
	}
	if sc, ok := job.ParseTraceContext(validParent, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"); !ok || sc.TraceState().Get("congo") != "t61rcWkgMzE" {
		t.Errorf("valid tracestate: %v %q", ok, sc.TraceState())
	}
}
