package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// Enqueues racing claims and the ring's turns lose no ready row. A claim
// picks jobs committed after its statement's snapshot was taken, which
// the statement's update does not see and so does not start: their rows
// must stay (red when the claim deleted the rows of every job it picked,
// not of those it started: 4-5 of about 65,000 jobs were left claimable
// with no row, never to run).
func TestReadyRowsSurviveClaimsRacingEnqueues(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	run := func(what string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := f(); err != nil && ctx.Err() == nil {
					t.Errorf("%s: %v", what, err)
					return
				}
			}
		}()
	}
	for range 3 {
		run("enqueue", func() error {
			ps := make([]store.InsertParams, 5)
			for i := range ps {
				ps[i] = store.InsertParams{Tenant: "t", Kind: "k", Queue: "q", Args: []byte(`{}`), MaxAttempts: 3}
			}
			_, err := st.InsertJobs(ctx, nil, ps)
			return err
		})
	}
	for c := range 2 {
		run("claim", func() error {
			_, err := st.Claim(ctx, store.ClaimParams{Queue: "q", Limit: 3, Token: time.Now().UnixNano(), LeaseTTL: time.Minute,
				Node: fmt.Sprintf("n%d", c)})
			return err
		})
	}
	run("turn", func() error {
		_, err := st.TurnReadyRing(ctx, 5000, 50*time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		return err
	})
	wg.Wait()
	var missing, stale, doubled, total int
	if err := st.Pool().QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM gaffer.jobs j WHERE j.state = 'pending' AND j.due AND NOT EXISTS (SELECT 1 FROM gaffer.ready r WHERE r.id = j.id)),
		       (SELECT count(*) FROM gaffer.ready r WHERE NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.id = r.id AND j.state = 'pending')),
		       (SELECT count(*) - count(DISTINCT id) FROM gaffer.ready),
		       (SELECT count(*) FROM gaffer.jobs)`).Scan(&missing, &stale, &doubled, &total); err != nil {
		t.Fatal(err)
	}
	if missing+stale+doubled > 0 {
		t.Fatalf("of %d jobs: %d claimable without a ready row, %d rows of no claimable job, %d doubled", total, missing, stale, doubled)
	}
	t.Logf("%d jobs enqueued, claimed and turned over at once; the ready set is the claimable jobs", total)
}
