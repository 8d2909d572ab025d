package job_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// claimN claims up to n jobs of queue as node n1 and counts them by
// tenant.
func (e *env) claimN(queue string, n int, cursors ...store.UnitCursor) (map[string]int, []store.Job) {
	e.t.Helper()
	jobs, err := e.st.ClaimJobs(context.Background(), store.ClaimParams{Queue: queue, Limit: n, Token: time.Now().UnixNano(),
		LeaseTTL: time.Minute, Node: "n1", Cursors: cursors})
	if err != nil {
		e.t.Fatal(err)
	}
	by := map[string]int{}
	for _, j := range jobs {
		by[j.Tenant]++
	}
	return by, jobs
}

func (e *env) enqueueMany(tenant, queue string, n int, mod ...func(*job.Request)) {
	e.t.Helper()
	reqs := make([]job.Request, n)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "k", Tenant: tenant, Queue: queue}
		for _, m := range mod {
			m(&reqs[i])
		}
	}
	if _, err := e.client.EnqueueMany(context.Background(), reqs); err != nil {
		e.t.Fatal(err)
	}
}

// One tenant's backlog, however large, does not delay another tenant's
// due job by more than a claim round: the very next claim shares its
// slots (G10). Red with plain FIFO claiming: the first claims are all A's.
func TestClaimSharesSlotsAmongTenants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enqueueMany("a", "shared", 5000)
	e.enqueueMany("b", "shared", 1)
	e.enqueueMany("c", "shared", 2)
	by, jobs := e.claimN("shared", 10)
	if by["b"] != 1 || by["c"] != 2 || by["a"] != 7 {
		t.Fatalf("first claim after a's 5,000-job backlog: %v, want b 1, c 2, a the rest (7)", by)
	}
	// a's share (4 of 10) and the slots b and c left (3) are a's first 7
	// jobs, in order: the leftover continues where the share ended.
	var aIDs []int64
	for _, j := range jobs {
		if j.Tenant == "a" {
			aIDs = append(aIDs, j.ID)
		}
	}
	slices.Sort(aIDs)
	if aIDs[0] != 1 || aIDs[len(aIDs)-1] != 7 {
		t.Fatalf("a's jobs in the first claim: %v, want its first seven (1-7)", aIDs)
	}
	// Both backlogged: even shares; the leftover of a short unit goes to
	// the others.
	e.enqueueMany("b", "shared", 100)
	if by, _ := e.claimN("shared", 20); by["a"] != 10 || by["b"] != 10 {
		t.Fatalf("a and b backlogged: %v, want 10 each", by)
	}
}

// A tenant's weight sets its share; within a tenant, priorities still
// come first.
func TestWeightsAndPriorities(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if err := e.client.SetTenantWeight(ctx, "gold", 3); err != nil {
		t.Fatal(err)
	}
	e.enqueueMany("gold", "w", 200, func(r *job.Request) { r.Priority = 5 })
	e.enqueueMany("gold", "w", 5, func(r *job.Request) { r.Priority = 1 })
	e.enqueueMany("basic", "w", 200)
	by, jobs := e.claimN("w", 40)
	if by["gold"] != 30 || by["basic"] != 10 {
		t.Fatalf("weights 3:1 over 40 slots: %v, want gold 30, basic 10", by)
	}
	var goldPrio []int
	for _, j := range jobs {
		if j.Tenant == "gold" {
			goldPrio = append(goldPrio, j.Priority)
		}
	}
	first := 0
	for _, p := range goldPrio {
		if p == 1 {
			first++
		}
	}
	if first != 5 {
		t.Fatalf("gold's 5 priority-1 jobs not all in its first claim: %v", goldPrio)
	}
	if err := e.client.SetTenantWeight(ctx, "gold", 0); err == nil {
		t.Fatal("weight 0 accepted")
	}
	if err := e.client.SetTenantWeight(ctx, "Not OK", 2); err == nil {
		t.Fatal("a bad tenant name accepted")
	}
}

