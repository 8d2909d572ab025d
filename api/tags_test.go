package api_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// POST /v1/jobs with tags, GET /v1/jobs by tag (all, any), by args fields
// and kind, only within the token's tenant; a bulk cancel by the same
// filter acts on exactly those jobs; bad tags and parameters are refused
// naming them, with nothing written. Red with tagsAndArgsParams not
// reading the parameters (the lists come back unfiltered).
func TestTagsAndSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type out struct {
		Job struct {
			ID   int64
			Tags []string
		}
	}
	enqueue := func(token, body string) int64 {
		t.Helper()
		r := e.do(token, "POST", "/v1/jobs", body)
		if r.Status != 201 {
			t.Fatalf("%s: %d %s", body, r.Status, r.Body)
		}
		var o out
		r.decode(t, &o)
		return o.Job.ID
	}
	a := enqueue(e.writer, `{"kind":"report","args":{"customer":42,"region":"eu"},"tags":["billing","env:prod"],"delay":"1h"}`)
	b := enqueue(e.writer, `{"kind":"report","args":{"customer":7,"region":"eu"},"tags":["billing"],"delay":"1h"}`)
	c := enqueue(e.writer, `{"kind":"email","args":{"customer":42,"region":"us"},"tags":["env:prod","billing","env:prod"],"delay":"1h"}`)
	d := enqueue(e.writer, `{"kind":"email","args":{"customer":"42"},"delay":"1h"}`)
	x := enqueue(e.acme, `{"kind":"report","args":{"customer":42},"tags":["billing","env:prod"],"delay":"1h"}`)

	var got struct {
		Tags []string
	}
	e.do(e.reader, "GET", fmt.Sprintf("/v1/jobs/%d", c), nil).decode(t, &got)
	if !slices.Equal(got.Tags, []string{"env:prod", "billing"}) {
		t.Fatalf("job %d tags %q", c, got.Tags)
	}
	list := func(token, query string) []int64 {
		t.Helper()
		r := e.do(token, "GET", "/v1/jobs?"+query, nil)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", query, r.Status, r.Body)
		}
		var l struct {
			Data []struct {
				ID   int64
				Tags []string
			}
		}
		r.decode(t, &l)
		var ids []int64
		for _, j := range l.Data {
			ids = append(ids, j.ID)
		}
		return ids
	}
	for _, q := range []struct {
		query string
		want  []int64
	}{
		{"tag=billing", []int64{c, b, a}},
		{"tag=billing&tag=env:prod", []int64{c, a}},
		{"tag=billing&tag=env:prod&tags_match=all", []int64{c, a}},
		{"tag=nope&tag=env:prod&tags_match=any", []int64{c, a}},
		{"tag=billing&kind=report", []int64{b, a}},
		{"args.customer=42", []int64{c, a}},
		{"args.customer=%2242%22", []int64{d}},
		{"args.customer=42&args.region=eu", []int64{a}},
		{"tag=billing&args.region=eu&limit=1", []int64{b}},
		{"args.region=us&tag=billing", []int64{c}},
	} {
		if ids := list(e.reader, q.query); !slices.Equal(ids, q.want) {
			t.Errorf("%s: %v, want %v", q.query, ids, q.want)
		}
	}
	if ids := list(e.acme, "tag=billing&args.customer=42"); !slices.Equal(ids, []int64{x}) {
		t.Errorf("acme's search: %v, want only its own job %d", ids, x)
	}

	// Refusals.
	before := e.count(`SELECT count(*) FROM gaffer.jobs`)
	for _, c := range []struct{ body, field string }{
		{`{"kind":"k","tags":["ok",""]}`, "tags[1]"},
		{`{"kind":"k","tags":["a b"]}`, "tags[0]"},
		{`{"kind":"k","tags":["` + strings.Repeat("t", 65) + `"]}`, "tags[0]"},
		{`{"kind":"k","tags":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]}`, "tags"},
		{`{"kind":"k","tags":"billing"}`, ""},
	} {
		r := e.do(e.writer, "POST", "/v1/jobs", c.body)
		if r.Status != 400 {
			t.Errorf("%s: %d %s", c.body, r.Status, r.Body)
			continue
		}
		if p := r.problem(t); c.field != "" && (p.Code != "invalid_field" || p.Field != c.field) {
			t.Errorf("%s: problem %+v; want invalid_field on %s", c.body, p, c.field)
		}
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != before {
		t.Fatalf("refused enqueues wrote %d jobs", n-before)
	}
	var nine []string
	for i := range 9 {
		nine = append(nine, fmt.Sprintf("args.k%d=1", i))
	}
	for _, q := range []string{"tag=a%20b", "tag=" + strings.Repeat("t", 65), "tags_match=some", strings.Join(nine, "&"),
		"args.=1", "args.a..b=1", "args.a=" + strings.Repeat("v", 257), "args." + strings.Repeat("p", 200) + "=1",
		strings.Repeat("tag=a&", 17) + "x=1"} {
		r := e.do(e.reader, "GET", "/v1/jobs?"+q, nil)
		if r.Status != 400 {
			t.Errorf("%.60s: %d %.200s", q, r.Status, r.Body)
		}
	}

	// Bulk by the search's filter.
	r := e.do(e.writer, "POST", "/v1/jobs/cancel", `{"filter":{"tags":["billing","env:prod"],"args":{"region":"eu"}},"dry_run":true}`)
	var res struct {
		Matched, Acted int
	}
	r.decode(t, &res)
	if r.Status != 200 || res.Matched != 1 {
		t.Fatalf("bulk dry run: %d %s", r.Status, r.Body)
	}
	r = e.do(e.writer, "POST", "/v1/jobs/cancel", `{"filter":{"tags":["nope","env:prod"],"tags_match":"any"}}`)
	r.decode(t, &res)
	if r.Status != 200 || res.Acted != 2 {
		t.Fatalf("bulk cancel by tag: %d %s", r.Status, r.Body)
	}
	if ids := list(e.reader, "state=cancelled"); !slices.Equal(ids, []int64{c, a}) {
		t.Fatalf("cancelled: %v, want %d, %d", ids, c, a)
	}
	if ids := list(e.acme, "state=cancelled"); len(ids) != 0 {
		t.Fatalf("acme's jobs cancelled by default's bulk call: %v", ids)
	}
	for _, body := range []string{`{"filter":{"tags":["a b"]}}`, `{"filter":{"tags_match":"most"}}`, `{"filter":{"args":{"a..b":1}}}`} {
		if r := e.do(e.writer, "POST", "/v1/jobs/cancel", body); r.Status != 400 || !strings.Contains(r.problem(t).Field, "filter.") {
			t.Errorf("%s: %d %s", body, r.Status, r.Body)
		}
	}
}

