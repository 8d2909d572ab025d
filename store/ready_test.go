package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// slotPages returns the heap pages of each ready slot.
func slotPages(t *testing.T, st *store.Store) [3]int64 {
	t.Helper()
	var p [3]int64
	if err := st.Pool().QueryRow(context.Background(), `
		SELECT pg_relation_size('gaffer.ready_0') / 8192, pg_relation_size('gaffer.ready_1') / 8192, pg_relation_size('gaffer.ready_2') / 8192`).
		Scan(&p[0], &p[1], &p[2]); err != nil {
		t.Fatal(err)
	}
	return p
}

func turn(t *testing.T, st *store.Store, moveMax int, wait time.Duration) store.ReadyTurn {
	t.Helper()
	r, err := st.TurnReadyRing(context.Background(), moveMax, wait)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// While a REPEATABLE READ transaction holds the horizon, no vacuum can
// remove the ready rows claims deleted; the ring's turns empty their
// slots all the same, and move the rows still live, which stay
// claimable.
func TestReadyRingEmptiesTakenRowsUnderAHeldSnapshot(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	holder, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT txid_current(), count(*) FROM gaffer.jobs`); err != nil {
		t.Fatal(err)
	}

	ps := make([]store.InsertParams, 3001)
	for i := range ps {
		ps[i] = store.InsertParams{Tenant: "t", Kind: "k", Queue: "q"}
	}
	insertJobs(t, st, ps...)
	for range 3 {
		if got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 1000}); len(got.Jobs) != 1000 {
			t.Fatalf("claimed %d, want 1000", len(got.Jobs))
		}
	}
	before := slotPages(t, st)
	if before[0]+before[1]+before[2] == 0 {
		t.Fatal("the ready slots hold no pages after 3,000 jobs came and were taken: nothing to empty")
	}
	for i := range 3 {
		if r := turn(t, st, 5000, time.Second); !r.Turned || r.Moved > 1 {
			t.Fatalf("turn %d: %+v, want a turn that moved at most the one live row", i+1, r)
		}
	}
	after := slotPages(t, st)
	if after[0]+after[1]+after[2] > 1 {
		t.Fatalf("slot pages after three turns under a held snapshot: %v (before %v), want the one live row's page at most", after, before)
	}
	got := claim(t, st, store.ClaimParams{Queue: "q", Limit: 10})
	if len(got.Jobs) != 1 {
		t.Fatalf("after the turns the last job is claimed %d times, want once", len(got.Jobs))
	}
	t.Logf("slot pages %v before the turns, %v after", before, after)
}

// A slot holding more rows than a turn may move (a backlog) stays as it
// is, and the ring waits; a session holding a lock on the slot makes the
// turn give up after its wait, changing nothing; once it lets go, the
// turn moves the rows, and every job is still claimed once.
func TestReadyRingLeavesABacklogAndWaitsNoLongerThanItSays(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	ps := make([]store.InsertParams, 20)
	for i := range ps {
		ps[i] = store.InsertParams{Tenant: "t", Kind: "k", Queue: "q"}
	}
	insertJobs(t, st, ps...)
	// The rows are in slot 0; the two empty slots go first.
	for i := range 2 {
		if r := turn(t, st, 5, time.Second); !r.Turned || r.Moved != 0 {
			t.Fatalf("turn %d: %+v, want an empty slot's turn", i+1, r)
		}
	}
	if r := turn(t, st, 5, time.Second); r.Turned || r.Why != "full" {
		t.Fatalf("a turn that may move 5 rows of a slot with 20: %+v, want full", r)
	}

	reader, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(ctx)
	if _, err := reader.Exec(ctx, `SELECT count(*) FROM gaffer.ready_0`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := turn(t, st, 5000, 100*time.Millisecond)
	took := time.Since(start)
	if r.Turned || r.Why != "locked" {
		t.Fatalf("a turn while a session holds the slot: %+v, want locked", r)
	}
	if took < 100*time.Millisecond || took > 2*time.Second {
		t.Fatalf("the turn gave up after %v, want its 100ms wait", took)
	}
	if err := reader.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := turn(t, st, 5000, time.Second); !r.Turned || r.Moved != 20 {
		t.Fatalf("the turn after the reader let go: %+v, want 20 rows moved", r)
	}
	seen := map[int64]bool{}
	for range 3 {
		for _, j := range claim(t, st, store.ClaimParams{Queue: "q", Limit: 8}).Jobs {
			if seen[j.ID] {
				t.Fatalf("job %d claimed twice", j.ID)
			}
			seen[j.ID] = true
		}
	}
	if len(seen) != 20 {
		t.Fatalf("claimed %d jobs after the turns, want 20", len(seen))
	}
}

// A turn counts and moves what committed while it waited for the slot's
// lock, which only READ COMMITTED's per-statement snapshots show: under
// a transaction snapshot taken before the lock it could truncate a row
// it never saw. It refuses to run under one.
func TestReadyRingTurnsOnlyInReadCommitted(t *testing.T) {
	t.Parallel()
	st := pgtest.NewStore(t)
	ctx := context.Background()
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `SELECT * FROM gaffer.ready_rotate(5000, 50)`)
	if err == nil || !strings.Contains(err.Error(), "READ COMMITTED") {
		t.Fatalf("a turn under REPEATABLE READ: %v, want it refused", err)
	}
	// The store's turn sets its own isolation, whatever the database's
	// default: on a pool whose sessions default to REPEATABLE READ.
	if _, err := st.Pool().Exec(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = %L', current_database(), 'repeatable read'); END $$`); err != nil {
		t.Fatal(err)
	}
	rr, err := pgxpool.New(ctx, st.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	var iso string
	if err := rr.QueryRow(ctx, `SELECT current_setting('default_transaction_isolation')`).Scan(&iso); err != nil || iso != "repeatable read" {
		t.Fatalf("the new pool's default isolation: %q, %v", iso, err)
	}
	if r, err := store.New(rr).TurnReadyRing(ctx, 5000, time.Second); err != nil || !r.Turned {
		t.Fatalf("the store's turn on a REPEATABLE READ pool: %+v, %v", r, err)
	}
}
