package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/workclient"
)

// budgetBytes is the response budget the tests below give the server
// (--max-response-bytes): a few of their jobs fill it.
const budgetBytes = 64 << 10

// budgetArgs are a job's args of about n bytes (n even): random hex,
// which PostgreSQL cannot compress much, so that the database's count of
// a page's bytes (stored sizes) is close to the node's.
func budgetArgs(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return fmt.Sprintf(`{"ms":0,"pad":%q}`, hex.EncodeToString(b))
}

// request sends a request with token to the server and returns the
// status and the raw answer.
func (e *remoteE2E) request(token, method, path, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// adminToken is the admin token newRemoteE2E gave the CLI.
func (e *remoteE2E) adminToken() string {
	for _, v := range e.env {
		if t, ok := strings.CutPrefix(v, "GAFFER_TOKEN="); ok {
			return t
		}
	}
	e.t.Fatal("no admin token")
	return ""
}

// enqueueAPI enqueues n jobs of kind "work" in queue with args, over the
// API, and returns their ids (allowing the kind: no worker for it has
// registered yet).
func (e *remoteE2E) enqueueAPI(token, queue string, n int, args string) []int64 {
	e.t.Helper()
	var ids []int64
	for range n {
		status, b := e.request(token, "POST", "/v1/jobs", fmt.Sprintf(`{"kind":"work","queue":%q,"args":%s,"allow_unknown_kind":true}`, queue, args))
		var out struct{ Job struct{ ID int64 } }
		if status != 201 || json.Unmarshal(b, &out) != nil {
			e.t.Fatalf("enqueue: %d %s", status, b)
		}
		ids = append(ids, out.Job.ID)
	}
	return ids
}

// pageThrough follows a list's pages of limit 1,000 from its first, each
// checked to be within the budget and to hold items whose args.pad is
// padBytes long, and returns the ids listed, in order, and the number of
// pages.
func (e *remoteE2E) pageThrough(token, path string, q url.Values, padBytes int) (order []int64, pages int) {
	t := e.t
	t.Helper()
	q.Set("limit", "1000")
	for cursor := ""; ; {
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		status, b := e.request(token, "GET", path+"?"+q.Encode(), "")
		pages++
		if status != 200 {
			t.Fatalf("%s page %d: %d %s", path, pages, status, b)
		}
		if len(b) > budgetBytes {
			t.Fatalf("%s page %d is %d bytes, over the %d budget", path, pages, len(b), budgetBytes)
		}
		var p struct {
			Data []struct {
				ID   int64
				Args struct{ Pad string }
			}
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s page %d: %v", path, pages, err)
		}
		for _, it := range p.Data {
			if len(it.Args.Pad) != padBytes {
				t.Fatalf("%s: %d's args came back %d bytes long", path, it.ID, len(it.Args.Pad))
			}
			order = append(order, it.ID)
		}
		if p.NextCursor == "" {
			return order, pages
		}
		if len(p.Data) == 0 {
			t.Fatalf("%s page %d: empty, with a next_cursor", path, pages)
		}
		cursor = p.NextCursor
	}
}

// checkPages checks that the pages listed every id of ids (oldest first)
// exactly once, newest first, in more than two pages.
func checkPages(t *testing.T, what string, ids, order []int64, pages int) {
	t.Helper()
	if pages < 3 {
		t.Fatalf("%d %s of 6 KiB came in %d pages under a 64 KiB budget", len(ids), what, pages)
	}
	seen := map[int64]int{}
	for _, id := range order {
		seen[id]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("%s: %d listed %d times; listed %v", what, id, seen[id], order)
		}
	}
	if len(order) != len(ids) {
		t.Fatalf("listed %d %s, want %d", len(order), what, len(ids))
	}
	for i := 1; i < len(order); i++ {
		if order[i] >= order[i-1] {
			t.Fatalf("%s not newest first: %v", what, order)
		}
	}
}

