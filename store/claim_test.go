package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// The claim's holes an outside review found (issue 23), each replayed
// here through the claim every path uses. Each test was red on the claim
// before the rewrite (store/schema/claim.sql, limits.sql).

func insertJobs(t *testing.T, st *store.Store, ps ...store.InsertParams) []int64 {
	t.Helper()
	for i := range ps {
		if ps[i].Args == nil {
			ps[i].Args = json.RawMessage(`{}`)
		}
		if ps[i].MaxAttempts == 0 {
			ps[i].MaxAttempts = 3
		}
	}
	ids, err := st.InsertJobs(context.Background(), nil, ps)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func claim(t *testing.T, st *store.Store, p store.ClaimParams) store.Claimed {
	t.Helper()
	if p.Token == 0 {
		p.Token = time.Now().UnixNano()
	}
	if p.LeaseTTL == 0 {
		p.LeaseTTL = time.Minute
	}
	if p.Node == "" {
		p.Node = "n1"
	}
	got, err := st.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("claim %+v: %v", p, err)
	}
	return got
}

func ids(jobs []store.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func setLimit(t *testing.T, st *store.Store, l store.LimitRow) {
	t.Helper()
	if _, err := st.UpsertLimit(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// Hole 1: a due job waited for ever behind other units' jobs that were not
// yet due — the claim looked at n units with waiting jobs, due or not, and
// a short claim started again from the same units. Seen: 10 jobs with
// distinct fairness keys due in an hour, then a due job, 10 free slots:
// the due job stayed pending. Here also with those future jobs marked due
// (as a node of an earlier build writes them), and across tenants (a
// tenant whose name sorts last).
func TestDueJobIsNotStarvedByFutureUnits(t *testing.T) {
	t.Parallel()
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("marked-due=%v", stale), func(t *testing.T) {
			t.Parallel()
			st := pgtest.NewStore(t)
			var future []store.InsertParams
			for i := range 10 {
				future = append(future, store.InsertParams{Tenant: "zzz", Kind: "k", Queue: "q", FairnessKey: fmt.Sprintf("f%02d", i), Delay: time.Hour})
			}
			insertJobs(t, st, future...)
			if stale {
				if _, err := st.Pool().Exec(context.Background(), `UPDATE gaffer.jobs SET due = true`); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range []int{10, 1} {
				due := insertJobs(t, st, store.InsertParams{Tenant: "aaa", Kind: "k", Queue: "q"},
					store.InsertParams{Tenant: "zzz", Kind: "k", Queue: "q", FairnessKey: "a-due-one"})
				got := claim(t, st, store.ClaimParams{Queue: "q", Limit: n})
				if len(got.Jobs) != min(n, 2) {
					t.Fatalf("a claim of %d took %v; due jobs %v were waiting", n, ids(got.Jobs), due)
				}
				claim(t, st, store.ClaimParams{Queue: "q", Limit: 10}) // the rest
			}
		})
	}
}

// Hole 1, with a limit: units whose due jobs a saturated limit refuses
// (here the top 40, of a tenant whose name sorts last) do not starve the
// units below them, in a claim of fewer jobs than there are such units.
func TestDueJobIsNotStarvedByRefusedUnits(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	setLimit(t, st, store.LimitRow{Name: "zzz-one", Tenant: "zzz", Concurrency: 1})
	insertJobs(t, st, store.InsertParams{Tenant: "zzz", Kind: "k", Queue: "q", FairnessKey: "running"})
	if got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1}); len(got.Jobs) != 1 {
		t.Fatalf("claimed %d of zzz's first job, want 1", len(got.Jobs))
	}
	var refused []store.InsertParams
	for i := range 40 {
		refused = append(refused, store.InsertParams{Tenant: "zzz", Kind: "k", Queue: "q", FairnessKey: fmt.Sprintf("f%02d", i)})
	}
	insertJobs(t, st, refused...)
	want := insertJobs(t, st, store.InsertParams{Tenant: "aaa", Kind: "k", Queue: "q"})
	// A node's claims keep their place among the units, as a node does.
	var cur store.ClaimCursor
	for round := range 2 {
		p := store.ClaimParams{Queue: "q", Limit: 5}
		cur.Prepare(&p, time.Now(), time.Minute)
		got := claim(t, st, p)
		cur.Advance(got, 5, time.Now())
		if len(got.Jobs) == 1 && got.Jobs[0].ID == want[0] {
			return
		}
		if len(got.Jobs) != 0 {
			t.Fatalf("round %d claimed %v, want only aaa's job %d", round, ids(got.Jobs), want[0])
		}
	}
	t.Fatalf("aaa's due job %d was not claimed in two claims: the refused units above it starve it", want[0])
}

