package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// On a table of 60,000 finished jobs and a few pending ones, a bulk
// cancel's dry run and the jobs list's pending count read the claim and
// scheduled indexes, not the table: the dashboard runs them on every
// refresh. Red with bulk_eligible_cancel as state IN (...), or the
// pending count as one state = 'pending' (a sequential scan each).
func TestBulkCountsAreIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO gaffer.jobs (tenant, kind, queue, state, finalized_at)
		SELECT 'default', 'bulk', 'q', 'completed', now() FROM generate_series(1, 60000) i;
		INSERT INTO gaffer.jobs (kind, queue) SELECT 'k', 'q' FROM generate_series(1, 20);
		ANALYZE gaffer.jobs;`)
	if err != nil {
		t.Fatal(err)
	}
	explain := func(name, sql string, args []any) string {
		var raw []byte
		if err := st.Pool().QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan any
		json.Unmarshal(raw, &plan)
		return strings.Join(planNodes(plan), "; ")
	}
	for _, f := range []store.JobFilter{{}, {NoTimers: true}, {Tenant: "default", Queue: "q"}} {
		sql, args, err := store.CountBulkSQL(store.BulkCancel, store.BulkSelection{Filter: f}, 10001)
		if err != nil {
			t.Fatal(err)
		}
		if plan := explain("bulk cancel count", sql, args); strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "jobs_due_idx") {
			t.Errorf("bulk cancel count of %+v: plan %s; want index scans", f, plan)
		}
		sql, args, err = store.CountByStateSQL(f, 10000)
		if err != nil {
			t.Fatal(err)
		}
		if plan := explain("count by state", sql, args); !strings.Contains(plan, "jobs_due_idx") || !strings.Contains(plan, "jobs_scheduled_idx") {
			t.Errorf("count by state of %+v: plan %s; want the pending count from the claim and scheduled indexes", f, plan)
		}
	}
	counts, err := st.CountJobsByState(ctx, store.JobFilter{}, 10000)
	if err != nil || counts["pending"] != 20 || counts["completed"] != 10000 {
		t.Fatalf("counts %v, %v", counts, err)
	}
}