// A run_at in the past is clamped to the enqueue time: a job claiming to
// be due an hour ago does not jump ahead of jobs enqueued before it.
func TestPastRunAtDoesNotJumpTheLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.enqueueMany("t", "line", 3)
	late, err := e.client.Enqueue(ctx, job.Request{Kind: "k", Tenant: "t", Queue: "line", RunAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(late.Job.RunAt) > time.Minute {
		t.Fatalf("run_at stored as %s, not clamped to now", late.Job.RunAt)
	}
	_, jobs := e.claimN("line", 3)
	for _, j := range jobs {
		if j.ID == late.Job.ID {
			t.Fatal("the back-dated job was claimed before the three enqueued ahead of it")
		}
	}
	late2, _ := e.client.EnqueueMany(ctx, []job.Request{{Kind: "k", Tenant: "t", Queue: "line", RunAt: time.Now().Add(-time.Hour)}})
	got, _ := e.client.Get(ctx, "", late2[0])
	if time.Since(got.RunAt) > time.Minute {
		t.Fatalf("batch insert stored run_at %s, not clamped", got.RunAt)
	}
}

// With more tenants than a claim has slots, claims take turns: every
// tenant is served within a few claims, not only those that sort last.
func TestManyTenantsAreServedInTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const tenants = 50
	for i := range tenants {
		e.enqueueMany(fmt.Sprintf("t%02d", i), "many", 20)
	}
	var mu sync.Mutex
	firstStart := map[string]int{}
	var starts atomic.Int64
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error {
		n := starts.Add(1)
		mu.Lock()
		if _, ok := firstStart[j.Tenant]; !ok {
			firstStart[j.Tenant] = int(n)
		}
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		return nil
	})
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"many": 10}, ClaimBatch: 10})
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(firstStart)
		mu.Unlock()
		if n == tenants {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s only %d of %d tenants had a job started", n, tenants)
		}
		time.Sleep(20 * time.Millisecond)
	}
	latest := 0
	for _, n := range firstStart {
		latest = max(latest, n)
	}
	// FIFO-by-tenant would start the last tenant's first job after
	// 49 × 20 = 980 others; turns serve every tenant within a few rounds.
	if latest > 200 {
		t.Fatalf("the last tenant's first job was start #%d of 1000", latest)
	}
	t.Logf("every tenant had a job started within the first %d starts", latest)
}

// A limit on one tenant's kind holds in a claim shared among tenants
// (the claim decides whether limits apply from the kinds and tenants it
// took): b's share of 5 is cut to the limit's 2, and a takes the rest.
func TestLimitInASharedClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.client.SetLimit(context.Background(), job.Limit{Name: "lim-2", Kind: "lim", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	e.enqueueMany("a", "mixed", 100)
	e.enqueueMany("b", "mixed", 20, func(r *job.Request) { r.Kind = "lim" })
	by, jobs := e.claimN("mixed", 10)
	lim := 0
	for _, j := range jobs {
		if j.Kind == "lim" {
			lim++
		}
	}
	// b's share is 5, the limit lets 2 start; the 3 slots left go to a,
	// beyond its share (the claim looks deeper into a unit that gave all
	// it was asked for while the claim is not full).
	if lim != 2 || by["b"] != 2 || by["a"] != 8 {
		t.Fatalf("claim of 10 with b's kind limited to 2: %v (%d of kind lim), want b 2, a 8", by, lim)
	}
}

// A claim leaves the fresh jobs of a unit its caller's last claim did not
// serve to the side claim their insert asks for, while a unit it served
// has jobs; b's job is claimed as before once older than the grace, or
// by a caller that served nothing. Red without the grace: b's fresh job
// is in the first claim.
func TestClaimLeavesFreshUnitsToSideClaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.enqueueMany("a", "grace", 100)
	e.enqueueMany("b", "grace", 1)
	claim := func(served []store.Unit) map[string]int {
		jobs, err := e.st.ClaimJobs(context.Background(), store.ClaimParams{Queue: "grace", Limit: 10, Token: time.Now().UnixNano(),
			LeaseTTL: time.Minute, Node: "n1", Served: served, Grace: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]int{}
		for _, j := range jobs {
			by[j.Tenant]++
		}
		return by
	}
	a := []store.Unit{{Tenant: "a"}}
	if by := claim(a); by["b"] != 0 || by["a"] != 10 {
		t.Fatalf("a served last, b's job fresh: claimed %v, want a 10, b none", by)
	}
	if by := claim([]store.Unit{{Tenant: "c"}}); by["b"] != 1 {
		t.Fatalf("no unit served last among the queue's: claimed %v, want b's fresh job in the claim", by)
	}
	e.enqueueMany("b", "grace", 1)
	if by := claim(nil); by["b"] != 1 {
		t.Fatalf("the caller served nothing: claimed %v, want b's fresh job in the claim", by)
	}
	e.enqueueMany("b", "grace", 1)
	e.exec(`UPDATE gaffer.jobs SET run_at = now() - interval '2 minutes' WHERE tenant = 'b' AND state = 'pending'`)
	if by := claim(a); by["b"] != 1 {
		t.Fatalf("b's job due 2 minutes ago: claimed %v, want it in the claim", by)
	}
}