// G13: a list page ends at the response budget as well as at its count.
// 40 jobs of about 6 KiB each (240 KiB) are asked for in one page of
// 1,000 from a server whose budget is 64 KiB: every page stays within it
// and carries a next_cursor while jobs remain, and following the cursors
// returns every job exactly once, newest first; the same for 30 DLQ
// entries. The CLI, asked for 1,000,
// follows the cursors and prints all 40. Red without the budget (the
// first page holds all 40 jobs, 240 KiB, with no cursor).
func TestListPagesEndAtTheResponseBudget(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t, "--max-response-bytes", fmt.Sprint(budgetBytes))
	admin := e.adminToken()
	ids := e.enqueueAPI(admin, "parked", 40, budgetArgs(6<<10))
	order, pages := e.pageThrough(admin, "/v1/jobs", url.Values{"queue": {"parked"}}, 6<<10)
	checkPages(t, "jobs", ids, order, pages)
	// The DLQ pages the same way: 30 entries of about 6 KiB.
	e.scalar(`INSERT INTO gaffer.dlq (tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, reason)
		SELECT 'default', 1000000 + i, 'work', 'parked', 0, 1, 1, 0,
			json_build_object('ms', 0, 'pad', (SELECT string_agg(md5(random()::text || i || k), '') FROM generate_series(1, 192) k)), '[]', 'permanent'
		FROM generate_series(1, 30) i RETURNING 1`)
	var dlqIDs []int64
	if err := e.pool.QueryRow(context.Background(), `SELECT array_agg(id ORDER BY id) FROM gaffer.dlq WHERE queue = 'parked'`).Scan(&dlqIDs); err != nil || len(dlqIDs) != 30 {
		t.Fatalf("DLQ entries: %v %v", dlqIDs, err)
	}
	dlqOrder, dlqPages := e.pageThrough(admin, "/v1/dlq", url.Values{"queue": {"parked"}}, 6<<10)
	checkPages(t, "DLQ entries", dlqIDs, dlqOrder, dlqPages)
	var cli struct {
		Data []struct{ ID int64 }
	}
	e.jsonOK(&cli, "jobs", "list", "--queue", "parked", "--limit", "1000")
	if len(cli.Data) != len(ids) || cli.Data[0].ID != ids[len(ids)-1] || cli.Data[len(ids)-1].ID != ids[0] {
		t.Fatalf("gaffer jobs list --limit 1000 printed %d jobs, want all %d", len(cli.Data), len(ids))
	}
	// A single job larger than the budget still comes, alone.
	big := e.enqueueAPI(admin, "huge", 2, budgetArgs(100<<10))
	status, b := e.request(admin, "GET", "/v1/jobs?queue=huge", "")
	var p struct {
		Data       []struct{ ID int64 }
		NextCursor string `json:"next_cursor"`
	}
	if json.Unmarshal(b, &p) != nil || status != 200 || len(p.Data) != 1 || p.Data[0].ID != big[1] || p.NextCursor == "" {
		t.Fatalf("a page of jobs over the budget: %d, %d bytes: %.300s", status, len(b), b)
	}
}

