package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// POST /v1/jobs with unique_states and unique_for: the window holds the
// key (200, existing) and lets a new job in once it no longer does; bad
// windows are refused naming the field, with nothing written.
func TestEnqueueUniqueWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type out struct {
		Job      jobOut
		Existing bool
	}
	post := func(body string) (int, out) {
		t.Helper()
		r := e.do(e.writer, "POST", "/v1/jobs", body)
		var o out
		if r.Status == 200 || r.Status == 201 {
			r.decode(t, &o)
		} else {
			t.Fatalf("%s: status %d %s", body, r.Status, r.Body)
		}
		return r.Status, o
	}
	body := `{"kind":"k","unique_key":"daily","unique_for":"1h","unique_states":["pending","running","retrying","completed","cancelled"],"delay":"1h"}`
	st1, first := post(body)
	st2, second := post(body)
	if st1 != 201 || first.Existing || st2 != 200 || !second.Existing || second.Job.ID != first.Job.ID {
		t.Fatalf("window: %d %+v, %d %+v", st1, first, st2, second)
	}
	// Cancelled is among the states: still held.
	if r := e.do(e.writer, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", first.Job.ID), nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if st, o := post(body); st != 200 || o.Job.ID != first.Job.ID || o.Job.State != "cancelled" {
		t.Fatalf("cancelled holder: %d %+v", st, o)
	}
	// A window without cancelled: a new job.
	if st, o := post(`{"kind":"k","unique_key":"daily","unique_states":["pending"],"delay":"1h"}`); st != 201 || o.Existing {
		t.Fatalf("pending-only window over a cancelled holder: %d %+v", st, o)
	}
	var key string
	if err := e.st.Pool().QueryRow(t.Context(), `SELECT unique_window_key FROM gaffer.jobs WHERE id = $1`, first.Job.ID).Scan(&key); err != nil || key != "daily" {
		t.Fatalf("stored key %q, %v", key, err)
	}

	before := e.count(`SELECT count(*) FROM gaffer.jobs`)
	for _, c := range []struct{ body, field string }{
		{`{"kind":"k","unique_key":"u","unique_for":"0s"}`, "unique_for"},
		{`{"kind":"k","unique_key":"u","unique_for":"500ms"}`, "unique_for"},
		{`{"kind":"k","unique_key":"u","unique_for":"8785h"}`, "unique_for"},
		{`{"kind":"k","unique_key":"u","unique_for":"-1h"}`, "unique_for"},
		{`{"kind":"k","unique_key":"u","unique_for":"soon"}`, "unique_for"},
		{`{"kind":"k","unique_key":"u","unique_states":[]}`, "unique_states"},
		{`{"kind":"k","unique_key":"u","unique_states":["done"]}`, "unique_states"},
		{`{"kind":"k","unique_key":"u","unique_states":["pending","pending","pending","pending","pending","pending","pending","pending"]}`, "unique_states"},
		{`{"kind":"k","unique_for":"1h"}`, "unique_key"},
		{`{"kind":"k","unique_states":["pending"]}`, "unique_key"},
		{`{"kind":"k","unique_key":"` + strings.Repeat("u", 256) + `","unique_for":"1h"}`, "unique_key"},
	} {
		p := e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", c.body), 400, "invalid_field")
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q", c.body, p.Field, c.field)
		}
	}
	if after := e.count(`SELECT count(*) FROM gaffer.jobs`); after != before {
		t.Fatalf("refused enqueues wrote %d jobs", after-before)
	}
}

// POST /v1/jobs with debounce: the second enqueue of the key answers the
// first job, 200 with "debounced": true, its args replaced; bad
// debounces are refused naming the field.
func TestEnqueueDebounce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type out struct {
		Job       jobOut
		Existing  bool
		Debounced bool
	}
	var a, b out
	first := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","args":{"n":1},"debounce":{"key":"sync-42","window":"1h","max_wait":"2h"}}`)
	second := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","args":{"n":2},"debounce":{"key":"sync-42","window":"1h"}}`)
	first.decode(t, &a)
	second.decode(t, &b)
	if first.Status != 201 || a.Debounced || second.Status != 200 || !b.Debounced || b.Existing || b.Job.ID != a.Job.ID || b.Job.Args["n"] != float64(2) {
		t.Fatalf("debounce: %d %+v, %d %+v", first.Status, a, second.Status, b)
	}
	before := e.count(`SELECT count(*) FROM gaffer.jobs`)
	for _, c := range []struct{ body, field string }{
		{`{"kind":"k","debounce":{"window":"1s"}}`, "debounce.key"},
		{`{"kind":"k","debounce":{"key":"k"}}`, "debounce.window"},
		{`{"kind":"k","debounce":{"key":"k","window":"soon"}}`, "debounce.window"},
		{`{"kind":"k","debounce":{"key":"k","window":"1m","max_wait":"1s"}}`, "debounce.max_wait"},
		{`{"kind":"k","debounce":{"key":"k","window":"1m","max_wait":"0s"}}`, "debounce.max_wait"},
		{`{"kind":"k","delay":"1m","debounce":{"key":"k","window":"1m"}}`, "debounce"},
		{`{"kind":"k","unique_key":"u","debounce":{"key":"k","window":"1m"}}`, "debounce"},
		{`{"kind":"k","debounce":{"key":"` + strings.Repeat("k", 256) + `","window":"1m"}}`, "debounce.key"},
	} {
		p := e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", c.body), 400, "invalid_field")
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q", c.body, p.Field, c.field)
		}
	}
	if after := e.count(`SELECT count(*) FROM gaffer.jobs`); after != before {
		t.Fatalf("refused enqueues wrote %d jobs", after-before)
	}
}