// Hole 1, for a remote worker: units above whose due jobs are all of
// kinds the worker does not handle do not starve its kind's job below.
func TestRemoteClaimIsNotStarvedByOtherKinds(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	if err := st.RegisterRemoteWorker(ctx, store.RemoteWorkerParams{ID: "w1", Name: "w", Version: "1", Tenant: "t",
		Queues: []string{"q"}, Kinds: []string{"b"}, MaxPerTenant: 10}); err != nil {
		t.Fatal(err)
	}
	var others []store.InsertParams
	for i := range 40 {
		others = append(others, store.InsertParams{Tenant: "t", Kind: "a", Queue: "q", FairnessKey: fmt.Sprintf("z%02d", i)})
	}
	insertJobs(t, st, others...)
	want := insertJobs(t, st, store.InsertParams{Tenant: "t", Kind: "b", Queue: "q", FairnessKey: "a"})
	got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 2, Node: "w1", Remote: true, Tenant: "t", Kinds: []string{"b"}})
	if len(got.Jobs) != 1 || got.Jobs[0].ID != want[0] {
		t.Fatalf("the remote claim took %v, want the b job %d", ids(got.Jobs), want[0])
	}
}

// Hole 2: deleting (or changing) one limit while a claim waited on its
// bucket switched another limit off for that claim — the per-bucket
// figures came from a join that dropped the deleted bucket, one short,
// and the next limit was paired with nothing. Seen: limits a_t1 (tenant
// t1, 100) and b_queue (queue q, 3); a transaction holds a_t1's bucket;
// the limit a_t1 deleted and a claim of q behind it; 7 admitted under 3.
// Now a limit's change waits for the claims in flight.
func TestLimitDeletedUnderAWaitingClaim(t *testing.T) {
	t.Parallel()
	for _, change := range []string{"delete", "change-key"} {
		t.Run(change, func(t *testing.T) {
			t.Parallel()
			st := pgtest.NewStore(t)
			ctx := context.Background()
			setLimit(t, st, store.LimitRow{Name: "a_t1", Tenant: "t1", Concurrency: 100})
			setLimit(t, st, store.LimitRow{Name: "b_queue", Queue: "q", Concurrency: 3})
			if _, err := st.Pool().Exec(ctx, `INSERT INTO gaffer.limit_buckets (limit_name, key) VALUES ('a_t1', '')`); err != nil {
				t.Fatal(err)
			}
			var ps []store.InsertParams
			for range 10 {
				ps = append(ps, store.InsertParams{Tenant: "t1", Kind: "k", Queue: "q"})
			}
			insertJobs(t, st, ps...)
			tx, err := st.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SELECT 1 FROM gaffer.limit_buckets WHERE limit_name = 'a_t1' FOR UPDATE`); err != nil {
				t.Fatal(err)
			}
			claimed := make(chan store.Claimed, 1)
			go func() {
				got, _ := st.Claim(ctx, store.ClaimParams{Queue: "q", Limit: 10, Token: 1, LeaseTTL: time.Minute, Node: "n1"})
				claimed <- got
			}()
			waitForLockWait(t, st, "gaffer.claim_ready(")
			changed := make(chan error, 1)
			go func() {
				if change == "delete" {
					changed <- st.DeleteLimit(ctx, "a_t1")
				} else {
					_, err := st.UpsertLimit(ctx, store.LimitRow{Name: "a_t1", Tenant: "t1", KeyFrom: "kind", Concurrency: 100})
					changed <- err
				}
			}()
			time.Sleep(100 * time.Millisecond)
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			got := <-claimed
			if err := <-changed; err != nil {
				t.Fatal(err)
			}
			var running int
			if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running'`).Scan(&running); err != nil {
				t.Fatal(err)
			}
			if len(got.Jobs) > 3 || running > 3 {
				t.Fatalf("the claim took %d, %d running, under b_queue's limit of 3", len(got.Jobs), running)
			}
			if len(got.Jobs) != 3 {
				t.Fatalf("the claim took %d, want 3", len(got.Jobs))
			}
		})
	}
}

