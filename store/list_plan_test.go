package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// Listing one cron entry's or one workflow run's jobs reads an index
// range in id order, not the jobs table: on a table of 60,000 jobs, of
// which a handful are the entry's or the run's, the plan uses the
// partial index and neither a sequential scan nor a walk down the
// primary key filtering every row. Red without the cron_status migration's indexes.
func TestListJobsByCronEntryOrWorkflowRunIsIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO gaffer.jobs (tenant, kind, queue, state, finalized_at)
		SELECT 'default', 'bulk', 'q' || (i % 7), 'completed', now() FROM generate_series(1, 60000) i;
		INSERT INTO gaffer.jobs (tenant, kind, cron_entry, cron_at)
		SELECT CASE WHEN i % 2 = 0 THEN 'default' ELSE 'acme' END, 'k', 'entry-' || (i % 50), now() - i * interval '1 minute'
		FROM generate_series(1, 500) i;
		INSERT INTO gaffer.jobs (tenant, kind, workflow_run, step)
		SELECT 'default', 'k', i % 100, 's' || i FROM generate_series(1, 500) i;
		ANALYZE gaffer.jobs;`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		f     store.JobFilter
		index string
	}{
		{"cron entry in a tenant", store.JobFilter{Tenant: "default", CronEntry: "entry-4", Limit: 50}, "jobs_cron_entry_idx"},
		{"cron entry, next page", store.JobFilter{Tenant: "default", CronEntry: "entry-4", BeforeID: 60300, Limit: 50}, "jobs_cron_entry_idx"},
		{"cron entry with a state", store.JobFilter{Tenant: "default", CronEntry: "entry-4", States: []string{"pending"}, Limit: 50}, "jobs_cron_entry_idx"},
		{"workflow run", store.JobFilter{WorkflowRun: 7, Limit: 50}, "jobs_workflow_run_idx"},
		{"workflow run in a tenant", store.JobFilter{Tenant: "default", WorkflowRun: 7, Limit: 50}, "jobs_workflow_run_idx"},
	} {
		sql, args, err := store.ListJobsSQL(c.f)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		if err := st.Pool().QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan any
		json.Unmarshal(raw, &plan)
		nodes := planNodes(plan)
		text := strings.Join(nodes, "; ")
		if !strings.Contains(text, c.index) || strings.Contains(text, "Seq Scan") || strings.Contains(text, "jobs_pkey") {
			t.Errorf("%s: plan %s; want a scan of %s", c.name, text, c.index)
		}
		if jobs, err := st.ListJobs(ctx, c.f); err != nil || len(jobs) == 0 {
			t.Errorf("%s: %d jobs, %v", c.name, len(jobs), err)
		}
	}
}

// planNodes lists a JSON plan's nodes as "type on index".
func planNodes(v any) []string {
	var out []string
	switch n := v.(type) {
	case []any:
		for _, x := range n {
			out = append(out, planNodes(x)...)
		}
	case map[string]any:
		if t, ok := n["Node Type"].(string); ok {
			s := t
			if idx, ok := n["Index Name"].(string); ok {
				s += " on " + idx
			}
			out = append(out, s)
		}
		for _, x := range n {
			out = append(out, planNodes(x)...)
		}
	}
	return out
}
