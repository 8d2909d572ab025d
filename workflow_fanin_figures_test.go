package gaffer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

// The figures of issue 24's fan-in notes: what the completion that makes
// a fan-in's consumers ready writes into gaffer.jobs, and how long it
// takes, for the two cases seen. A measurement, not a check: it runs
// only with GAFFER_FANIN_FIGURES=1.
func TestWorkflowFanInFigures(t *testing.T) {
	if os.Getenv("GAFFER_FANIN_FIGURES") == "" {
		t.Skip("a measurement: set GAFFER_FANIN_FIGURES=1")
	}
	for _, c := range []struct{ producers, size, consumers int }{{10, 100_000, 20}, {20, 250_000, 40}} {
		t.Run(fmt.Sprintf("%dx%d-to-%d", c.producers, c.size, c.consumers), func(t *testing.T) {
			ctx := context.Background()
			pool := openPool(t, pgtest.NewDatabase(t))
			st := store.New(pool)
			b := workflow.New("figures")
			var deps []string
			for i := range c.producers {
				deps = append(deps, fmt.Sprintf("p%02d", i))
				b.Job(deps[i], "fanin", nil)
			}
			for i := range c.consumers {
				b.Job(fmt.Sprintf("c%02d", i), "fanin", nil, workflow.After(deps...))
			}
			def, err := b.Definition()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := workflow.NewClient(pool).Submit(ctx, def); err != nil {
				t.Fatal(err)
			}
			jobs, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: c.producers, Token: 1, LeaseTTL: time.Minute, Node: "figures"})
			if err != nil || len(jobs) != c.producers {
				t.Fatalf("claimed %d producers: %v", len(jobs), err)
			}
			complete := func(j store.Job) {
				fill := make([]byte, c.size/2)
				rand.Read(fill)
				res, _ := json.Marshal(map[string]string{"fill": hex.EncodeToString(fill)})
				if _, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: store.Lease{ID: j.ID, Attempt: j.Attempt, Token: 1}, Result: res}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, j := range jobs[1:] {
				complete(j)
			}
			var before int64
			pool.QueryRow(ctx, `SELECT pg_total_relation_size('gaffer.jobs')`).Scan(&before)
			start := time.Now()
			complete(jobs[0])
			took := time.Since(start)
			var after int64
			pool.QueryRow(ctx, `SELECT pg_total_relation_size('gaffer.jobs')`).Scan(&after)
			t.Logf("%d producers x %d bytes to %d consumers: the last completion took %s and grew gaffer.jobs by %.1f MB (%d producers' results uploaded: %.1f MB)",
				c.producers, c.size, c.consumers, took.Round(time.Millisecond), float64(after-before)/1e6, c.producers, float64(c.producers*c.size)/1e6)
		})
	}
}
