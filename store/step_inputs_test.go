package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// A step's job carries its inputs by reference (jobs.inputs_from) and a
// claim reads them from the run's steps; a job of a step started before
// migration 0034, with its inputs copied in, is claimed with those; a
// claim reads at most MaxClaimInputBytes of inputs (the first job's
// always) and gives the jobs past it back, unstarted, to a later claim.
// Not parallel: it shrinks the claim's budget.
func TestClaimReadsStepInputs(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewDatabase(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pool := st.Pool()
	step := func(name string, deps ...string) store.WorkflowStepParams {
		return store.WorkflowStepParams{Name: name, Type: "job", Kind: "k", Queue: "default", Args: json.RawMessage(`{}`),
			MaxAttempts: 3, Timeout: time.Minute, DependsOn: deps}
	}
	run, err := st.CreateWorkflowRun(ctx, nil, "default", "r",
		[]store.WorkflowStepParams{step("a"), step("b"), step("c1", "a", "b"), step("c2", "a", "b"), step("c3", "a", "b")})
	if err != nil {
		t.Fatal(err)
	}
	claim := func(n int) []store.Job {
		t.Helper()
		jobs, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: n, Token: 7, LeaseTTL: time.Minute, Node: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
	roots := claim(10)
	if len(roots) != 2 || string(roots[0].Inputs) != "{}" || string(roots[1].Inputs) != "{}" {
		t.Fatalf("roots %+v: want a and b, each with inputs {}", roots)
	}
	results := map[string]string{"a": `{"x": ` + strings.Repeat("1", 400) + `}`, "b": `"` + strings.Repeat("b", 400) + `"`}
	for _, j := range roots {
		if _, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: lease(j), Result: json.RawMessage(results[j.Step])}}); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"a":` + results["a"] + `,"b":` + results["b"] + `}`
	var copies int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE workflow_run = $1 AND inputs IS NOT NULL`, run).Scan(&copies); err != nil || copies != 0 {
		t.Fatalf("%d step jobs hold a copy of their inputs (%v), want none", copies, err)
	}
	// c3 as a job of the build before: its inputs copied, no reference.
	if _, err := pool.Exec(ctx, `UPDATE gaffer.jobs SET inputs = '{"old": "copy"}', inputs_from = NULL WHERE workflow_run = $1 AND step = 'c3'`, run); err != nil {
		t.Fatal(err)
	}

	// Room for one job's inputs only: the first is claimed with them,
	// the second given back (c3, by copy, costs the budget nothing).
	defer store.SetClaimInputBudget(int64(len(want)) + 10)()
	got := claim(3)
	byStep := map[string]store.Job{}
	var steps []string
	for _, j := range got {
		byStep[j.Step] = j
		steps = append(steps, j.Step)
	}
	if len(got) != 2 || string(byStep["c1"].Inputs) != want || string(byStep["c3"].Inputs) != `{"old": "copy"}` {
		t.Fatalf("claimed %v (c1's inputs %.80s): want c1 with inputs %.80s and c3 with its copy", steps, byStep["c1"].Inputs, want)
	}
	var state, lastError string
	if err := pool.QueryRow(ctx, `SELECT state, errors -> -1 ->> 'kind' FROM gaffer.jobs WHERE workflow_run = $1 AND step = 'c2'`, run).Scan(&state, &lastError); err != nil {
		t.Fatal(err)
	}
	if state != "pending" || lastError != "released" {
		t.Fatalf("c2 is %s (last error %s): want it given back, pending", state, lastError)
	}
	again := claim(3)
	if len(again) != 1 || again[0].Step != "c2" || string(again[0].Inputs) != want {
		t.Fatalf("claimed again %d jobs: want c2 with inputs %.80s", len(again), want)
	}
	// GetJob reads them too; a listing leaves them out.
	one, err := st.GetJob(ctx, "", again[0].ID)
	if err != nil || string(one.Inputs) != want {
		t.Fatalf("GetJob: inputs %s (%v), want %s", one.Inputs, err, want)
	}
	listed, err := st.ListJobs(ctx, store.JobFilter{WorkflowRun: run})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range listed {
		if j.Inputs != nil {
			t.Fatalf("listed job %s with inputs %s", j.Step, j.Inputs)
		}
	}
}

// A node of the build before 0034 (its claim calls gaffer.claim_pick)
// does not start a step whose inputs are by reference — it would hand its
// worker none — but starts every other job, a step with copied inputs
// among them; the step waits, pending, for a claim of this build.
func TestOlderBuildLeavesStepsByReference(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewDatabase(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pool := st.Pool()
	step := func(name string, deps ...string) store.WorkflowStepParams {
		return store.WorkflowStepParams{Name: name, Type: "job", Kind: "k", Queue: "default", Args: json.RawMessage(`{}`),
			MaxAttempts: 3, Timeout: time.Minute, DependsOn: deps}
	}
	run, err := st.CreateWorkflowRun(ctx, nil, "default", "r", []store.WorkflowStepParams{step("a"), step("b", "a"), step("c", "a")})
	if err != nil {
		t.Fatal(err)
	}
	roots, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 10, Token: 7, LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(roots) != 1 {
		t.Fatalf("claimed %v (%v): want step a", roots, err)
	}
	if _, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: lease(roots[0]), Result: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	// c as a step of the build before: its inputs copied, no reference.
	if _, err := pool.Exec(ctx, `UPDATE gaffer.jobs SET inputs = '{"a": 1}', inputs_from = NULL WHERE workflow_run = $1 AND step = 'c'`, run); err != nil {
		t.Fatal(err)
	}
	var plain int64
	if err := pool.QueryRow(ctx, `INSERT INTO gaffer.jobs (tenant, kind, queue, args) VALUES ('default', 'k', 'default', '{}') RETURNING id`).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	// The older build's claim: the ten-argument claim_pick, no cursors.
	var picked []int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(gaffer.claim_pick('default', 10, 'old-1', '{}', '{}', '{}', '{}', '{}', NULL, NULL), '{}')`).Scan(&picked); err != nil {
		t.Fatal(err)
	}
	var steps []string
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(coalesce(step, 'plain') ORDER BY id), '{}') FROM gaffer.jobs WHERE id = ANY ($1)`, picked).Scan(&steps); err != nil {
		t.Fatal(err)
	}
	if strings.Join(steps, ",") != "c,plain" {
		t.Fatalf("the older build's claim picked %v: want c (copied inputs) and the plain job, not b (inputs by reference)", steps)
	}
	got, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 10, Token: 8, LeaseTTL: time.Minute, Node: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 1 || got[0].Step != "b" || string(got[0].Inputs) != `{"a":1}` {
		t.Fatalf("this build's claim took %+v: want step b with inputs {\"a\":1}", got)
	}
}
