package api_test

import (
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/job"
)

// The bulk endpoints act within the token's tenant only, bound each call,
// count on a dry run and refuse bad input with the field named.
func TestBulkJobsEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	enqueue := func(token, queue string) int64 {
		var r struct{ Job struct{ ID int64 } }
		e.do(token, "POST", "/v1/jobs", map[string]any{"kind": "k", "queue": queue}).decode(t, &r)
		return r.Job.ID
	}
	var mine []int64
	for range 5 {
		mine = append(mine, enqueue(e.writer, "q"))
	}
	theirs := enqueue(e.acme, "q")

	var dry job.BulkResult
	r := e.do(e.writer, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"queue": "q", "state": []string{"pending"}}, "dry_run": true})
	r.decode(t, &dry)
	if r.Status != 200 || dry.Matched != 5 || dry.Acted != 0 || dry.More || !dry.DryRun {
		t.Fatalf("dry run → %d %s; want 5 matched (tenant default's only)", r.Status, r.Body)
	}

	// Bounded: two of five, more remain.
	var first job.BulkResult
	e.do(e.writer, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"queue": "q"}, "limit": 2}).decode(t, &first)
	if first.Acted != 2 || !first.More {
		t.Fatalf("limit 2 → %+v", first)
	}
	// By ids: another tenant's id is not found, and stays pending.
	var byIDs job.BulkResult
	e.do(e.writer, "POST", "/v1/jobs/cancel", map[string]any{"ids": append(mine, theirs)}).decode(t, &byIDs)
	if byIDs.Acted != 3 || len(byIDs.Skipped) != 3 {
		t.Fatalf("by ids → %+v; want 3 acted, the 2 cancelled before and acme's skipped", byIDs)
	}
	for _, s := range byIDs.Skipped {
		if s.ID == theirs && s.Reason != "not found" {
			t.Fatalf("acme's job skipped as %q, want not found", s.Reason)
		}
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1 AND state = 'pending'`, theirs); n != 1 {
		t.Fatal("tenant default's token cancelled acme's job")
	}
	// A tenant token naming another tenant is refused.
	e.expectProblem(e.do(e.writer, "POST", "/v1/jobs/delete", map[string]any{"tenant": "acme", "filter": map[string]any{}}), 403, "forbidden")
	// The admin reaches acme's job by tenant; delete removes it.
	var del job.BulkResult
	e.do(e.admin, "POST", "/v1/jobs/delete", map[string]any{"tenant": "acme", "filter": map[string]any{}}).decode(t, &del)
	if del.Acted != 1 || e.count(`SELECT count(*) FROM gaffer.jobs WHERE tenant = 'acme'`) != 0 {
		t.Fatalf("admin delete in acme → %+v", del)
	}
	// Retry of cancelled jobs: nothing to retry, reasons given.
	var retry job.BulkResult
	e.do(e.writer, "POST", "/v1/jobs/retry", map[string]any{"ids": mine[:1]}).decode(t, &retry)
	if retry.Acted != 0 || len(retry.Skipped) != 1 || !strings.Contains(retry.Skipped[0].Reason, "it is cancelled") {
		t.Fatalf("retry → %+v", retry)
	}

	// Bad input: 400 naming the field, nothing changed.
	many := make([]int64, job.MaxBulkIDs+1)
	for i := range many {
		many[i] = int64(i + 1)
	}
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "ids"},
		{map[string]any{"ids": []int64{}}, "ids"},
		{map[string]any{"ids": many}, "ids"},
		{map[string]any{"ids": []int64{0}}, "ids[0]"},
		{map[string]any{"filter": map[string]any{"state": []string{"lost"}}}, "filter.state"},
		{map[string]any{"filter": map[string]any{"queue": "Bad Queue"}}, "filter.queue"},
		{map[string]any{"filter": map[string]any{}, "limit": 10001}, "limit"},
	} {
		p := e.expectProblem(e.do(e.writer, "POST", "/v1/jobs/delete", c.body), 400, "invalid_field")
		if p.Field != c.field {
			t.Errorf("%v: field %q, want %q (%s)", c.body, p.Field, c.field, p.Detail)
		}
	}
	e.expectProblem(e.do(e.writer, "POST", "/v1/jobs/delete", map[string]any{"filter": map[string]any{"nope": 1}}), 400, "unknown_field")
	e.expectProblem(e.do(e.reader, "POST", "/v1/jobs/delete", map[string]any{"filter": map[string]any{}}), 403, "forbidden")
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 5 {
		t.Fatalf("%d jobs after the refused requests, want 5", n)
	}
}
