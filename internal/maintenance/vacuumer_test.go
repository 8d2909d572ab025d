package maintenance_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// vacuumEnv is a test's own database with autovacuum off for gaffer.jobs,
// so that every vacuum of it is the vacuumer's, and a vacuumer on a fake
// clock: runVacuumer moves it past any rest, so that only dead rows and
// the horizon decide.
func vacuumEnv(t *testing.T, threshold int64) (*env, *maintenance.Vacuumer) {
	t.Helper()
	e := newEnv(t)
	e.exec(`ALTER TABLE gaffer.jobs SET (autovacuum_enabled = false)`)
	v, err := maintenance.NewVacuumer(maintenance.VacuumerConfig{Pool: e.st.Pool(), Logger: testLogger(t), Threshold: threshold})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	v.SetClock(clk)
	vacuumClocks.Store(v, clk)
	return e, v
}

// vacuumClocks holds each vacuumEnv vacuumer's fake clock.
var vacuumClocks sync.Map

// makeDeadRows inserts n jobs and deletes them, leaving n dead row
// versions, and waits until the server's statistics count them.
func (e *env) makeDeadRows(n int) {
	e.t.Helper()
	ctx := context.Background()
	before := e.deadRows()
	conn, err := e.st.Pool().Acquire(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Release()
	for _, sql := range []string{
		fmt.Sprintf(`INSERT INTO gaffer.jobs (kind) SELECT 'vacuum-test' FROM generate_series(1, %d)`, n),
		`DELETE FROM gaffer.jobs WHERE kind = 'vacuum-test'`,
		// The session reports its counts when it next goes idle: now.
		`SELECT pg_stat_force_next_flush()`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			e.t.Fatalf("%s: %v", sql, err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); e.deadRows() < before+int64(n); {
		if time.Now().After(deadline) {
			e.t.Fatalf("the statistics count %d dead rows, want at least %d", e.deadRows(), before+int64(n))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) deadRows() int64 {
	e.t.Helper()
	n, err := e.st.JobsDeadRows(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) vacuums() int64 {
	e.t.Helper()
	var n int64
	if err := e.st.Pool().QueryRow(context.Background(),
		`SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'gaffer.jobs'::regclass`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func runVacuumer(t *testing.T, v *maintenance.Vacuumer, want bool) {
	t.Helper()
	if clk, ok := vacuumClocks.Load(v); ok {
		clk.(*clock.Fake).Advance(time.Hour)
	}
	got, err := v.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("RunOnce vacuumed: %v, want %v\n%s", got, want, v.Explain())
	}
}

// The vacuumer vacuums gaffer.jobs once its dead rows reach the threshold,
// not before, and not again until as many more have died.
func TestVacuumerVacuumsWhenDeadRowsGather(t *testing.T) {
	t.Parallel()
	e, v := vacuumEnv(t, 1000)
	e.makeDeadRows(600)
	runVacuumer(t, v, false)
	if n := e.vacuums(); n != 0 {
		t.Fatalf("%d vacuums below the threshold", n)
	}
	e.makeDeadRows(600)
	runVacuumer(t, v, true)
	if n := e.vacuums(); n != 1 {
		t.Fatalf("%d vacuums counted, want 1", n)
	}
	if n := e.deadRows(); n >= 600 {
		t.Fatalf("%d dead rows left after the vacuum", n)
	}
	runVacuumer(t, v, false)
	e.makeDeadRows(1000)
	runVacuumer(t, v, true)
	if n := e.vacuums(); n != 2 {
		t.Fatalf("%d vacuums counted, want 2", n)
	}
}

// While a transaction holds the horizon, a vacuum removes nothing that
// died after it began: the vacuumer does not run another until the
// horizon moves, and then runs at once.
func TestVacuumerWaitsForAHeldHorizon(t *testing.T) {
	t.Parallel()
	e, v := vacuumEnv(t, 1000)
	ctx := context.Background()
	holder, err := e.st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	tx, err := holder.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}

	e.makeDeadRows(1200)
	runVacuumer(t, v, true) // the first: nothing says it would be in vain
	if n := e.deadRows(); n < 1200 {
		t.Fatalf("%d dead rows left under a held snapshot, want all 1200: the test holds nothing", n)
	}
	e.makeDeadRows(1200)
	runVacuumer(t, v, false)
	if n := e.vacuums(); n != 1 {
		t.Fatalf("%d vacuums while the horizon stood still, want 1", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	runVacuumer(t, v, true)
	if n := e.deadRows(); n >= 1200 {
		t.Fatalf("%d dead rows left once the horizon moved", n)
	}
}

// A role that does not own gaffer.jobs may not vacuum it (PostgreSQL
// skips the table with a warning): the vacuumer asks first.
func TestMayVacuumJobsOnlyAsTheOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	owner, err := store.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if ok, err := owner.MayVacuumJobs(ctx); err != nil || !ok {
		t.Fatalf("the owner may vacuum: %v, %v", ok, err)
	}
	role := fmt.Sprintf("gaffer_not_owner_%d", time.Now().UnixNano())
	if _, err := owner.Pool().Exec(ctx, `CREATE ROLE `+role+` NOLOGIN`); err != nil {
		t.Skipf("cannot create a role here: %v", err)
	}
	defer owner.Pool().Exec(context.Background(), `DROP OWNED BY `+role+`; DROP ROLE `+role)
	if _, err := owner.Pool().Exec(ctx, `GRANT USAGE ON SCHEMA gaffer TO `+role); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SET ROLE `+role)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	other := store.New(pool)
	ok, err := other.MayVacuumJobs(ctx)
	if err != nil || ok {
		t.Fatalf("a role that does not own gaffer.jobs may vacuum it: %v, %v", ok, err)
	}
}

// A vacuum that someone waits for (DDL wanting the table) steps aside, as
// autovacuum does: the waiter gets the table within the vacuum's watch,
// not when the vacuum ends — claims would queue behind the waiter till
// then.
func TestVacuumerStepsAsideForALockWaiter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	setup, err := store.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	e := &env{t: t, st: setup}
	e.exec(`ALTER TABLE gaffer.jobs SET (autovacuum_enabled = false)`)
	// Make this database's vacuums crawl: a sleep after every page. Only
	// sessions opened from now on have it.
	var db string
	if err := setup.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	e.exec(`ALTER DATABASE ` + db + ` SET vacuum_cost_delay = '100ms'`)
	e.exec(`ALTER DATABASE ` + db + ` SET vacuum_cost_limit = 1`)
	slow, err := store.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	v, err := maintenance.NewVacuumer(maintenance.VacuumerConfig{Pool: slow.Pool(), Logger: testLogger(t), Threshold: 1000})
	if err != nil {
		t.Fatal(err)
	}
	e.makeDeadRows(3000)

	type result struct {
		vacuumed bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		vacuumed, err := v.RunOnce(ctx)
		done <- result{vacuumed, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		// (This database's: the view shows every database's vacuums, and
		// the other tests' gaffer.jobs, cloned from one template, have
		// the same oid.)
		if err := setup.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_progress_vacuum
			WHERE relid = 'gaffer.jobs'::regclass AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the vacuum did not start")
		}
	}
	start := time.Now()
	err = pgx.BeginFunc(ctx, setup.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `LOCK TABLE gaffer.jobs IN ACCESS EXCLUSIVE MODE`)
		return err
	})
	waited := time.Since(start)
	if err != nil {
		t.Fatalf("the table's lock, after %s: %v", waited.Round(time.Millisecond), err)
	}
	if waited > 2*time.Second {
		t.Fatalf("waited %s for the table's lock behind the vacuum", waited.Round(time.Millisecond))
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("RunOnce: %v", r.err)
	}
	if r.vacuumed {
		// The vacuum ended on its own while the cancel was on its way
		// (under load, 1 run in 5 of the package under -race): the
		// waiter still had the table within the bound above, which is
		// what this test holds it to.
		t.Log("the vacuum ended before it could step aside")
	}
	// The connection that was cancelled is not reused; the pool still
	// works, and the next vacuum (after its rest) finishes.
	time.Sleep(1100 * time.Millisecond)
	e.exec(`ALTER DATABASE ` + db + ` RESET vacuum_cost_delay`)
	slow.Pool().Reset()
	runVacuumer(t, v, true)
}
