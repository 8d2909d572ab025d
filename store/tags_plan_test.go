package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// A search by a rare tag reads jobs_tags_idx, not the table: on 60,000
// untagged jobs and 300 tagged ones, the list (all and any), the state
// counts and a bulk action's count find the tagged jobs through the GIN
// index. Red without migration 0054's index.
func TestTagSearchIsIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO gaffer.jobs (tenant, kind, queue, state, finalized_at)
		SELECT 'default', 'bulk', 'q', 'completed', now() FROM generate_series(1, 60000) i;
		INSERT INTO gaffer.jobs (tenant, kind, tags)
		SELECT 'default', 'k', ARRAY['batch:' || (i % 30), 'rare'] FROM generate_series(1, 300) i;
		ANALYZE gaffer.jobs;`)
	if err != nil {
		t.Fatal(err)
	}
	explain := func(name, sql string, args []any) string {
		t.Helper()
		var raw []byte
		if err := st.Pool().QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan any
		json.Unmarshal(raw, &plan)
		return strings.Join(planNodes(plan), "; ")
	}
	for _, c := range []struct {
		name string
		f    store.JobFilter
	}{
		{"all of two tags", store.JobFilter{Tenant: "default", Tags: []string{"batch:7", "rare"}, Limit: 50}},
		{"any of two tags", store.JobFilter{Tenant: "default", Tags: []string{"batch:7", "batch:8"}, TagsAny: true, Limit: 50}},
		{"tag and args", store.JobFilter{Tenant: "default", Tags: []string{"batch:7"}, Args: []json.RawMessage{json.RawMessage(`{"a":1}`)}, Limit: 50}},
	} {
		sql, args, err := store.ListJobsSQL(c.f)
		if err != nil {
			t.Fatal(err)
		}
		if text := explain(c.name, sql, args); !strings.Contains(text, "jobs_tags_idx") || strings.Contains(text, "Seq Scan") {
			t.Errorf("%s: plan %s; want a scan of jobs_tags_idx", c.name, text)
		}
		if jobs, err := st.ListJobs(ctx, c.f); err != nil || (len(jobs) == 0 && len(c.f.Args) == 0) {
			t.Errorf("%s: %d jobs, %v", c.name, len(jobs), err)
		}
	}
	sql, args, err := store.CountBulkSQL(store.BulkCancel, store.BulkSelection{Filter: store.JobFilter{Tenant: "default", Tags: []string{"batch:3"}}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if text := explain("bulk count", sql, args); !strings.Contains(text, "jobs_tags_idx") || strings.Contains(text, "Seq Scan") {
		t.Errorf("bulk count: plan %s; want a scan of jobs_tags_idx", text)
	}
}
