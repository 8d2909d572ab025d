package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func params(kind string) store.InsertParams {
	return store.InsertParams{Tenant: "default", Kind: kind, Queue: "default", MaxAttempts: 3, Args: json.RawMessage(`{}`)}
}

func claimOne(t *testing.T, st *store.Store, token int64) store.Job {
	t.Helper()
	jobs, err := st.ClaimJobs(context.Background(), store.ClaimParams{Queue: "default", Limit: 1, Token: token, LeaseTTL: time.Minute, Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(jobs))
	}
	return jobs[0]
}

func lease(j store.Job) store.Lease {
	return store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}
}

func TestMigrateUpDownStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewEmptyDatabase(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaBehind) {
		t.Fatalf("CheckSchema on empty database = %v, want ErrSchemaBehind", err)
	}
	applied, err := st.MigrateUp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != store.LatestVersion() {
		t.Fatalf("applied %v, want %d migrations", applied, store.LatestVersion())
	}
	if err := st.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema after up: %v", err)
	}
	if again, err := st.MigrateUp(ctx); err != nil || len(again) != 0 {
		t.Fatalf("second up applied %v, %v; want nothing", again, err)
	}
	reverted, err := st.MigrateDown(ctx, store.LatestVersion())
	if err != nil {
		t.Fatal(err)
	}
	if len(reverted) != store.LatestVersion() {
		t.Fatalf("reverted %v", reverted)
	}
	statuses, err := st.MigrationStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range statuses {
		if s.AppliedAt != nil {
			t.Fatalf("migration %d still applied after down", s.Version)
		}
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatalf("up after down: %v", err)
	}
}

func TestConcurrentMigrateUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewEmptyDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := store.Open(ctx, url, 2)
			if err != nil {
				errs <- err
				return
			}
			defer st.Close()
			_, err = st.MigrateUp(ctx)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestStaleWritesAreRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	res, err := st.InsertJob(ctx, nil, params("k"))
	if err != nil {
		t.Fatal(err)
	}
	first := claimOne(t, st, 111)
	if first.ID != res.Job.ID || first.Attempt != 1 || first.State != "running" {
		t.Fatalf("claimed %+v", first)
	}
	// The first attempt is lost and a second claims the job.
	if _, err := st.ReleaseJobs(ctx, []store.Lease{lease(first)}, "test"); err != nil {
		t.Fatal(err)
	}
	second := claimOne(t, st, 222)
	if second.Attempt != 2 {
		t.Fatalf("second attempt = %d", second.Attempt)
	}
	stale := lease(first)
	if ok, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: stale}}); err != nil || len(ok) != 0 {
		t.Fatalf("stale complete accepted %v (%v)", ok, err)
	}
	if _, err := st.FailJob(ctx, store.Failure{Lease: stale, Message: "x", Kind: "error"}); !errors.Is(err, store.ErrStale) {
		t.Fatalf("stale fail = %v", err)
	}
	if _, err := st.SnoozeJob(ctx, stale, time.Second); !errors.Is(err, store.ErrStale) {
		t.Fatalf("stale snooze = %v", err)
	}
	if hb, err := st.HeartbeatJobs(ctx, []store.Lease{stale}, time.Minute); err != nil || len(hb) != 0 {
		t.Fatalf("stale heartbeat accepted %v (%v)", hb, err)
	}
	if err := st.CancelRunningJob(ctx, stale, "x"); !errors.Is(err, store.ErrStale) {
		t.Fatalf("stale cancel = %v", err)
	}
	// Same id and attempt but a forged token is stale too.
	forged := lease(second)
	forged.Token++
	if ok, _ := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: forged}}); len(ok) != 0 {
		t.Fatal("completion with wrong token accepted")
	}
	if ok, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: lease(second), Result: json.RawMessage(`{"by":"second"}`)}}); err != nil || len(ok) != 1 {
		t.Fatalf("current complete = %v, %v", ok, err)
	}
	got, err := st.GetJob(ctx, "", first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "completed" || string(got.Result) != `{"by":"second"}` {
		t.Fatalf("final job %s %s", got.State, got.Result)
	}
}

func TestFailRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	p := params("k")
	p.MaxAttempts = 2
	res, _ := st.InsertJob(ctx, nil, p)
	j := claimOne(t, st, 1)
	state, err := st.FailJob(ctx, store.Failure{Lease: lease(j), Message: "boom", Kind: "error"})
	if err != nil || state != "retrying" {
		t.Fatalf("first failure: %s %v", state, err)
	}
	// Due at once (delay 0), so claimable again.
	j = claimOne(t, st, 2)
	state, err = st.FailJob(ctx, store.Failure{Lease: lease(j), Message: "boom again", Kind: "error", Stack: "trace"})
	if err != nil || state != "failed" {
		t.Fatalf("last failure: %s %v", state, err)
	}
	entries, err := st.ListDLQ(ctx, store.DLQFilter{})
	if err != nil || len(entries) != 1 {
		t.Fatalf("DLQ = %v %v", entries, err)
	}
	e := entries[0]
	var errs []map[string]any
	json.Unmarshal(e.Errors, &errs)
	if e.JobID != res.Job.ID || e.Attempts != 2 || len(errs) != 2 || e.Reason != "exhausted" {
		t.Fatalf("DLQ entry %+v errors %v", e, errs)
	}
	r, err := st.ReplayDLQEntry(ctx, "", e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReplayDLQEntry(ctx, "", e.ID); !errors.Is(err, store.ErrAlreadyReplayed) {
		t.Fatalf("second replay = %v", err)
	}
	nj, err := st.GetJob(ctx, "", r.JobID)
	if err != nil || nj.ReplayOf != e.ID || nj.State != "pending" {
		t.Fatalf("replayed job %+v %v", nj, err)
	}
}

func TestInsertJobsCopyAndUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	var ps []store.InsertParams
	for range 500 {
		ps = append(ps, params("bulk"))
	}
	ids, err := st.InsertJobs(ctx, nil, ps)
	if err != nil || len(ids) != 500 {
		t.Fatalf("copy insert: %d ids, %v", len(ids), err)
	}
	for _, id := range ids[:3] {
		if j, err := st.GetJob(ctx, "", id); err != nil || j.Kind != "bulk" {
			t.Fatalf("job %d: %v", id, err)
		}
	}
	a, b := params("u"), params("u")
	a.UniqueKey, b.UniqueKey = "key-1", "key-1"
	c := params("plain")
	held, err := st.InsertJob(ctx, nil, a)
	if err != nil {
		t.Fatal(err)
	}
	ids, err = st.InsertJobs(ctx, nil, []store.InsertParams{c, b, c, b})
	if err != nil {
		t.Fatal(err)
	}
	if ids[1] != held.Job.ID || ids[3] != held.Job.ID || ids[0] == ids[2] || slices.Contains([]int64{ids[0], ids[2]}, held.Job.ID) {
		t.Fatalf("ids %v, holder %d", ids, held.Job.ID)
	}
	again, err := st.InsertJob(ctx, nil, a)
	if err != nil || !again.Existing || again.Job.ID != held.Job.ID {
		t.Fatalf("second unique insert = %+v, %v", again, err)
	}
}