// G13: a remote claim returns no more jobs than fit the response budget,
// and the jobs it took past it are not left running: they are released
// in the claim's own transaction and the next claims take them. 20 jobs
// of about 8 KiB are claimed 20 at a time under a 64 KiB budget: each
// answer stays within it, only the jobs answered are running, and the
// claims that follow take every job exactly once. Red without the budget
// (the first claim returns all 20 jobs, 160 KiB).
func TestRemoteClaimStopsAtTheResponseBudget(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t, "--max-response-bytes", fmt.Sprint(budgetBytes))
	ids := e.enqueueAPI(e.adminToken(), "py", 20, budgetArgs(8<<10))
	status, b := e.request(e.worker, "POST", "/v1/workers", `{"name":"budget","queues":["py"]}`)
	var w struct{ ID string }
	if status != 201 || json.Unmarshal(b, &w) != nil {
		t.Fatalf("register: %d %s", status, b)
	}
	claimed := map[int64]int{}
	for round := 0; len(claimed) < len(ids); round++ {
		if round > len(ids) {
			t.Fatalf("%d claims took %d of %d jobs", round, len(claimed), len(ids))
		}
		status, b := e.request(e.worker, "POST", "/v1/work/claim", fmt.Sprintf(`{"worker":%q,"max":20}`, w.ID))
		if status != 200 {
			t.Fatalf("claim %d: %d %s", round, status, b)
		}
		if len(b) > budgetBytes {
			t.Fatalf("claim %d answered %d bytes, over the %d budget", round, len(b), budgetBytes)
		}
		var c struct {
			Jobs []struct {
				ID   int64
				Args struct{ Pad string }
			}
		}
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Jobs) == 0 || len(c.Jobs) >= len(ids) {
			t.Fatalf("claim %d of 20 jobs of 8 KiB under a 64 KiB budget returned %d", round, len(c.Jobs))
		}
		for _, j := range c.Jobs {
			if len(j.Args.Pad) != 8<<10 {
				t.Fatalf("job %d's args came %d bytes long", j.ID, len(j.Args.Pad))
			}
			claimed[j.ID]++
		}
		// Only the jobs answered are held; nothing waits for a lease to
		// expire.
		if running := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE queue = 'py' AND state = 'running'`); running != fmt.Sprint(len(claimed)) {
			t.Fatalf("after claim %d: %s jobs running, %d claimed", round, running, len(claimed))
		}
		if round == 0 && bytes.Count(b, []byte(`"lease_token"`)) != len(c.Jobs) {
			t.Fatalf("claim answer: %.200s", b)
		}
	}
	for _, id := range ids {
		if claimed[id] != 1 {
			t.Fatalf("job %d claimed %d times: %v", id, claimed[id], claimed)
		}
	}
}

// G13: a workflow run's answer carries its steps' results up to half
// the response budget; past it a step says its result was left out
// (result_omitted, result_bytes) and its job carries the result. A run
// of 12 steps, each completed by a remote worker with a result of about
// 8 KiB (96 KiB), is read from a server whose budget is 64 KiB: the
// answer stays within it, the run's output (all 12 results) is left out
// with its size, the first steps' results are whole, the rest are marked
// with their sizes, and the job of a marked step has its result. Red
// without the bound (the output and all 12 results, 126 KiB).
func TestWorkflowRunKeepsStepResultsWithinTheBudget(t *testing.T) {
	t.Parallel()
	e := newRemoteE2E(t, "--max-response-bytes", fmt.Sprint(budgetBytes))
	ctx := context.Background()
	var steps []string
	for i := range 12 {
		steps = append(steps, fmt.Sprintf(`{"name":"s%02d","kind":"work","queue":"py"}`, i))
	}
	status, b := e.request(e.adminToken(), "POST", "/v1/workflows", `{"name":"big","steps":[`+strings.Join(steps, ",")+`]}`)
	var run struct{ ID int64 }
	if status != 201 || json.Unmarshal(b, &run) != nil {
		t.Fatalf("submit: %d %s", status, b)
	}
	c := e.client()
	w, err := c.Register(ctx, workclient.Registration{Name: "steps", Queues: []string{"py"}})
	if err != nil {
		t.Fatal(err)
	}
	result := json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("r", 8<<10)))
	for done := 0; done < 12; {
		claimed, err := c.Claim(ctx, w.ID, 12, 0)
		if err != nil || len(claimed.Jobs) == 0 {
			t.Fatalf("claim: %v %+v", err, claimed)
		}
		for _, j := range claimed.Jobs {
			if err := c.CompleteOne(ctx, j.Lease, result); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
	e.waitSQL("the run completed", `SELECT state FROM gaffer.workflow_runs WHERE id = $1`, "completed", run.ID)
	status, b = e.request(e.adminToken(), "GET", fmt.Sprintf("/v1/workflows/%d", run.ID), "")
	if status != 200 || len(b) > budgetBytes {
		t.Fatalf("get run: %d, %d bytes (budget %d)", status, len(b), budgetBytes)
	}
	var got struct {
		OutputOmitted bool `json:"output_omitted"`
		OutputBytes   int  `json:"output_bytes"`
		Steps         []struct {
			Name          string
			JobID         int64 `json:"job_id"`
			Result        *struct{ Pad string }
			ResultOmitted bool `json:"result_omitted"`
			ResultBytes   int  `json:"result_bytes"`
		}
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got.Steps) != 12 {
		t.Fatalf("run: %v %.300s", err, b)
	}
	// The output (every step's result: none depends on another) is over
	// half the budget alone.
	if !got.OutputOmitted || got.OutputBytes < 12*8<<10 {
		t.Fatalf("output: omitted %v, %d bytes", got.OutputOmitted, got.OutputBytes)
	}
	whole, omitted := 0, 0
	var omittedJob int64
	for _, s := range got.Steps {
		switch {
		case s.Result != nil && len(s.Result.Pad) == 8<<10 && !s.ResultOmitted:
			whole++
		case s.Result == nil && s.ResultOmitted && s.ResultBytes >= 8<<10:
			omitted++
			omittedJob = s.JobID
		default:
			t.Fatalf("step %s: %+v", s.Name, s)
		}
	}
	if whole == 0 || omitted == 0 {
		t.Fatalf("%d results whole, %d left out", whole, omitted)
	}
	status, b = e.request(e.adminToken(), "GET", fmt.Sprintf("/v1/jobs/%d", omittedJob), "")
	var j struct{ Result struct{ Pad string } }
	if status != 200 || json.Unmarshal(b, &j) != nil || len(j.Result.Pad) != 8<<10 {
		t.Fatalf("the job of a step whose result was left out: %d %.200s", status, b)
	}
}
