package api_test

import (
	"fmt"
	"strings"
	"testing"
)

type batchOut struct {
	ID            int64            `json:"id"`
	Tenant        string           `json:"tenant"`
	State         string           `json:"state"`
	Total         int64            `json:"total"`
	Counts        map[string]int64 `json:"counts"`
	CallbackJobID int64            `json:"callback_job_id"`
}

// The batch endpoints: open, add (through POST /v1/jobs and
// /v1/batches/{id}/jobs), get, list, the jobs filter, close (the callback
// is enqueued once), a closed batch refusing jobs with 409 and nothing
// written, another tenant's batch a 404 everywhere, open-and-close in one
// call, cancel. Every answer is checked against the OpenAPI document.
func TestBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var b batchOut
	r := e.do(e.writer, "POST", "/v1/batches", `{"callback":{"kind":"import.done","args":{"file":"a.csv"}}}`)
	r.decode(t, &b)
	if r.Status != 201 || b.State != "open" || b.Tenant != "default" {
		t.Fatalf("open: %d %s", r.Status, r.Body)
	}
	one := e.do(e.writer, "POST", "/v1/jobs", fmt.Sprintf(`{"kind":"import.row","batch":%d}`, b.ID))
	if one.Status != 201 {
		t.Fatalf("enqueue into batch: %d %s", one.Status, one.Body)
	}
	var added struct{ IDs []int64 }
	r = e.do(e.writer, "POST", fmt.Sprintf("/v1/batches/%d/jobs", b.ID), `{"jobs":[{"kind":"import.row","args":{"n":1}},{"kind":"import.row","args":{"n":2}}]}`)
	r.decode(t, &added)
	if r.Status != 201 || len(added.IDs) != 2 {
		t.Fatalf("add jobs: %d %s", r.Status, r.Body)
	}
	r = e.do(e.reader, "GET", fmt.Sprintf("/v1/batches/%d", b.ID), "")
	r.decode(t, &b)
	if r.Status != 200 || b.Total != 3 || b.Counts["pending"] != 3 {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}
	var jobs struct {
		Items []struct{ ID int64 } `json:"data"`
	}
	r = e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs?batch=%d", b.ID), "")
	r.decode(t, &jobs)
	if r.Status != 200 || len(jobs.Items) != 3 {
		t.Fatalf("jobs?batch: %d %s", r.Status, r.Body)
	}
	// Another tenant: 404 for each, nothing written.
	before := e.count(`SELECT count(*) FROM gaffer.jobs`)
	for _, c := range []struct{ method, path, body string }{
		{"GET", fmt.Sprintf("/v1/batches/%d", b.ID), ""},
		{"POST", fmt.Sprintf("/v1/batches/%d/close", b.ID), ""},
		{"POST", fmt.Sprintf("/v1/batches/%d/cancel", b.ID), ""},
		{"POST", fmt.Sprintf("/v1/batches/%d/jobs", b.ID), `{"jobs":[{"kind":"x"}]}`},
		{"POST", "/v1/jobs", fmt.Sprintf(`{"kind":"x","batch":%d}`, b.ID)},
	} {
		e.expectProblem(e.do(e.acme, c.method, c.path, c.body), 404, "not_found")
	}
	var list struct {
		Items []batchOut `json:"data"`
	}
	e.do(e.acme, "GET", "/v1/batches", "").decode(t, &list)
	if len(list.Items) != 0 {
		t.Fatalf("acme lists default's batches: %+v", list)
	}
	e.do(e.reader, "GET", "/v1/batches?state=open", "").decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != b.ID {
		t.Fatalf("list open: %+v", list)
	}
	// Close: the jobs are pending, so it waits; then refuses jobs.
	r = e.do(e.writer, "POST", fmt.Sprintf("/v1/batches/%d/close", b.ID), "")
	r.decode(t, &b)
	if r.Status != 200 || b.State != "closed" {
		t.Fatalf("close: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", fmt.Sprintf(`{"kind":"x","batch":%d}`, b.ID)), 409, "conflict")
	e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/batches/%d/jobs", b.ID), `{"jobs":[{"kind":"x"}]}`), 409, "conflict")
	if after := e.count(`SELECT count(*) FROM gaffer.jobs`); after != before {
		t.Fatalf("refused adds wrote %d jobs", after-before)
	}
	// Cancel: its pending jobs end cancelled, the callback is enqueued.
	r = e.do(e.writer, "POST", fmt.Sprintf("/v1/batches/%d/cancel", b.ID), "")
	r.decode(t, &b)
	if r.Status != 200 || b.State != "finished" || b.Counts["cancelled"] != 3 || b.CallbackJobID == 0 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE kind = 'import.done' AND tenant = 'default'`); n != 1 {
		t.Fatalf("%d callbacks", n)
	}
	// A batch in one call: open, its jobs, closed.
	r = e.do(e.acme, "POST", "/v1/batches", `{"callback":{"kind":"done"},"jobs":[{"kind":"a"},{"kind":"b"}],"close":true}`)
	r.decode(t, &b)
	if r.Status != 201 || b.State != "closed" || b.Total != 2 || b.Tenant != "acme" {
		t.Fatalf("open and close: %d %s", r.Status, r.Body)
	}
	// An empty batch closed at once: its callback is enqueued at once.
	r = e.do(e.writer, "POST", "/v1/batches", `{"callback":{"kind":"done"},"close":true}`)
	r.decode(t, &b)
	if r.Status != 201 || b.State != "finished" || b.CallbackJobID == 0 {
		t.Fatalf("empty batch closed: %d %s", r.Status, r.Body)
	}
	// Refusals.
	for _, c := range []struct{ body, field string }{
		{`{"callback":{}}`, "callback.kind"},
		{`{"callback":{"kind":"bad kind"}}`, "callback.kind"},
		{`{"callback":{"kind":"k","queue":"Bad Queue"}}`, "callback.queue"},
		{`{"callback":{"kind":"k","args":{"x":"` + strings.Repeat("x", 70000) + `"}}}`, "callback.args"},
		{`{"callback":{"kind":"k"},"jobs":[{"kind":"ok"},{"kind":"bad kind"}]}`, "jobs[1].kind"},
	} {
		p := e.expectProblem(e.do(e.writer, "POST", "/v1/batches", c.body), 400, "invalid_field")
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q", c.body[:min(len(c.body), 80)], p.Field, c.field)
		}
	}
	// A job refused by its kind's check (an http job to loopback) after
	// the batch was opened: nothing is written, the batch neither.
	batches := e.count(`SELECT count(*) FROM gaffer.batches`)
	jobsBefore := e.count(`SELECT count(*) FROM gaffer.jobs`)
	e.expectProblem(e.do(e.writer, "POST", "/v1/batches",
		`{"callback":{"kind":"done"},"jobs":[{"kind":"a"},{"kind":"http","args":{"url":"http://127.0.0.1:1/x"}}],"close":true}`), 400, "destination_not_allowed")
	if e.count(`SELECT count(*) FROM gaffer.batches`) != batches || e.count(`SELECT count(*) FROM gaffer.jobs`) != jobsBefore {
		t.Fatal("a refused batch wrote rows")
	}
	e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", `{"kind":"x","batch":-1}`), 400, "invalid_field")
	if r := e.do(e.writer, "GET", "/v1/batches?state=done", ""); r.Status != 400 {
		t.Fatalf("bad state filter: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do(e.writer, "GET", "/v1/batches/999999", ""), 404, "not_found")
}
