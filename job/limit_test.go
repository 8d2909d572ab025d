package job_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// A cluster-wide concurrency limit is never exceeded: two workers with ten
// slots each run at most three of the limited jobs at once, and every job
// still completes (G10). Red with the limit check removed from the claim.
func TestConcurrencyLimitHoldsAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "three", Queue: "lim", Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	var running, peak, done atomic.Int64
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		running.Add(-1)
		done.Add(1)
		return nil
	})
	e.enqueueMany("t", "lim", 40)
	for _, node := range []string{"node-a", "node-b"} {
		e.startWorker(job.WorkerConfig{NodeID: node, Queues: map[string]int{"lim": 10}, PollInterval: 20 * time.Millisecond})
	}
	deadline := time.Now().Add(20 * time.Second)
	for done.Load() < 40 {
		var n int
		e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE queue = 'lim' AND state = 'running'`).Scan(&n)
		if n > 3 {
			t.Fatalf("%d limited jobs running at once in the database, limit 3", n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 40 jobs done after 20s", done.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("peak %d handlers at once, want at most 3 (and the limit used)", p)
	}
	t.Logf("peak %d of 3", peak.Load())
}

// A slot is held until the attempt holding it is over: a job claimed by a
// node that then died keeps its slot until its lease expires and it is
// rescued, never earlier; then the slot comes back.
func TestDeadNodesSlotComesBackOnlyWithRescue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "one", Queue: "solo", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	e.enqueueMany("t", "solo", 2)
	// The "dead" node claims one and never reports again.
	by, claimed := e.claimN("solo", 2)
	if len(claimed) != 1 || by["t"] != 1 {
		t.Fatalf("the first claim took %d, want 1 (limit 1)", len(claimed))
	}
	if by, _ := e.claimN("solo", 2); len(by) != 0 {
		t.Fatalf("a second claim got %v while the first attempt holds the slot", by)
	}
	// Its lease expires (the database's clock): the slot is still held
	// until the attempt is rescued.
	e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, claimed[0].ID)
	if by, _ := e.claimN("solo", 2); len(by) != 0 {
		t.Fatalf("claimed %v before the expired attempt was rescued", by)
	}
	rescuer, err := maintenance.NewLeaseRescuer(maintenance.LeaseRescuerConfig{Pool: e.st.Pool(), Metrics: e.metrics, Logger: testLogger(t), BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rescuer.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, jobs := e.claimN("solo", 2); len(jobs) != 1 {
		t.Fatalf("after the rescue a claim got %d jobs, want 1 (the slot is back, still one)", len(jobs))
	}
	// The stale attempt cannot free the slot: its completion is refused.
	accepted, err := e.st.CompleteJobs(ctx, nil, []store.Completion{{Lease: store.Lease{ID: claimed[0].ID, Attempt: claimed[0].Attempt, Token: claimed[0].LeaseToken}}})
	if err != nil || len(accepted) != 0 {
		t.Fatalf("the stale attempt's completion: %v %v", accepted, err)
	}
	if by, _ := e.claimN("solo", 2); len(by) != 0 {
		t.Fatalf("claimed %v after a stale completion, which must not free the slot", by)
	}
}

// Jobs over a rate limit wait, they do not fail: with 5 starts per 500ms
// in bursts of 2, 1.5s of claiming starts at most 2 + 15 jobs, and the
// rest stay pending and due.
func TestRateLimitDelaysNotFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "slow", Queue: "rated", Rate: 5, Period: 500 * time.Millisecond, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	e.enqueueMany("t", "rated", 100)
	start := time.Now()
	started := 0
	for time.Since(start) < 1500*time.Millisecond {
		_, jobs := e.claimN("rated", 50)
		started += len(jobs)
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	max := 2 + int(elapsed.Seconds()*10) + 1
	if started > max || started < 10 {
		t.Fatalf("%d starts in %s under 5 per 500ms with burst 2, want between 10 and %d", started, elapsed, max)
	}
	var pending, failed int
	e.st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'failed') FROM gaffer.jobs`).Scan(&pending, &failed)
	if failed != 0 || pending != 100-started {
		t.Fatalf("%d pending and %d failed after %d starts", pending, failed, started)
	}
	t.Logf("%d starts in %s", started, elapsed.Round(time.Millisecond))
}

// A limit keyed per tenant (or by a field of the args) counts each key
// separately.
func TestLimitKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "per-tenant", Queue: "keyed", Key: "tenant", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "per-account", Queue: "args", Key: "args.account.id", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	e.enqueueMany("a", "keyed", 10)
	e.enqueueMany("b", "keyed", 10)
	if by, _ := e.claimN("keyed", 20); by["a"] != 2 || by["b"] != 2 {
		t.Fatalf("per-tenant limit 2: %v", by)
	}
	for _, acct := range []string{"x", "x", "y", "y", "z"} {
		if _, err := e.client.Enqueue(ctx, job.Request{Kind: "k", Queue: "args", Args: map[string]any{"account": map[string]string{"id": acct}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, jobs := e.claimN("args", 10); len(jobs) != 3 {
		t.Fatalf("per-account limit 1 over accounts x, x, y, y, z: %d claimed, want 3", len(jobs))
	}
	usage, err := e.client.Limit(ctx, "per-account")
	if err != nil || usage.InUse != 3 || usage.Busiest != 1 || usage.Due != 2 {
		t.Fatalf("usage %+v, %v", usage, err)
	}
}

// Bad limits are refused with the field at fault, and write nothing.
func TestLimitValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	bad := []job.Limit{
		{Name: "Bad Name", Concurrency: 1},
		{Name: "none"},
		{Name: "neg", Concurrency: -1},
		{Name: "key", Concurrency: 1, Key: "args"},
		{Name: "key2", Concurrency: 1, Key: "host(args.url"},
		{Name: "key3", Concurrency: 1, Key: "args.a;drop"},
		{Name: "period", Rate: 5},
		{Name: "period2", Rate: 5, Period: 48 * time.Hour},
		{Name: "burst", Concurrency: 1, Burst: 3},
		{Name: "queue", Concurrency: 1, Queue: "Not OK"},
		{Name: "kind", Concurrency: 1, Kind: "bad kind"},
	}
	for _, l := range bad {
		var ve *job.ValidationError
		if _, err := e.client.SetLimit(ctx, l); !errors.As(err, &ve) {
			t.Errorf("%+v: %v, want a validation error", l, err)
		}
	}
	all, err := e.client.Limits(ctx)
	if err != nil || len(all) != 1 || all[0].Name != "http-per-host" {
		t.Fatalf("limits after refused ones: %+v, %v (want only the default http-per-host)", all, err)
	}
	if err := e.client.DeleteLimit(ctx, "nope"); !errors.Is(err, job.ErrLimitNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
}
