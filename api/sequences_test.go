package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Sequences through the API: the first job of a sequence takes the turn,
// later ones are held; a sequence is its tenant's alone; hostile values
// are refused with the field named and nothing written; resume refuses a
// sequence that is not halted.
func TestSequencesThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type out struct{ Job jobOut }
	var a, b out
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"idle","sequence":{"key":"acct/42"}}`).decode(t, &a)
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","queue":"idle","args":{"n":2},"sequence":{"key":"acct/42","on_failure":"continue"}}`).decode(t, &b)
	if a.Job.State != "pending" || b.Job.State != "held" {
		t.Fatalf("states %s, %s; want pending, held", a.Job.State, b.Job.State)
	}
	path := "/v1/sequences/" + url.PathEscape("acct/42")
	var st struct {
		Tenant   string
		Key      string
		Head     int64
		HaltedBy int64 `json:"halted_by"`
		Held     int64
	}
	e.do(e.reader, "GET", path, "").decode(t, &st)
	if st.Key != "acct/42" || st.Head != a.Job.ID || st.Held != 1 || st.HaltedBy != 0 || st.Tenant != "default" {
		t.Fatalf("sequence %+v", st)
	}
	// Another tenant's sequence of the same key is its own.
	var c out
	e.do(e.acme, "POST", "/v1/jobs", `{"kind":"k","queue":"idle","sequence":{"key":"acct/42"}}`).decode(t, &c)
	if c.Job.State != "pending" {
		t.Fatalf("acme's first job of its own sequence is %s", c.Job.State)
	}
	e.expectProblem(e.do(e.acme, "GET", "/v1/sequences/none", ""), 404, "not_found")
	e.expectProblem(e.do(e.writer, "POST", path+"/resume", ""), 409, "conflict")
	var list struct{ Data []jobOut }
	e.do(e.reader, "GET", "/v1/jobs?sequence="+url.QueryEscape("acct/42"), "").decode(t, &list)
	if len(list.Data) != 2 || list.Data[0].ID != b.Job.ID || list.Data[1].ID != a.Job.ID {
		t.Fatalf("?sequence= listed %+v", list.Data)
	}

	before := e.count(`SELECT count(*) FROM gaffer.jobs`)
	for _, c := range []struct{ body, field string }{
		{`{"kind":"k","sequence":{}}`, "sequence.key"},
		{`{"kind":"k","sequence":{"key":"` + strings.Repeat("k", 256) + `"}}`, "sequence.key"},
		{`{"kind":"k","sequence":{"key":"a","key_args":["x"]}}`, "sequence.key_args"},
		{`{"kind":"k","sequence":{"key_args":["a","b","c","d","e","f","g","h","i"]}}`, "sequence.key_args"},
		{`{"kind":"k","args":{"a":1},"sequence":{"key_args":[""]}}`, "sequence.key_args[0]"},
		{`{"kind":"k","args":[1],"sequence":{"key_args":["a"]}}`, "sequence.key_args"},
		{`{"kind":"k","sequence":{"key":"a","on_failure":"retry"}}`, "sequence.on_failure"},
		{`{"kind":"k","unique_key":"u","sequence":{"key":"a"}}`, "sequence"},
		{`{"kind":"k","debounce":{"key":"d","window":"1s"},"sequence":{"key":"a"}}`, "sequence"},
	} {
		p := e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", c.body), 400, "invalid_field")
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q", c.body, p.Field, c.field)
		}
	}
	if after := e.count(`SELECT count(*) FROM gaffer.jobs`); after != before {
		t.Fatalf("refused enqueues wrote %d jobs", after-before)
	}
	// A bulk cancel takes held jobs too (and a cancelled head passes the
	// turn on).
	var bulk struct{ Acted int }
	e.do(e.writer, "POST", "/v1/jobs/cancel", fmt.Sprintf(`{"ids":[%d]}`, b.Job.ID)).decode(t, &bulk)
	if bulk.Acted != 1 {
		t.Fatalf("bulk cancel of a held job acted on %d", bulk.Acted)
	}
	// A key derived from the kind and args fields.
	var d out
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"acct.sync","queue":"idle","args":{"account":42,"x":1},"sequence":{"key_args":["account"]}}`).decode(t, &d)
	e.do(e.reader, "GET", "/v1/sequences/"+url.PathEscape("acct.sync(42)"), "").decode(t, &st)
	if st.Head != d.Job.ID {
		t.Fatalf("derived key: %+v, job %d", st, d.Job.ID)
	}
}
