package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// The leader's throughput sample adds what finished to each queue's
// per-minute history, per tenant; QueueHistory sums it into buckets, for
// one tenant or all, and a queue's history holds only its own jobs.
func TestQueueHistory(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	var ps []store.InsertParams
	for _, x := range []struct{ tenant, queue, kind string }{{"a", "mail", "k"}, {"a", "mail", "k"}, {"b", "mail", "k"}, {"b", "mail", "k"},
		{"b", "other", "k"}, {"b", "other", "gaffer.sleep"}} {
		p := params(x.kind)
		p.Tenant, p.Queue = x.tenant, x.queue
		ps = append(ps, p)
	}
	if _, err := st.InsertJobs(ctx, nil, ps); err != nil {
		t.Fatal(err)
	}
	mail, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "mail", Limit: 4, Token: 1, LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(mail) != 4 {
		t.Fatalf("claimed %d, %v", len(mail), err)
	}
	other, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "other", Limit: 2, Token: 2, LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(other) != 2 {
		t.Fatalf("claimed %d, %v", len(other), err)
	}
	// mail: three complete (a's two, one of b's), one of b's fails; other:
	// b's job completes, and so does a workflow timer, which the queue's
	// history leaves out.
	var done []store.Completion
	var failed store.Job
	for _, j := range mail {
		if j.Tenant == "b" && failed.ID == 0 {
			failed = j
			continue
		}
		done = append(done, store.Completion{Lease: lease(j)})
	}
	done = append(done, store.Completion{Lease: lease(other[0])}, store.Completion{Lease: lease(other[1])})
	if _, err := st.CompleteJobs(ctx, nil, done); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FailJob(ctx, store.Failure{Lease: lease(failed), Permanent: true, Message: "boom", Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SampleThroughput(ctx, nil); err != nil {
		t.Fatal(err)
	}
	sum := func(queue, tenant string) (completed, failed int64) {
		t.Helper()
		bs, err := st.QueueHistory(ctx, queue, tenant, time.Hour, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.At.Unix()%60 != 0 {
				t.Fatalf("bucket at %s is not on a minute", b.At)
			}
			completed += b.Completed
			failed += b.Failed
		}
		return completed, failed
	}
	for _, c := range []struct {
		queue, tenant     string
		completed, failed int64
	}{{"mail", "", 3, 1}, {"mail", "a", 2, 0}, {"mail", "b", 1, 1}, {"other", "", 1, 0}, {"other", "a", 0, 0}, {"none", "", 0, 0}} {
		if got, gotFailed := sum(c.queue, c.tenant); got != c.completed || gotFailed != c.failed {
			t.Errorf("queue %s tenant %q: %d completed, %d failed; want %d, %d", c.queue, c.tenant, got, gotFailed, c.completed, c.failed)
		}
	}
	// The total over tenants is a row of its own (tenant '*'): a spanning
	// history reads one range of the key, however many tenants there are.
	var total int64
	if err := st.Pool().QueryRow(ctx, `SELECT sum(completed) FROM gaffer.queue_throughput WHERE queue = 'mail' AND tenant = '*'`).Scan(&total); err != nil || total != 3 {
		t.Fatalf("mail's total row: %d, %v", total, err)
	}
	// A second sample adds nothing already counted; a bucket of a week
	// holds the minute's counts.
	if err := st.SampleThroughput(ctx, nil); err != nil {
		t.Fatal(err)
	}
	bs, err := st.QueueHistory(ctx, "mail", "", 7*24*time.Hour, 2*time.Hour)
	if err != nil || len(bs) != 1 || bs[0].Completed != 3 || bs[0].Failed != 1 || bs[0].At.Unix()%7200 != 0 {
		t.Fatalf("a week of mail in 2h buckets: %+v, %v", bs, err)
	}
}

// Tenants name queues: a tenant finishing jobs in 25 queues in one sample
// gets history rows for its 20 busiest only (the totals keep all 25,
// under their own bound of 500), so it cannot grow the shared table by
// naming queues. Red with the per-tenant rank removed (25 rows).
func TestQueueHistoryIsBoundedPerTenant(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	var ps []store.InsertParams
	for i := range 25 {
		for range 1 + i%3 {
			p := params("k")
			p.Tenant, p.Queue = "wide", fmt.Sprintf("q%02d", i)
			ps = append(ps, p)
		}
	}
	if _, err := st.InsertJobs(ctx, nil, ps); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET state = 'completed', finalized_at = now() - interval '1 second', attempt = 1`); err != nil {
		t.Fatal(err)
	}
	if err := st.SampleThroughput(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var own, all, busiestKept int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE tenant = 'wide'), count(*) FILTER (WHERE tenant = '*'),
		count(*) FILTER (WHERE tenant = 'wide' AND completed = 3) FROM gaffer.queue_throughput`).Scan(&own, &all, &busiestKept); err != nil {
		t.Fatal(err)
	}
	// 8 queues finished 3 jobs, 8 two, 9 one: the 20 kept are the 16
	// busier and 4 of the 9.
	if own != 20 || all != 25 || busiestKept != 8 {
		t.Fatalf("rows: tenant's %d (want 20), totals %d (want 25), busiest kept %d (want 8)", own, all, busiestKept)
	}
}
