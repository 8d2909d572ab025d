package gaffer_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// A fan-in stores each result once (issue 24): 10 producers of 100 KB and
// 20 steps that each depend on all ten grow gaffer.jobs by about the 1 MB
// uploaded, not by 20 copies of it, while every consumer, run by a real
// node, still receives every producer's result byte for byte. With
// inputs copied into each consumer's job (migrations before 0034) the
// jobs table grew by 22 MB here.
func TestWorkflowFanInStoresResultsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	auditCompletions(t, pool)
	if _, err := pool.Exec(ctx, `CREATE TABLE test_fanin (job_id bigint, attempt int, step text, dep text, md5 text)`); err != nil {
		t.Fatal(err)
	}
	startChild(t, url, "node-1", 30*time.Second, "GAFFER_TEST_CONCURRENCY=10")

	const producers, consumers, size = 10, 20, 100_000
	b := workflow.New("fan-in")
	var deps []string
	for i := range producers {
		name := fmt.Sprintf("p%02d", i)
		deps = append(deps, name)
		b.Job(name, "fanin", map[string]int{"bytes": size})
	}
	for i := range consumers {
		b.Job(fmt.Sprintf("c%02d", i), "fanin", map[string]int{"bytes": 10}, workflow.After(deps...))
	}
	def, err := b.Definition()
	if err != nil {
		t.Fatal(err)
	}
	// Stored bytes of the table (heap, TOAST, indexes), and the JSON text
	// its rows carry, before and after the run.
	stored := func() (physical, logical int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('gaffer.jobs'),
			coalesce(sum(octet_length(args::text) + coalesce(octet_length(result::text), 0) + coalesce(octet_length(inputs::text), 0)), 0)
			FROM gaffer.jobs`).Scan(&physical, &logical); err != nil {
			t.Fatal(err)
		}
		return physical, logical
	}
	physical0, logical0 := stored()
	run, err := workflow.NewClient(pool).Submit(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the run to complete", func() bool {
		return scalar[string](t, pool, `SELECT state FROM gaffer.workflow_runs WHERE id = $1`, run.ID) == "completed"
	})
	physical1, logical1 := stored()

	// Every consumer received every producer's result as the producer
	// recorded it, and nothing else.
	var received, matched, others int
	if err := pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE f.md5 = md5(p.result::text)), count(*) FILTER (WHERE p.id IS NULL)
		FROM test_fanin f
		JOIN gaffer.jobs c ON c.id = f.job_id AND c.workflow_run = $1 AND c.step LIKE 'c%'
		LEFT JOIN gaffer.jobs p ON p.workflow_run = $1 AND p.step = f.dep AND p.step LIKE 'p%'`, run.ID).Scan(&received, &matched, &others); err != nil {
		t.Fatal(err)
	}
	uploaded := int64(producers * size)
	t.Logf("%d producers x %d bytes, %d consumers: gaffer.jobs grew by %d bytes on disk, %d bytes of JSON text; consumers received %d results, %d as recorded, %d unknown",
		producers, size, consumers, physical1-physical0, logical1-logical0, received, matched, others)
	if want := producers * consumers; received != want || matched != want || others != 0 {
		t.Fatalf("consumers received %d results, %d of them as their producer recorded it, %d from unknown steps: want %d, all as recorded",
			received, matched, others, want)
	}
	// About the uploaded results: their text once, plus the rows' own
	// bytes and the row versions claims and completions leave.
	if grew := logical1 - logical0; grew > uploaded*3/2 {
		t.Fatalf("the jobs' JSON text grew by %d bytes for %d uploaded: results are copied per consumer", grew, uploaded)
	}
	if grew := physical1 - physical0; grew > uploaded*3 {
		t.Fatalf("gaffer.jobs grew by %d bytes on disk for %d uploaded: results are copied per consumer", grew, uploaded)
	}
	// The run's output is its final steps' results, read from the steps.
	got, err := workflow.NewClient(pool).Get(ctx, "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var keys int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM json_object_keys($1::json)`, string(got.Output)).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if keys != consumers {
		t.Fatalf("the run's output names %d steps, want the %d consumers: %.200s", keys, consumers, got.Output)
	}
}

// A definition whose step could be handed more inputs than a step's
// budget is refused at submit, naming the step and the budget, and
// nothing is written.
func TestWorkflowOverInputBudgetRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openPool(t, pgtest.NewDatabase(t))
	over := workflow.MaxStepInputBytes/job.MaxResultBytes + 1
	b := workflow.New("too-wide")
	var deps []string
	for i := range over {
		name := fmt.Sprintf("p%02d", i)
		deps = append(deps, name)
		b.Job(name, "fanin", nil)
	}
	b.Sleep("nap", time.Second) // a sleep's result is empty: not counted
	b.Job("join", "fanin", nil, workflow.After(append(deps[1:], "nap")...))
	def, err := b.Definition()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workflow.NewClient(pool).Submit(ctx, def); err != nil {
		t.Fatalf("a step with %d job dependencies (and a sleep) is within the budget: %v", over-1, err)
	}

	b.Job("wide", "fanin", nil, workflow.After(deps...))
	def, err = b.Definition()
	if err == nil {
		_, err = workflow.NewClient(pool).Submit(ctx, def)
	}
	var ve *job.ValidationError
	if !errors.As(err, &ve) || ve.Code != workflow.CodeStepInputsOverBudget || ve.Field != fmt.Sprintf("steps[%d].depends_on", over+2) {
		t.Fatalf("a step with %d job dependencies: want a %s validation error on its depends_on, got %v", over, workflow.CodeStepInputsOverBudget, err)
	}
	t.Log(err)
	if n := scalar[int](t, pool, `SELECT count(*) FROM gaffer.workflow_runs`); n != 1 {
		t.Fatalf("%d runs stored, want only the first", n)
	}
}