func TestHeartbeatIsHOT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One connection, so that the statistics flushed are those of the
	// connection that ran the heartbeats.
	st, err := store.Open(ctx, pgtest.NewDatabase(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 5 {
		if _, err := st.InsertJob(ctx, nil, params("k")); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 5, Token: 5, LeaseTTL: time.Minute, Node: "n"})
	if err != nil || len(jobs) != 5 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	// HOT also needs room on the page: clear the dead versions first, so
	// that only the indexes decide.
	if _, err := st.Pool().Exec(ctx, `VACUUM gaffer.jobs`); err != nil {
		t.Fatal(err)
	}
	leases := make([]store.Lease, len(jobs))
	for i, j := range jobs {
		leases[i] = lease(j)
	}
	stats := func() (upd, hot int64) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Pool().Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		err := st.Pool().QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'gaffer.jobs'::regclass`).Scan(&upd, &hot)
		if err != nil {
			t.Fatal(err)
		}
		return upd, hot
	}
	upd0, hot0 := stats()
	for range 3 {
		if hb, err := st.HeartbeatJobs(ctx, leases, time.Minute); err != nil || len(hb) != 5 {
			t.Fatalf("heartbeat: %d %v", len(hb), err)
		}
	}
	upd1, hot1 := stats()
	if upd1-upd0 != 15 || hot1-hot0 != 15 {
		t.Fatalf("heartbeat updates: %d, of which HOT %d; want 15 and 15", upd1-upd0, hot1-hot0)
	}
}

func TestClaimAfterCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	var ids []int64
	for range 5 {
		r, err := st.InsertJob(ctx, nil, params("k"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Job.ID)
	}
	first := claimOne(t, st, 1)
	if first.ID != ids[0] {
		t.Fatalf("first claim %d", first.ID)
	}
	// Give the first job back: it is due again, before the cursor.
	st.ReleaseJobs(ctx, []store.Lease{lease(first)}, "test")
	got, _ := st.GetJob(ctx, "", ids[0])
	// A later release moved its run_at to now: put it back at the front.
	st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET run_at = (SELECT min(run_at) FROM gaffer.jobs) - interval '1 second' WHERE id = $1`, ids[0])
	after := []store.UnitCursor{{Unit: store.Unit{Tenant: first.Tenant, FairnessKey: first.FairnessKey},
		ClaimPosition: store.ClaimPosition{Priority: first.Priority, RunAt: first.RunAt, ID: first.ID}}}
	jobs, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 10, Token: 2, LeaseTTL: time.Minute, Node: "n", Cursors: after})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("claimed %d after the cursor, want the 4 behind it (job %s was before it)", len(jobs), got.State)
	}
	for _, j := range jobs {
		if j.ID == ids[0] {
			t.Fatal("claimed a job before the cursor")
		}
	}
	// Without the cursor the scan starts over and finds it.
	if j := claimOne(t, st, 3); j.ID != ids[0] {
		t.Fatalf("claimed %d, want %d", j.ID, ids[0])
	}
}

