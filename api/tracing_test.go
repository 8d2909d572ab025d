package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

const validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

type traced struct {
	Job struct {
		ID          int64  `json:"id"`
		TraceParent string `json:"traceparent"`
		TraceState  string `json:"tracestate"`
	} `json:"job"`
}

// enqueueWith enqueues a job with the given headers (each name may come
// more than once) and returns what the API says was stored, after
// checking the row agrees.
func (e *env) enqueueWith(headers ...string) traced {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/jobs", bytes.NewReader([]byte(`{"kind":"noop"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.writer)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("enqueue with %q: %d %s", headers, resp.StatusCode, buf.Bytes())
	}
	var out traced
	response{Body: buf.Bytes()}.decode(e.t, &out)
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1
		AND coalesce(traceparent, '') = $2 AND coalesce(tracestate, '') = $3`, out.Job.ID, out.Job.TraceParent, out.Job.TraceState); n != 1 {
		e.t.Fatalf("job %d: the row's trace context is not the view's %q %q", out.Job.ID, out.Job.TraceParent, out.Job.TraceState)
	}
	return out
}

// The traceparent header of an enqueue is stored with the job, with its
// tracestate, and shown in its view (checked against the OpenAPI
// document, whose pattern is the strict form).
func TestEnqueueStoresTraceContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(e.writer, "POST", "/v1/jobs", map[string]any{"kind": "noop"},
		"traceparent", validParent, "tracestate", "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE")
	var out traced
	r.decode(t, &out)
	if r.Status != http.StatusCreated || out.Job.TraceParent != validParent || out.Job.TraceState != "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" {
		t.Fatalf("%d: stored %q %q", r.Status, out.Job.TraceParent, out.Job.TraceState)
	}
	got := e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", out.Job.ID), nil)
	var view struct {
		TraceParent string `json:"traceparent"`
	}
	got.decode(t, &view)
	if view.TraceParent != validParent {
		t.Fatalf("GET shows traceparent %q", view.TraceParent)
	}
	// Several tracestate headers are one list, as the specification says.
	if out := e.enqueueWith("traceparent", validParent, "tracestate", "a=1", "tracestate", "b=2"); out.Job.TraceState != "a=1,b=2" {
		t.Errorf("two tracestate headers stored as %q", out.Job.TraceState)
	}
}

// A malformed or ambiguous traceparent is ignored, the same way every
// time: the job is enqueued (201) outside any trace, and no byte of the
// header is stored. A bad tracestate is dropped and the traceparent kept;
// a long valid one is cut to 512 bytes, whole entries, from the end.
func TestEnqueueIgnoresBadTraceContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, h := range map[string][]string{
		"uppercase":      {"traceparent", strings.ToUpper(validParent)},
		"version ff":     {"traceparent", "ff" + validParent[2:]},
		"future version": {"traceparent", "01" + validParent[2:] + "-extra"},
		"zero trace id":  {"traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		"trailing data":  {"traceparent", validParent + "-01"},
		"huge":           {"traceparent", validParent + strings.Repeat("0", 60000)},
		"sql":            {"traceparent", "00-'; DROP TABLE gaffer.jobs; --"},
		"two headers":    {"traceparent", validParent, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"state only":     {"tracestate", "a=1"},
	} {
		if out := e.enqueueWith(h...); out.Job.TraceParent != "" || out.Job.TraceState != "" {
			t.Errorf("%s: stored %q %q, want nothing", name, out.Job.TraceParent, out.Job.TraceState)
		}
	}
	for name, s := range map[string]string{
		"bad key":    "UPPER=1",
		"too many":   strings.Repeat("k=v,", 33) + "z=v",
		"huge value": "a=" + strings.Repeat("x", 60000),
	} {
		if out := e.enqueueWith("traceparent", validParent, "tracestate", s); out.Job.TraceParent != validParent || out.Job.TraceState != "" {
			t.Errorf("%s: stored %q %q, want the traceparent alone", name, out.Job.TraceParent, out.Job.TraceState)
		}
	}
	var members []string
	for i := range 30 {
		members = append(members, fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", 30)))
	}
	out := e.enqueueWith("traceparent", validParent, "tracestate", strings.Join(members, ","))
	if len(out.Job.TraceState) > 512 || !strings.HasPrefix(out.Job.TraceState, members[0]+","+members[1]) ||
		!strings.HasSuffix(out.Job.TraceState, "v") {
		t.Errorf("a %d-byte tracestate stored as %d bytes: %q", len(strings.Join(members, ",")), len(out.Job.TraceState), out.Job.TraceState)
	}
}

// A remote worker's claim carries the trace context each job was enqueued
// in, and none for a job enqueued outside a trace.
func TestClaimCarriesTraceContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	worker := e.token("default", "worker")
	var w workerOut
	e.do(worker, "POST", "/v1/workers", `{"name":"py-1","queues":["py"]}`).decode(t, &w)
	var traced, plain struct{ Job struct{ ID int64 } }
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"py"}`, "traceparent", validParent, "tracestate", "a=1").decode(t, &traced)
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"py"}`).decode(t, &plain)
	r := e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":2}`, w.ID))
	var c struct {
		Jobs []struct {
			ID          int64
			TraceParent *string `json:"traceparent"`
			TraceState  *string `json:"tracestate"`
		}
	}
	r.decode(t, &c)
	if r.Status != 200 || len(c.Jobs) != 2 {
		t.Fatalf("claim: %d %s", r.Status, r.Body)
	}
	for _, j := range c.Jobs {
		switch j.ID {
		case traced.Job.ID:
			if j.TraceParent == nil || *j.TraceParent != validParent || j.TraceState == nil || *j.TraceState != "a=1" {
				t.Errorf("traced job claimed with %s", r.Body)
			}
		case plain.Job.ID:
			if j.TraceParent != nil || j.TraceState != nil {
				t.Errorf("untraced job claimed with %s", r.Body)
			}
		}
	}
}