// waitForLockWait waits until a statement containing query waits on a
// lock.
func waitForLockWait(t *testing.T, st *store.Store, query string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting bool
		err := st.Pool().QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 IN query) > 0)`, query).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement with %q waited on a lock within 10s", query)
		}
	}
}

// Hole 5: one job stopped the claim of a shared queue for every tenant —
// a limit's bucket key went as it was into the buckets' btree, and a key
// over ~2.7 KB failed the claim statement on every node, every poll.
// Seen with an args.<field> limit and 8 KB of text, and with the default
// http-per-host limit, whose host was the text after the first '@' of
// the URL (Go dials what follows the last). Now keys are bounded, and the
// host is read as Go reads it.
func TestPoisonedLimitKeysStopNothing(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	setLimit(t, st, store.LimitRow{Name: "per-account", Queue: "q", KeyFrom: "args.account.id", Concurrency: 5})
	long := strings.Repeat("x", 8000)
	poison, _ := json.Marshal(map[string]any{"account": map[string]any{"id": long}})
	url, _ := json.Marshal(map[string]any{"url": "http://x@" + long + "@127.0.0.1:8080/hook"})
	want := insertJobs(t, st,
		store.InsertParams{Tenant: "evil", Kind: "k", Queue: "q", Args: poison},
		store.InsertParams{Tenant: "evil", Kind: "http", Queue: "q", Args: url},
		store.InsertParams{Tenant: "good", Kind: "k", Queue: "q", Args: json.RawMessage(`{"account":{"id":"a1"}}`)})
	got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 10})
	if len(got.Jobs) != len(want) {
		t.Fatalf("claimed %v, want all of %v", ids(got.Jobs), want)
	}
	keys := map[string]string{}
	rows, err := st.Pool().Query(ctx, `SELECT limit_name, key FROM gaffer.limit_buckets`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, key string
		if err := rows.Scan(&name, &key); err != nil {
			t.Fatal(err)
		}
		if len(key) > 200+64 {
			t.Errorf("bucket %s has a key of %d bytes", name, len(key))
		}
		keys[name] += key + " "
	}
	if keys["http-per-host"] != "127.0.0.1 " {
		t.Errorf("the http job counts under host %q, want 127.0.0.1 (the host Go dials)", keys["http-per-host"])
	}
}

// Hole 1, within a unit: a job no limit refuses, behind more of its
// unit's jobs than a claim takes that a saturated limit refuses, is not
// starved by them — the claim looks deeper into the unit, past them (up
// to 4,096 candidates a claim). Red with the claim looking at each unit's
// first candidates only.
func TestJobBehindRefusedJobsOfItsUnitRuns(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	setLimit(t, st, store.LimitRow{Name: "per-host", Queue: "q", KeyFrom: "args.host", Concurrency: 1})
	h1 := json.RawMessage(`{"host":"h1"}`)
	insertJobs(t, st, store.InsertParams{Tenant: "a", Kind: "k", Queue: "q", Args: h1})
	if got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1}); len(got.Jobs) != 1 {
		t.Fatalf("claimed %d, want h1's first job", len(got.Jobs))
	}
	var refused []store.InsertParams
	for range 20 {
		refused = append(refused, store.InsertParams{Tenant: "a", Kind: "k", Queue: "q", Args: h1})
	}
	insertJobs(t, st, refused...)
	want := insertJobs(t, st, store.InsertParams{Tenant: "a", Kind: "k", Queue: "q", Args: json.RawMessage(`{"host":"h2"}`)})
	got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 5})
	if len(got.Jobs) != 1 || got.Jobs[0].ID != want[0] {
		t.Fatalf("claimed %v, want h2's job %d behind 20 of h1's the limit refuses", ids(got.Jobs), want[0])
	}
}

// A limit with no room left for any job of a unit, or of the queue, ends
// the claim's look into them: a claim under a full limit reads a round of
// candidates, not max_weighed of them. (bench limits: a binding limit of
// 50 went from 90% of its capacity to 70% when every claim looked 4,096
// jobs deep into the one unit none of whose jobs could start.) The jobs
// the claim read are counted by PostgreSQL's statistics for the claim's
// own transaction.
func TestFullLimitEndsTheClaim(t *testing.T) {
	t.Parallel()
	for _, lim := range []store.LimitRow{
		{Name: "whole-queue", Queue: "q", Concurrency: 3},
		{Name: "by-tenant", KeyFrom: "tenant", Concurrency: 3},
		{Name: "by-fairness-key", Queue: "q", KeyFrom: "fairness_key", Concurrency: 3},
		{Name: "by-rate", Queue: "q", Rate: 3, Period: time.Hour, Burst: 3},
	} {
		t.Run(lim.Name, func(t *testing.T) {
			t.Parallel()
			st := pgtest.NewStore(t)
			ctx := context.Background()
			setLimit(t, st, lim)
			ps := make([]store.InsertParams, 6000)
			for i := range ps {
				ps[i] = store.InsertParams{Tenant: "t1", Kind: "k", Queue: "q", FairnessKey: "f"}
			}
			insertJobs(t, st, ps...)
			if got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 10}); len(got.Jobs) != 3 {
				t.Fatalf("the first claim took %d, want the limit's 3", len(got.Jobs))
			}
			tx, err := st.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			// The view also holds what this connection read in earlier
			// transactions and has not yet reported: the claim's are the
			// difference (nothing is reported inside a transaction).
			readSoFar := func() int64 {
				var n int64
				if err := tx.QueryRow(ctx, `SELECT coalesce(sum(idx_tup_fetch), 0) + coalesce(sum(seq_tup_read), 0) FROM pg_stat_xact_user_tables
					WHERE relid = 'gaffer.jobs'::regclass`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := readSoFar()
			var took int
			if err := tx.QueryRow(ctx, `SELECT coalesce(cardinality(c.ids), 0) FROM gaffer.claim('q', 100, 'n1', false, NULL, NULL, NULL, NULL,
				'{}', '{}', '{}', '{}', '{}', NULL, NULL, '{}', '{}', 0) c`).Scan(&took); err != nil {
				t.Fatal(err)
			}
			read := readSoFar() - before
			if took != 0 {
				t.Fatalf("a claim under the full limit took %d", took)
			}
			// A round of 100 candidates, the 3 running counted, and the
			// probes that find the unit: a few hundred rows at most.
			if read > 500 {
				t.Fatalf("a claim under the full limit %s read %d jobs: it looked deeper into a unit none of whose jobs can start", lim.Name, read)
			}
		})
	}
}

// A rate limit's tokens are spent at one instant per claim, and every job
// the claim starts starts at that instant. Before, each round of a claim
// spent at its own instant and the jobs were stamped with the last
// round's: jobs admitted in the first round started, on the record,
// after the tokens that let them start were spent, and a window of one
// second held 11 starts under a limit of burst 5 + rate 5 (seen on a
// loaded machine, where a claim's rounds lie further apart). Here the
// claim's first round spends the burst, the limit refuses the rest of
// the unit and the claim looks deeper: a second round.
func TestClaimStartsItsJobsAtTheInstantItSpentTheirTokens(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	// A kind's limit: the claim cannot tell the unit is full from the
	// limit alone (limits_full), so it looks deeper.
	setLimit(t, st, store.LimitRow{Name: "by-rate", Kind: "a", Rate: 1, Period: time.Hour, Burst: 2})
	ps := make([]store.InsertParams, 40)
	for i := range ps {
		ps[i] = store.InsertParams{Tenant: "t1", Kind: "a", Queue: "q", FairnessKey: "f"}
	}
	insertJobs(t, st, ps...)
	got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 10})
	if len(got.Jobs) != 2 {
		t.Fatalf("the claim took %d, want the burst's 2", len(got.Jobs))
	}
	var spent time.Time
	if err := st.Pool().QueryRow(ctx, `SELECT refilled_at FROM gaffer.limit_buckets WHERE limit_name = 'by-rate'`).Scan(&spent); err != nil {
		t.Fatal(err)
	}
	for _, j := range got.Jobs {
		if j.AttemptedAt == nil || !j.AttemptedAt.Equal(spent) {
			t.Fatalf("job %d started at %v, its token was spent at %v", j.ID, j.AttemptedAt, spent)
		}
	}
}

// Time never runs backwards for a rate bucket: a claim whose instant is
// earlier than the bucket's last spend (another claim took the bucket,
// at a later instant, between this claim's rounds) gets nothing from it,
// and leaves it as it was. Without that it would spend at its earlier
// instant, move the bucket's clock back, and the next claim would refill
// the time in between twice.
func TestLateClaimGetsNothingFromARateBucket(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	setLimit(t, st, store.LimitRow{Name: "by-rate", Kind: "a", Rate: 1, Period: time.Hour, Burst: 5})
	ps := make([]store.InsertParams, 6)
	for i := range ps {
		ps[i] = store.InsertParams{Tenant: "t1", Kind: "a", Queue: "q", FairnessKey: "f"}
	}
	ids := insertJobs(t, st, ps...)
	// Another claim spends a token now.
	if got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1}); len(got.Jobs) != 1 {
		t.Fatalf("the first claim took %d", len(got.Jobs))
	}
	type bucket struct {
		Tokens float64
		At     time.Time
	}
	read := func() bucket {
		var b bucket
		if err := st.Pool().QueryRow(ctx, `SELECT tokens, refilled_at FROM gaffer.limit_buckets WHERE limit_name = 'by-rate'`).Scan(&b.Tokens, &b.At); err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := read()
	if before.Tokens != 4 {
		t.Fatalf("the bucket holds %v tokens after one start of a burst of 5", before.Tokens)
	}
	// A claim whose instant is a second before that spend weighs the rest.
	var admitted []int64
	if err := st.Pool().QueryRow(ctx, `
		SELECT coalesce(a.admitted, '{}') FROM gaffer.limit_admit('q', $1, $2, $3, $4, 10, '{}', '{}', '{}', $5) a`,
		ids[1:], []string{"t1", "t1", "t1", "t1", "t1"}, []string{"a", "a", "a", "a", "a"}, []string{"f", "f", "f", "f", "f"},
		before.At.Add(-time.Second)).Scan(&admitted); err != nil {
		t.Fatal(err)
	}
	if len(admitted) != 0 {
		t.Fatalf("a claim earlier than the bucket's last spend was admitted %v", admitted)
	}
	if after := read(); after != before {
		t.Fatalf("the bucket went from %+v to %+v", before, after)
	}
}

// A claim says when a limit refused jobs it weighed (Claimed.Limited),
// so that a short claim's caller knows due jobs may be left for the next
// slot: its trickle cooldown must not hold those back. Not said by a
// claim no limit cut, though the default http limit exists; nor by the
// next claim (the signal is the claim's transaction's only).
func TestClaimSaysWhenALimitRefused(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	setLimit(t, st, store.LimitRow{Name: "solo-one", Queue: "solo", Concurrency: 1})
	insertJobs(t, st, store.InsertParams{Kind: "k", Queue: "solo"}, store.InsertParams{Kind: "k", Queue: "solo"},
		store.InsertParams{Kind: "k", Queue: "free"}, store.InsertParams{Kind: "k", Queue: "free"})
	if got := claim(t, st, store.ClaimParams{Queue: "solo", Limit: 10}); len(got.Jobs) != 1 || !got.Limited {
		t.Fatalf("limit of 1 over 2 due jobs: claimed %d, limited %v; want 1, true", len(got.Jobs), got.Limited)
	}
	if got := claim(t, st, store.ClaimParams{Queue: "free", Limit: 10}); len(got.Jobs) != 2 || got.Limited {
		t.Fatalf("no limit on the queue: claimed %d, limited %v; want 2, false", len(got.Jobs), got.Limited)
	}
	if got := claim(t, st, store.ClaimParams{Queue: "solo", Limit: 10}); len(got.Jobs) != 0 || !got.Limited {
		t.Fatalf("the limit full: claimed %d, limited %v; want 0, true", len(got.Jobs), got.Limited)
	}
	if got := claim(t, st, store.ClaimParams{Queue: "free", Limit: 10}); len(got.Jobs) != 0 || got.Limited {
		t.Fatalf("nothing due, after a limited claim: claimed %d, limited %v; want 0, false", len(got.Jobs), got.Limited)
	}
}