func TestQueueDepthsCappedAndThroughput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	var ps []store.InsertParams
	for i := range 35 {
		p := params("d")
		if i >= 30 {
			p.Queue = "b"
		}
		ps = append(ps, p)
	}
	if _, err := st.InsertJobs(ctx, nil, ps); err != nil {
		t.Fatal(err)
	}
	if err := st.SetQueuePaused(ctx, "idle", true); err != nil {
		t.Fatal(err)
	}
	// A queue a live node works is listed with no jobs; a gone node's is not.
	if err := st.RegisterNode(ctx, "n1", "h", "dev", "2025c", map[string]int{"default": 2, "mail": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterNode(ctx, "n2", "h", "dev", "2025c", map[string]int{"ghost": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.NodeLeft(ctx, "n2", "stopped"); err != nil {
		t.Fatal(err)
	}
	jobs, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 4, Token: 1, LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(jobs) != 4 {
		t.Fatalf("claimed %d, %v", len(jobs), err)
	}
	var cs []store.Completion
	for _, j := range jobs[:3] {
		cs = append(cs, store.Completion{Lease: lease(j)})
	}
	if done, err := st.CompleteJobs(ctx, nil, cs); err != nil || len(done) != 3 {
		t.Fatalf("completed %v, %v", done, err)
	}

	qs, err := st.QueueDepthsCapped(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Queue{}
	for _, q := range qs {
		got[q.Name] = q
	}
	if len(qs) != 4 || got["default"].Pending != 10 || got["default"].Running != 1 ||
		got["b"].Pending != 5 || !got["idle"].Paused || got["idle"].Pending != 0 || got["mail"].Name != "mail" {
		t.Fatalf("capped depths = %+v", qs)
	}
	// The exact listing agrees on the names and counts past the cap.
	all, err := st.ListQueues(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range all {
		names = append(names, q.Name)
		if q.Name == "default" && (q.Pending != 26 || q.Running != 1) {
			t.Fatalf("exact depth of default = %+v", q)
		}
	}
	if !slices.Equal(names, []string{"b", "default", "idle", "mail"}) {
		t.Fatalf("queues listed: %v", names)
	}

	if err := st.SampleThroughput(ctx, nil); err != nil {
		t.Fatal(err)
	}
	series, err := st.ThroughputSeries(ctx, "", time.Hour)
	if err != nil || len(series) != 1 {
		t.Fatalf("series = %+v, %v", series, err)
	}
	// Three completions over the first sample's 10 s window.
	if r := series[0].CompletedPerSec; r < 0.29 || r > 0.31 || series[0].FailedPerSec != 0 {
		t.Fatalf("rate = %+v, want 0.3 completed/s", series[0])
	}
}

// A node paused between two statements of one of Gaffer's transactions
// must not hold the row locks it took for as long as it stays paused:
// the server ends the session after store.IdleInTxTimeout and other nodes
// can claim or rescue those rows.
func TestPausedTransactionReleasesItsLocks(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	ids, err := st.InsertJobs(ctx, nil, []store.InsertParams{params("k")})
	if err != nil {
		t.Fatal(err)
	}
	locked := make(chan struct{})
	txErr := make(chan error, 1)
	go func() {
		txErr <- st.InTx(ctx, func(q pgx.Tx) error {
			if _, err := q.Exec(ctx, `SELECT id FROM gaffer.jobs WHERE id = $1 FOR UPDATE`, ids[0]); err != nil {
				return err
			}
			close(locked)
			// The client goes quiet inside the transaction, as a stopped
			// process would.
			time.Sleep(store.IdleInTxTimeout + 2*time.Second)
			_, err := q.Exec(ctx, `SELECT 1`)
			return err
		})
	}()
	<-locked
	start := time.Now()
	for {
		var got []int64
		rows, err := st.Pool().Query(ctx, `SELECT id FROM gaffer.jobs WHERE id = $1 FOR UPDATE SKIP LOCKED`, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			got = append(got, id)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if len(got) == 1 {
			break
		}
		if time.Since(start) > store.IdleInTxTimeout+time.Second {
			t.Fatalf("the row is still locked %s after its transaction went quiet", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(start); waited < store.IdleInTxTimeout-time.Second {
		t.Fatalf("the lock went after %s, before the timeout", waited)
	}
	if err := <-txErr; err == nil {
		t.Fatal("the quiet transaction committed after its session was ended")
	}

	// Every way the store opens a transaction of its own carries the bound.
	want := store.IdleInTxTimeout.String() // "5s", as PostgreSQL shows it
	show := func(q store.DB) string {
		var v string
		if err := q.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := st.InTx(ctx, func(q pgx.Tx) error {
		if v := show(q); v != want {
			t.Errorf("InTx: idle_in_transaction_session_timeout = %s, want %s", v, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tx, err := st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := show(tx); v != want {
		t.Errorf("Begin: idle_in_transaction_session_timeout = %s, want %s", v, want)
	}
	tx.Rollback(ctx)
	if v := show(st.Pool()); v == want {
		t.Errorf("the bound leaked out of the transaction onto the pool's session")
	}
}

// States are written into the listing's SQL (so plans can use the
// per-state partial indexes); anything but a known state is refused.
func TestListJobsStates(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	ids, err := st.InsertJobs(ctx, nil, []store.InsertParams{params("a"), params("b"), params("c")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET state = 'cancelled', finalized_at = now() WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	got, err := st.ListJobs(ctx, store.JobFilter{States: []string{"cancelled"}})
	if err != nil || len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("cancelled: %v, %v", got, err)
	}
	got, err = st.ListJobs(ctx, store.JobFilter{States: []string{"pending", "cancelled"}, BeforeID: ids[2]})
	if err != nil || len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[0] {
		t.Fatalf("pending or cancelled before %d: %v, %v", ids[2], got, err)
	}
	if _, err := st.ListJobs(ctx, store.JobFilter{States: []string{"pending') OR true --"}}); err == nil {
		t.Fatal("an unknown state was accepted")
	}
}

// A tenant's view of queues and throughput holds its own jobs only: not
// another tenant's queue names, counts or rates (G9).
func TestTenantQueueViews(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	var ps []store.InsertParams
	for _, x := range []struct{ tenant, queue string }{{"a", "shared"}, {"a", "shared"}, {"a", "a-only"},
		{"b", "shared"}, {"b", "b-secret"}, {"b", "b-secret"}, {"b", "b-secret"}} {
		p := params("k")
		p.Tenant, p.Queue = x.tenant, x.queue
		ps = append(ps, p)
	}
	if _, err := st.InsertJobs(ctx, nil, ps); err != nil {
		t.Fatal(err)
	}
	// b finishes two of its b-secret jobs; a finishes nothing.
	jobs, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "b-secret", Limit: 2, Token: 1, LeaseTTL: time.Minute, Node: "n1"})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %d, %v", len(jobs), err)
	}
	if _, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: lease(jobs[0])}, {Lease: lease(jobs[1])}}); err != nil {
		t.Fatal(err)
	}
	for _, list := range []func() ([]store.Queue, error){
		func() ([]store.Queue, error) { return st.ListQueues(ctx, "a") },
		func() ([]store.Queue, error) { return st.QueueDepthsCapped(ctx, "a", 10) },
	} {
		qs, err := list()
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != 2 || qs[0].Name != "a-only" || qs[0].Pending != 1 || qs[1].Name != "shared" || qs[1].Pending != 2 {
			t.Fatalf("tenant a sees %+v, want a-only (1) and shared (2, not b's job)", qs)
		}
	}
	if err := st.SampleThroughput(ctx, nil); err != nil {
		t.Fatal(err)
	}
	rate := func(tenant string) float64 {
		series, err := st.ThroughputSeries(ctx, tenant, time.Hour)
		if err != nil || len(series) != 1 {
			t.Fatalf("series of %q = %+v, %v", tenant, series, err)
		}
		return series[0].CompletedPerSec
	}
	if a, b, all := rate("a"), rate("b"), rate(""); a != 0 || b < 0.19 || b > 0.21 || all != b {
		t.Fatalf("rates a=%v b=%v all=%v, want a 0, b and all 0.2/s", a, b, all)
	}
}

// A lost node's in-flight count is the attempts it still holds: those
// running until the rescue, then none. Before, it kept the last count the
// node reported (a dead node showed "in flight 3" for ever).
func TestLostNodeInFlightFollowsItsRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	if err := st.RegisterNode(ctx, "n-lost", "host", "dev", "2025c", map[string]int{"default": 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TouchNode(ctx, "n-lost", 3, "active"); err != nil {
		t.Fatal(err)
	}
	inFlight := func() int {
		t.Helper()
		nodes, err := st.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.ID == "n-lost" {
				return n.InFlight
			}
		}
		t.Fatal("n-lost not listed")
		return 0
	}
	if got := inFlight(); got != 3 {
		t.Fatalf("a live node: in flight %d, want the 3 it reported", got)
	}
	for range 2 {
		if _, err := st.Pool().Exec(ctx, `INSERT INTO gaffer.jobs (kind, queue, args, max_attempts, state, attempt, lease_token, lease_expires_at, node, attempted_at)
			VALUES ('k', 'default', '{}', 3, 'running', 1, 1, now() + interval '1 minute', 'n-lost', now())`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.MarkNodeLost(ctx, nil, "n-lost"); err != nil {
		t.Fatal(err)
	}
	if got := inFlight(); got != 2 {
		t.Fatalf("a lost node holding 2 running attempts: in flight %d", got)
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET state = 'pending', lease_token = NULL, lease_expires_at = NULL WHERE node = 'n-lost'`); err != nil {
		t.Fatal(err)
	}
	if got := inFlight(); got != 0 {
		t.Fatalf("a lost node whose attempts were rescued: in flight %d", got)
	}
}

// A waiting job is on no node: whichever way an attempt gives a job back
// (a retry after a failure, a snooze, a release, a lost lease's rescue, a
// remote worker's release) the job's node is cleared, and the node that
// ran a job's final attempt stays on it. Before, a released pending job
// still showed the node that released it.
func TestWaitingJobIsOnNoNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	insertJobs(t, st, store.InsertParams{Tenant: "t", Kind: "k", Queue: "q", MaxAttempts: 20})
	take := func(node string, ttl time.Duration) store.Lease {
		t.Helper()
		got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1, Node: node, LeaseTTL: ttl})
		if len(got.Jobs) != 1 {
			t.Fatalf("claim as %s: %d jobs", node, len(got.Jobs))
		}
		j := got.Jobs[0]
		if j.Node != node {
			t.Fatalf("a running job on node %q, want %s", j.Node, node)
		}
		return store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}
	}
	nodeOf := func(how string, l store.Lease, wantState string) {
		t.Helper()
		j, err := st.GetJob(ctx, "", l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != wantState || j.Node != "" {
			t.Fatalf("after %s: state %s on node %q, want %s on none", how, j.State, j.Node, wantState)
		}
	}
	l := take("n1", time.Minute)
	if _, err := st.FailJob(ctx, store.Failure{Lease: l, Message: "boom", Kind: "error"}); err != nil {
		t.Fatal(err)
	}
	nodeOf("a failure with attempts left", l, "retrying")
	l = take("n2", time.Minute)
	if _, err := st.SnoozeJob(ctx, l, 0); err != nil {
		t.Fatal(err)
	}
	nodeOf("a snooze", l, "pending")
	l = take("n3", time.Minute)
	if _, err := st.ReleaseJobs(ctx, []store.Lease{l}, "draining"); err != nil {
		t.Fatal(err)
	}
	nodeOf("a release", l, "pending")
	l = take("n4", time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	rescued, err := st.RescueJobs(ctx, nil, "", 10, "lease expired")
	if err != nil || len(rescued) != 1 || rescued[0].Node != "n4" {
		t.Fatalf("rescue: %+v, %v: want the job, and the node it was lost on", rescued, err)
	}
	nodeOf("a rescue", l, "retrying")
	l = take("w1", time.Minute)
	if _, err := st.ReleaseNodeJobs(ctx, []string{"w1"}, "the remote worker left"); err != nil {
		t.Fatal(err)
	}
	nodeOf("a remote worker's release", l, "pending")
	l = take("n5", time.Minute)
	if _, err := st.CompleteJobs(ctx, nil, []store.Completion{{Lease: l}}); err != nil {
		t.Fatal(err)
	}
	if j, err := st.GetJob(ctx, "", l.ID); err != nil || j.State != "completed" || j.Node != "n5" {
		t.Fatalf("completed: %+v, %v: want on n5, the node that ran it", j, err)
	}
}

// A job given back — its node lost, or its attempt released — goes back
// to its place in line, not behind the jobs of its unit enqueued after it
// started. Before, its run_at became the time it was given back, and a
// rescued job waited behind its unit's whole backlog (the chaos suite saw
// rescued jobs behind 220 due jobs of their unit, unrun after 8 s).
func TestGivenBackJobKeepsItsPlaceInLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, how := range []string{"rescued", "released", "released by its remote worker"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			st := pgtest.NewStore(t)
			first := insertJobs(t, st, store.InsertParams{Tenant: "t", Kind: "k", Queue: "q"})[0]
			got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1, Node: "n1", LeaseTTL: time.Millisecond})
			if len(got.Jobs) != 1 || got.Jobs[0].ID != first {
				t.Fatalf("the first claim took %v, want job %d", ids(got.Jobs), first)
			}
			j := got.Jobs[0]
			later := make([]store.InsertParams, 5)
			for i := range later {
				later[i] = store.InsertParams{Tenant: "t", Kind: "k", Queue: "q"}
			}
			insertJobs(t, st, later...)
			time.Sleep(10 * time.Millisecond)
			var err error
			switch how {
			case "rescued":
				_, err = st.RescueJobs(ctx, nil, "", 10, "lease expired")
			case "released":
				_, err = st.ReleaseJobs(ctx, []store.Lease{{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}}, "draining")
			default:
				_, err = st.ReleaseNodeJobs(ctx, []string{"n1"}, "the remote worker left")
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1, Node: "n2"}); len(got.Jobs) != 1 || got.Jobs[0].ID != first {
				t.Fatalf("after it was %s, the next claim took %v, want job %d back first", how, ids(got.Jobs), first)
			}
		})
	}
}

// Snoozes and releases do not count against a job's attempts: each
// raises max_attempts by one, and uncounted_attempts says how many did,
// so that people are shown 1 of 3 after a snooze, not 2 of 4 — and the
// DLQ entry of a job that then fails records the attempts it used of the
// budget it was enqueued with.
func TestSnoozesAndReleasesAreUncountedAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	id := insertJobs(t, st, store.InsertParams{Tenant: "t", Kind: "k", Queue: "q", MaxAttempts: 3})[0]
	take := func() store.Lease {
		t.Helper()
		got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1})
		if len(got.Jobs) != 1 {
			t.Fatalf("claim: %d jobs", len(got.Jobs))
		}
		j := got.Jobs[0]
		return store.Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}
	}
	check := func(how string, attempt, maxAttempts, uncounted int) {
		t.Helper()
		j, err := st.GetJob(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Attempt != attempt || j.MaxAttempts != maxAttempts || j.UncountedAttempts != uncounted {
			t.Fatalf("after %s: attempt %d of %d, %d uncounted; want %d of %d, %d uncounted",
				how, j.Attempt, j.MaxAttempts, j.UncountedAttempts, attempt, maxAttempts, uncounted)
		}
	}
	if _, err := st.SnoozeJob(ctx, take(), 0); err != nil {
		t.Fatal(err)
	}
	check("a snooze", 1, 4, 1)
	if _, err := st.ReleaseJobs(ctx, []store.Lease{take()}, "draining"); err != nil {
		t.Fatal(err)
	}
	check("a release", 2, 5, 2)
	take()
	if _, err := st.ReleaseNodeJobs(ctx, []string{"n1"}, "the remote worker left"); err != nil {
		t.Fatal(err)
	}
	check("a remote worker's release", 3, 6, 3)
	for range 3 {
		if _, err := st.FailJob(ctx, store.Failure{Lease: take(), Message: "boom", Kind: "error"}); err != nil {
			t.Fatal(err)
		}
	}
	check("three failures", 6, 6, 3)
	var attempts, maxAttempts int
	if err := st.Pool().QueryRow(ctx, `SELECT attempts, max_attempts FROM gaffer.dlq WHERE job_id = $1`, id).Scan(&attempts, &maxAttempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 3 || maxAttempts != 3 {
		t.Fatalf("the DLQ entry says %d attempts of %d, want the 3 of 3 that counted", attempts, maxAttempts)
	}
}

// Workflow timers — gaffer.sleep and gaffer.signal jobs waiting in a
// queue — are Gaffer's own: queue counts leave them out, exact or capped,
// for an operator and for a tenant, so a queue whose only jobs are a
// week-long sleep reads empty. At the cap the count stays "at least the
// cap". Red with the timers' subtraction (and the tenant's kind filter)
// removed: wf reads 3 pending.
func TestQueueCountsLeaveTimersOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	var ps []store.InsertParams
	add := func(n int, kind, queue string, delay time.Duration) {
		for range n {
			p := params(kind)
			p.Queue, p.Delay = queue, delay
			ps = append(ps, p)
		}
	}
	add(2, "gaffer.sleep", "wf", time.Hour)    // sleeping
	add(1, "gaffer.signal", "wf", 0)           // due: waiting for a node to time it out
	add(4, "report", "mixed", 0)               // the user's, due
	add(1, "report", "mixed", time.Hour)       // and scheduled
	add(2, "gaffer.sleep", "mixed", time.Hour) // beside them
	add(12, "report", "big", 0)                // past the cap of 10
	add(3, "gaffer.sleep", "big", time.Hour)
	if _, err := st.InsertJobs(ctx, nil, ps); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"wf": 0, "mixed": 5, "big": 12}
	check := func(name string, qs []store.Queue, err error, capped bool) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, q := range qs {
			got[q.Name] = q.Pending
		}
		for q, n := range want {
			if capped && n > 10 {
				n = 10
			}
			if got[q] != n {
				t.Errorf("%s: %s pending %d, want %d (all: %v)", name, q, got[q], n, got)
			}
		}
	}
	qs, err := st.ListQueues(ctx, "")
	check("exact", qs, err, false)
	qs, err = st.QueueDepthsCapped(ctx, "", 10)
	check("capped", qs, err, true)
	qs, err = st.ListQueues(ctx, "default")
	check("tenant", qs, err, false)
}