// An args search cut by the search window says so, and its next_cursor
// goes on past the window, where the older match is found.
func TestArgsSearchWindowCutOnTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","args":{"x":1},"delay":"1h"}`)
	if r.Status != 201 {
		t.Fatal(r.Status, string(r.Body))
	}
	if _, err := e.st.Pool().Exec(t.Context(), `INSERT INTO gaffer.jobs (tenant, kind, args) SELECT 'default', 'k', '{"x":0}' FROM generate_series(1, 10001)`); err != nil {
		t.Fatal(err)
	}
	var page struct {
		Data            []struct{ ID int64 }
		NextCursor      string `json:"next_cursor"`
		SearchWindowCut bool   `json:"search_window_cut"`
	}
	e.do(e.reader, "GET", "/v1/jobs?args.x=1", nil).decode(t, &page)
	if len(page.Data) != 0 || !page.SearchWindowCut || page.NextCursor == "" {
		t.Fatalf("first page: %+v", page)
	}
	cursor := page.NextCursor
	page.SearchWindowCut, page.NextCursor = false, ""
	e.do(e.reader, "GET", "/v1/jobs?args.x=1&cursor="+url.QueryEscape(cursor), nil).decode(t, &page)
	if len(page.Data) != 1 || page.SearchWindowCut || page.NextCursor != "" {
		t.Fatalf("second page: %+v", page)
	}
}
