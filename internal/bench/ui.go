package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/ui"
	"github.com/gafferhq/gaffer/workflow"
)

// pageTiming is how long one dashboard page took to serve, over several
// requests.
type pageTiming struct {
	Path string  `json:"path"`
	P50  float64 `json:"p50_ms"`
	Max  float64 `json:"max_ms"`
	N    int     `json:"requests"`
}

// benchDashboard fills the job table with --jobs jobs in a realistic mix
// of states (most finished, a backlog pending, some failed, a few
// running), then times each dashboard page, signed in as an admin token
// that spans tenants (which sees the most).
func benchDashboard(ctx context.Context, st *store.Store, o Options, r *Result) error {
	start := time.Now()
	if err := enqueueBulk(ctx, job.NewClient(st.Pool(), nil), o.Jobs, o.Batch); err != nil {
		return err
	}
	// 80% completed, 5% failed, 0.1% running, the rest pending — by id, so
	// every page of the list sees a mix.
	if _, err := st.Pool().Exec(ctx, `
		UPDATE gaffer.jobs SET
		    state = CASE WHEN id % 1000 < 800 THEN 'completed' WHEN id % 1000 < 850 THEN 'failed'
		                 WHEN id % 1000 = 999 THEN 'running' ELSE 'pending' END,
		    attempt = CASE WHEN id % 1000 < 850 OR id % 1000 = 999 THEN 1 ELSE 0 END,
		    finalized_at = CASE WHEN id % 1000 < 850 THEN now() END,
		    lease_expires_at = CASE WHEN id % 1000 = 999 THEN now() + interval '1 hour' END,
		    lease_token = CASE WHEN id % 1000 = 999 THEN id END,
		    node = CASE WHEN id % 1000 = 999 THEN 'bench-node' END
		WHERE queue = $1`, Queue); err != nil {
		return fmt.Errorf("mix job states: %w", err)
	}
	if _, err := st.Pool().Exec(ctx, `ANALYZE gaffer.jobs`); err != nil {
		return err
	}
	var firstID, lastID int64
	if err := st.Pool().QueryRow(ctx, `SELECT min(id), max(id) FROM gaffer.jobs WHERE queue = $1`, Queue).Scan(&firstID, &lastID); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "filled the table with %d jobs in %.1fs\n", o.Jobs, time.Since(start).Seconds())

	tokens := auth.NewTokens(st.Pool())
	token, rec, err := tokens.Create(ctx, auth.NewTokenRequest{Name: "bench dashboard", Tenant: auth.AllTenants, Scopes: []string{auth.ScopeAdmin}})
	if err != nil {
		return err
	}
	defer tokens.Revoke(context.WithoutCancel(ctx), rec.ID)
	h, err := ui.New(ui.Config{Tokens: tokens, Sessions: auth.NewSessions(st.Pool(), 0), Jobs: job.NewClient(st.Pool(), nil), DLQ: dlq.NewClient(st.Pool()), Cron: cron.NewClient(st.Pool()),
		Workflows: workflow.NewClient(st.Pool()), Admin: cluster.NewAdmin(st.Pool())})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	mid := firstID + (lastID-firstID)/2
	paths := []string{
		"/ui/",
		"/ui/jobs",
		fmt.Sprintf("/ui/jobs?before=%d", mid),
		"/ui/jobs?state=pending",
		"/ui/jobs?state=failed&queue=" + Queue,
		"/ui/jobs?state=running",
		"/ui/jobs?state=cancelled", // none: the worst case, a walk of the whole table
		"/ui/jobs?kind=noop",
		fmt.Sprintf("/ui/jobs/%d", mid),
		"/ui/queues",
		"/ui/nodes",
		"/ui/dlq",
		"/ui/cron",
		"/ui/workflows",
	}
	const rounds = 15
	cpu := startCPU()
	measured := time.Now()
	for _, p := range paths {
		var ms []float64
		for i := 0; i < rounds+1; i++ {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+p, nil)
			req.AddCookie(&http.Cookie{Name: "gaffer_session", Value: token})
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", p, resp.Status)
			}
			if i > 0 { // the first request warms caches and plans
				ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			}
		}
		sort.Float64s(ms)
		r.Pages = append(r.Pages, pageTiming{Path: p, P50: ms[len(ms)/2], Max: ms[len(ms)-1], N: len(ms)})
	}
	r.Jobs, r.Seconds = o.Jobs, time.Since(measured).Seconds()
	cpu.stop(r)
	return nil
}
