package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// The trace context a job is inserted with comes back from every path
// (one insert, COPY, and the unnest insert of batches with unique keys)
// and from the claim; what the columns hold is bounded by the table
// itself, whatever a caller skipped.
func TestTraceContextStoredAndBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := func(kind, unique string) store.InsertParams {
		p := params(kind)
		p.TraceParent, p.TraceState, p.UniqueKey = parent, "a=1", unique
		return p
	}
	res, err := st.InsertJob(ctx, st.Pool(), traced("one", ""))
	if err != nil || res.Job.TraceParent != parent || res.Job.TraceState != "a=1" {
		t.Fatalf("insert: %v, stored %q %q", err, res.Job.TraceParent, res.Job.TraceState)
	}
	many := make([]store.InsertParams, 0, 200)
	for range 100 {
		many = append(many, traced("copy", ""))
	}
	if _, err := st.InsertJobs(ctx, st.Pool(), many); err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertJobs(ctx, st.Pool(), []store.InsertParams{traced("unnest", "k1"), traced("unnest", "k2")}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE traceparent = $1 AND tracestate = 'a=1'`, parent).Scan(&n); err != nil || n != 103 {
		t.Fatalf("%d jobs carry the trace context, want 103 (%v)", n, err)
	}
	j := claimOne(t, st, 1)
	if j.TraceParent != parent || j.TraceState != "a=1" {
		t.Fatalf("claimed job %d with %q %q", j.ID, j.TraceParent, j.TraceState)
	}
	for name, p := range map[string]store.InsertParams{
		"uppercase traceparent": {TraceParent: strings.ToUpper(parent)},
		"long traceparent":      {TraceParent: parent + "-00"},
		"long tracestate":       {TraceParent: parent, TraceState: "a=" + strings.Repeat("x", 511)},
		"tracestate alone":      {TraceState: "a=1"},
	} {
		bad := params("bad")
		bad.TraceParent, bad.TraceState = p.TraceParent, p.TraceState
		if _, err := st.InsertJob(ctx, st.Pool(), bad); err == nil || !strings.Contains(err.Error(), "check") {
			t.Errorf("%s: inserted (%v)", name, err)
		}
	}
}
