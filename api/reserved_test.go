package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
)

// gaffer.* kinds are a workflow's sleep and signal steps: a tenant cannot
// enqueue one, put one in a cron entry, or register a remote worker for
// one (400 reserved_kind naming the field), and nothing is written; a
// remote worker naming no kinds does not claim them. Red with
// reservedKind answering nil: the job, the cron entry and the worker are
// made; red with claim_unit's empty-kinds rule off (store/claim.go
// passing NULL): the kinds-less worker claims the due gaffer.signal job.
func TestReservedKindsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	worker := e.token("default", auth.ScopeWorker)
	for _, c := range []struct {
		token, method, path, body, field string
	}{
		{e.writer, "POST", "/v1/jobs", `{"kind":"gaffer.signal"}`, "kind"},
		{e.writer, "POST", "/v1/jobs", `{"kind":"gaffer.sleep","queue":"default"}`, "kind"},
		{e.writer, "POST", "/v1/jobs", `{"kind":"gaffer.anything-else"}`, "kind"},
		{e.writer, "POST", "/v1/cron", `{"name":"tick","schedule":"@every 1m","job":{"kind":"gaffer.sleep"}}`, "job.kind"},
		{e.writer, "PUT", "/v1/cron/tick", `{"schedule":"@every 1m","job":{"kind":"gaffer.signal"}}`, "job.kind"},
		{worker, "POST", "/v1/workers", `{"queues":["default"],"kinds":["resize","gaffer.signal"]}`, "kinds[1]"},
		{e.admin, "POST", "/v1/workers", `{"queues":["default"],"kinds":["gaffer.sleep"]}`, "kinds[0]"},
	} {
		p := e.expectProblem(e.do(c.token, c.method, c.path, c.body), 400, "reserved_kind")
		if p.Field != c.field || !strings.Contains(p.Detail, "reserved") {
			t.Errorf("%s %s %s: %+v, want field %q", c.method, c.path, c.body, p, c.field)
		}
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`) + e.count(`SELECT count(*) FROM gaffer.cron_entries`) +
		e.count(`SELECT count(*) FROM gaffer.nodes WHERE kind = 'remote'`); n != 0 {
		t.Fatalf("%d jobs, cron entries or workers written", n)
	}
	// A kind that merely contains the word is the tenant's.
	if r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"my.gaffer.sleep"}`); r.Status != 201 {
		t.Fatalf("my.gaffer.sleep: %d %s", r.Status, r.Body)
	}

	// A remote worker that names no kinds claims every kind of its queues
	// but Gaffer's own: a signal step past its timeout is left to the
	// nodes (which fail it), the tenant's own job is taken.
	var w workerOut
	e.do(worker, "POST", "/v1/workers", `{"queues":["default"]}`).decode(t, &w)
	if r := e.do(e.writer, "POST", "/v1/workflows", `{"name":"wait","steps":[{"name":"s","signal":"1s"}]}`); r.Status != 201 {
		t.Fatalf("workflow: %d %s", r.Status, r.Body)
	}
	time.Sleep(1500 * time.Millisecond) // the signal step's job is due
	var c claimOut
	e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":10}`, w.ID)).decode(t, &c)
	if len(c.Jobs) != 1 || c.Jobs[0].Kind != "my.gaffer.sleep" {
		t.Fatalf("a remote worker naming no kinds claimed %+v, want only my.gaffer.sleep", c.Jobs)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE kind = 'gaffer.signal' AND state IN ('pending', 'retrying') AND run_at <= now()`); n != 1 {
		t.Fatalf("the due signal step is not left pending (%d)", n)
	}
}

// A number beyond a float64's range (1e999999, 400 digits) is refused
// wherever a tenant sends JSON — args, a remote worker's result and
// progress, a signal's payload — with 400 invalid_field naming where it
// is, and nothing is written; Go, JavaScript and Python clients could not
// read it back. A number too small for a float64 reads as 0 and is kept.
// Red with checkNumbers answering nil: the args and result are stored and
// served as "1e999999".
func TestNumbersBeyondFloat64Refused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	huge := "1" + strings.Repeat("0", 400)
	for _, c := range []struct{ body, field string }{
		{`{"kind":"k","args":{"n":1e999999}}`, "args.n"},
		{`{"kind":"k","args":{"a":[1,{"b":-1e400}]}}`, "args.a[1].b"},
		{`{"kind":"k","args":[0,` + huge + `]}`, "args[1]"},
		{`{"kind":"http","args":{"url":"https://example.com/","body":{"x":2e308}}}`, "args.body.x"},
	} {
		p := e.expectProblem(e.do(e.writer, "POST", "/v1/jobs", c.body), 400, "invalid_field")
		if p.Field != c.field || !strings.Contains(p.Detail, "64-bit float") {
			t.Errorf("%s: %+v, want field %q", c.body, p, c.field)
		}
		if len(p.Detail) > 400 {
			t.Errorf("%s: detail of %d bytes, the number not clipped", c.body, len(p.Detail))
		}
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 0 {
		t.Fatalf("%d jobs written", n)
	}
	if r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"k","args":{"tiny":1e-999999,"max":1.7976931348623157e308}}`); r.Status != 201 {
		t.Fatalf("numbers a float64 holds: %d %s", r.Status, r.Body)
	}

	// A remote worker's result and progress.
	worker := e.token("default", auth.ScopeWorker)
	var w workerOut
	e.do(worker, "POST", "/v1/workers", `{"queues":["py"]}`).decode(t, &w)
	var enq struct{ Job struct{ ID int64 } }
	e.do(e.writer, "POST", "/v1/jobs", `{"kind":"resize","queue":"py"}`).decode(t, &enq)
	var c claimOut
	e.do(worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q}`, w.ID)).decode(t, &c)
	if len(c.Jobs) != 1 {
		t.Fatalf("claimed %+v", c)
	}
	j := c.Jobs[0]
	for _, x := range []struct{ path, body, field string }{
		{"complete", fmt.Sprintf(`{"attempt":1,"lease_token":%q,"result":{"r":1e999999}}`, j.LeaseToken), "result.r"},
		{"progress", fmt.Sprintf(`{"attempt":1,"lease_token":%q,"percent":1e999}`, j.LeaseToken), "percent"},
	} {
		p := e.expectProblem(e.do(worker, "POST", fmt.Sprintf("/v1/work/jobs/%d/%s", j.ID, x.path), x.body), 400, "invalid_field")
		if p.Field != x.field {
			t.Errorf("%s: field %q, want %q", x.path, p.Field, x.field)
		}
	}
	p := e.expectProblem(e.do(worker, "POST", "/v1/work/complete",
		fmt.Sprintf(`{"worker":%q,"jobs":[{"id":%d,"attempt":1,"lease_token":%q,"result":[1e999999]}]}`, w.ID, j.ID, j.LeaseToken)), 400, "invalid_field")
	if p.Field != "jobs[0].result[0]" {
		t.Errorf("batch complete: field %q", p.Field)
	}
	if s := e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1 AND state = 'running' AND result IS NULL AND progress IS NULL`, j.ID); s != 1 {
		t.Fatalf("the refused result or progress was written")
	}

	// A signal's payload.
	var run struct{ ID int64 }
	e.do(e.writer, "POST", "/v1/workflows", `{"name":"wait","steps":[{"name":"s","signal":"1h"}]}`).decode(t, &run)
	p = e.expectProblem(e.do(e.writer, "POST", fmt.Sprintf("/v1/workflows/%d/signal", run.ID), `{"step":"s","payload":{"v":-1e999}}`), 400, "invalid_field")
	if p.Field != "payload.v" {
		t.Errorf("signal: field %q", p.Field)
	}
}
