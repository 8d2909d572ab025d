package store_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// migrations builds a migration set from name → text pairs.
func migrations(files ...string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for i := 0; i+1 < len(files); i += 2 {
		fsys[files[i]] = &fstest.MapFile{Data: []byte(files[i+1])}
	}
	return fsys
}

func migrator(t *testing.T, pool *pgxpool.Pool, fsys fstest.MapFS) *store.Migrator {
	t.Helper()
	m, err := store.NewMigrator(pool, fsys)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func emptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func scalarInt(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

const (
	thingsUp   = "CREATE TABLE gaffer.things (v integer);\n"
	thingsDown = "DROP TABLE gaffer.things;\n"
)

// An applied migration whose up file changed is refused before anything
// runs, with an error naming it; so is a different migration under an
// applied version. Editing a down file is allowed. Red without the
// checksum comparison in Migrator.verify: the edited set applies 0002.
func TestEditedMigrationIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	if _, err := migrator(t, pool, migrations("0001_things.up.sql", thingsUp, "0001_things.down.sql", thingsDown)).Up(ctx); err != nil {
		t.Fatal(err)
	}
	more := []string{"0002_more.up.sql", "CREATE TABLE gaffer.more (v integer);\n", "0002_more.down.sql", "DROP TABLE gaffer.more;\n"}
	for _, c := range []struct {
		name  string
		files []string
		want  string
	}{
		{"edited", []string{"0001_things.up.sql", "CREATE TABLE gaffer.things (v bigint);\n", "0001_things.down.sql", thingsDown},
			"migration 0001_things changed after it was applied"},
		{"renamed", []string{"0001_stuff.up.sql", thingsUp, "0001_stuff.down.sql", thingsDown},
			"the database has 0001_things applied where this gaffer has 0001_stuff"},
	} {
		done, err := migrator(t, pool, migrations(append(c.files, more...)...)).Up(ctx)
		if !errors.Is(err, store.ErrMigrationEdited) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: up = %v, %v; want ErrMigrationEdited saying %q", c.name, done, err, c.want)
		}
		if n := scalarInt(t, pool, `SELECT count(*) FROM gaffer.schema_migrations`); n != 1 {
			t.Errorf("%s: %d migrations applied after the refusal, want 1", c.name, n)
		}
	}
	// A fixed down file is no edit of what was applied.
	fixedDown := migrations("0001_things.up.sql", thingsUp, "0001_things.down.sql", "DROP TABLE IF EXISTS gaffer.things;\n")
	if _, err := migrator(t, pool, fixedDown).Down(ctx, 1); err != nil {
		t.Fatalf("down with an edited down file: %v", err)
	}
}

// A database migrated before checksums existed has no checksum column:
// the first run adds it and records this binary's checksums, and from
// then on an edit is refused. Red without the backfill: the rows stay
// without checksums and the edit goes unnoticed.
func TestChecksumsBackfilledOnFirstRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `ALTER TABLE gaffer.schema_migrations DROP COLUMN IF EXISTS checksum`); err != nil {
		t.Fatal(err)
	}
	if done, err := st.MigrateUp(ctx); err != nil || len(done) != 0 {
		t.Fatalf("up on a migrated database without checksums: %v, %v", done, err)
	}
	if n := scalarInt(t, pool, `SELECT count(*) FROM gaffer.schema_migrations WHERE checksum IS NULL`); n != 0 {
		t.Fatalf("%d migrations without a checksum after up", n)
	}
	// Gaffer's own files, the first one's up edited.
	fsys := fstest.MapFS{}
	files := store.MigrationFiles()
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := fs.ReadFile(files, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "0001_jobs.up.sql" {
			data = append(data, "\n-- edited\n"...)
		}
		fsys[e.Name()] = &fstest.MapFile{Data: data}
	}
	if _, err := migrator(t, pool, fsys).Up(ctx); !errors.Is(err, store.ErrMigrationEdited) || !strings.Contains(err.Error(), "0001_jobs") {
		t.Fatalf("up with 0001_jobs edited after the backfill: %v; want ErrMigrationEdited naming 0001_jobs", err)
	}
}

// A CREATE INDEX CONCURRENTLY that fails leaves an INVALID index behind.
// The next run drops it and builds it again, instead of being wedged by
// it (without IF NOT EXISTS: "already exists") or, worse, skipping it and
// recording the migration with an index that is never used (IF NOT
// EXISTS). Red without dropInvalidIndex: the index stays invalid.
func TestInvalidIndexFromFailedConcurrentBuildIsRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	m := migrator(t, pool, migrations(
		"0001_things.up.sql", thingsUp+"INSERT INTO gaffer.things VALUES (1), (1), (2);\n",
		"0001_things.down.sql", thingsDown,
		"0002_things_unique.up.sql", "-- gaffer:no-transaction\n-- One row per value.\nCREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS things_v_idx\n    ON gaffer.things (v);\n",
		"0002_things_unique.down.sql", "-- gaffer:no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS gaffer.things_v_idx;\n",
	))
	done, err := m.Up(ctx)
	if err == nil || !strings.Contains(err.Error(), "migration 0002_things_unique up") {
		t.Fatalf("up over a duplicate: %v; want the unique index build to fail, naming 0002", err)
	}
	if len(done) != 1 || scalarInt(t, pool, `SELECT max(version) FROM gaffer.schema_migrations`) != 1 {
		t.Fatalf("applied %v; want 0001 landed and 0002 not recorded", done)
	}
	valid := `SELECT count(*) FROM pg_index WHERE indexrelid = 'gaffer.things_v_idx'::regclass AND indisvalid`
	if n := scalarInt(t, pool, `SELECT count(*) FROM pg_class WHERE relname = 'things_v_idx'`); n != 1 || scalarInt(t, pool, valid) != 0 {
		t.Fatal("the failed concurrent build left no invalid index: the test proves nothing")
	}
	// The operator fixes the data and runs migrate up again.
	if _, err := pool.Exec(ctx, `DELETE FROM gaffer.things WHERE ctid = (SELECT min(ctid) FROM gaffer.things WHERE v = 1)`); err != nil {
		t.Fatal(err)
	}
	if done, err := m.Up(ctx); err != nil || len(done) != 1 || done[0] != 2 {
		t.Fatalf("up again: %v, %v; want 0002 applied", done, err)
	}
	if scalarInt(t, pool, valid) != 1 {
		t.Fatal("0002 is recorded as applied but its index is still INVALID")
	}
	if _, err := pool.Exec(ctx, `INSERT INTO gaffer.things VALUES (2)`); err == nil {
		t.Fatal("the rebuilt unique index does not hold")
	}
	// Its down runs outside a transaction too (DROP INDEX CONCURRENTLY).
	if _, err := m.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// The advisory lock serialises concurrent runs across no-transaction
// migrations too: each statement of one runs once, however many nodes
// run migrate up at the same moment. Red without pg_advisory_lock: the
// runs race past the version check and the statements run several times
// (or the second record fails on the primary key).
func TestConcurrentMigrateUpAcrossNoTransactionMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	fsys := migrations(
		"0001_runs.up.sql", "CREATE TABLE gaffer.runs (at timestamptz);\n",
		"0001_runs.down.sql", "DROP TABLE gaffer.runs;\n",
		"0002_count.up.sql", "-- gaffer:no-transaction\nINSERT INTO gaffer.runs SELECT now() FROM pg_sleep(0.2);\nINSERT INTO gaffer.runs VALUES (now());\n",
		"0002_count.down.sql", "-- gaffer:no-transaction\nDELETE FROM gaffer.runs;\n",
		"0003_after.up.sql", "ALTER TABLE gaffer.runs ADD COLUMN n integer;\n",
		"0003_after.down.sql", "ALTER TABLE gaffer.runs DROP COLUMN n;\n",
	)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := migrator(t, pool, fsys).Up(ctx)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := scalarInt(t, pool, `SELECT count(*) FROM gaffer.runs`); n != 2 {
		t.Fatalf("the no-transaction migration's two statements ran %d times in all, want 2", n)
	}
}

// Migration files are checked when loaded: a mistake is found before any
// database is touched, with an error naming the file.
func TestMigrationFilesAreChecked(t *testing.T) {
	t.Parallel()
	up := func(body string) fstest.MapFS {
		return migrations("0001_x.up.sql", body, "0001_x.down.sql", "SELECT 1;\n")
	}
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{"concurrently in a transaction", up("CREATE INDEX CONCURRENTLY IF NOT EXISTS a ON gaffer.t (v);\n"), "0001_x.up.sql: CONCURRENTLY cannot run in a transaction"},
		{"not safe to repeat", up("-- gaffer:no-transaction\nCREATE INDEX CONCURRENTLY a ON gaffer.t (v);\n"), "CREATE INDEX CONCURRENTLY IF NOT EXISTS a"},
		{"dollar quotes", up("-- gaffer:no-transaction\nDO $$ BEGIN PERFORM 1; END $$;\n"), "no dollar-quoted text"},
		{"no statements", up("-- gaffer:no-transaction\n-- nothing\n"), "no statements"},
		{"no down", migrations("0001_x.up.sql", "SELECT 1;\n"), "0001_x needs both up and down"},
		{"gap", migrations("0002_x.up.sql", "SELECT 1;\n", "0002_x.down.sql", "SELECT 1;\n"), "found 0002 at position 1"},
		{"unknown header", up("-- gaffer:expnad\nSELECT 1;\n"), `unknown header line "-- gaffer:expnad"`},
		{"both declarations", up("-- gaffer:expand\n-- gaffer:compatible-from 1\nSELECT 1;\n"), "exclude each other"},
		{"compatible from the future", up("-- gaffer:compatible-from 2\nSELECT 1;\n"), "names a version after its own"},
		{"compatible from nothing", up("-- gaffer:compatible-from x\nSELECT 1;\n"), "needs a schema version"},
		{"declaration in a down file", migrations("0001_x.up.sql", "SELECT 1;\n", "0001_x.down.sql", "-- gaffer:expand\nSELECT 1;\n"), "belong in the up file"},
	} {
		if _, err := store.NewMigrator(nil, c.fsys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error saying %q", c.name, err, c.want)
		}
	}
	// A generated migration says so in both files, beside its declaration.
	if _, err := store.NewMigrator(nil, migrations("0001_x.up.sql", "-- gaffer:generated\n-- gaffer:expand\nSELECT 1;\n",
		"0001_x.down.sql", "-- gaffer:generated\nSELECT 1;\n")); err != nil {
		t.Errorf("a generated migration: %v", err)
	}
	// A comment may say CONCURRENTLY in a transactional file.
	if _, err := store.NewMigrator(nil, up("-- not CONCURRENTLY: the table is new\nCREATE INDEX a ON gaffer.t (v);\n")); err != nil {
		t.Errorf("a comment mentioning CONCURRENTLY: %v", err)
	}
}

// A schema ahead of a binary is one it works on only when every migration
// it does not carry was declared compatible with it: an expand (-- gaffer:
// expand), or a contract that names an old enough version (-- gaffer:
// compatible-from N). Otherwise node start (CheckSchema) and migrate up
// refuse it with ErrSchemaAhead, naming the migration and the command
// that reverts it; migrate down by the older binary refuses any schema
// ahead of it. Red without the compatibility check (aheadError): the
// older binary accepts the contracts.
func TestSchemaAheadNeedsDeclaredCompatibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	base := []string{"0001_things.up.sql", thingsUp, "0001_things.down.sql", thingsDown}
	expands := append(append([]string{}, base...),
		"0002_more.up.sql", "-- gaffer:expand\nALTER TABLE gaffer.things ADD COLUMN w integer;\n",
		"0002_more.down.sql", "ALTER TABLE gaffer.things DROP COLUMN w;\n",
		"0003_index.up.sql", "-- gaffer:no-transaction\n-- gaffer:expand\nCREATE INDEX CONCURRENTLY IF NOT EXISTS things_w_idx ON gaffer.things (w);\n",
		"0003_index.down.sql", "-- gaffer:no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS gaffer.things_w_idx;\n")
	contract := append(append([]string{}, expands...),
		"0004_drop_v.up.sql", "ALTER TABLE gaffer.things DROP COLUMN v;\n",
		"0004_drop_v.down.sql", "ALTER TABLE gaffer.things ADD COLUMN v integer;\n")
	later := append(append([]string{}, contract...),
		"0005_tighten.up.sql", "-- gaffer:compatible-from 4\nALTER TABLE gaffer.things ALTER COLUMN w SET DEFAULT 0;\n",
		"0005_tighten.down.sql", "ALTER TABLE gaffer.things ALTER COLUMN w DROP DEFAULT;\n")
	v1 := migrator(t, pool, migrations(base...))
	v3 := migrator(t, pool, migrations(expands...))
	v4 := migrator(t, pool, migrations(contract...))
	v5 := migrator(t, pool, migrations(later...))

	if err := v1.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaBehind) || !strings.Contains(err.Error(), "run `gaffer migrate up`") {
		t.Fatalf("check of an empty database: %v; want ErrSchemaBehind naming `gaffer migrate up`", err)
	}
	if _, err := v3.Up(ctx); err != nil {
		t.Fatal(err)
	}
	// Two expands ahead: the version-1 binary works, and its migrate up
	// (a node that migrates as it starts) is a no-op, not an error.
	if err := v1.CheckSchema(ctx); err != nil {
		t.Fatalf("version-1 binary on a schema two expands ahead: %v, want it accepted", err)
	}
	if done, err := v1.Up(ctx); err != nil || len(done) != 0 {
		t.Fatalf("version-1 migrate up on a schema two expands ahead: %v, %v; want nothing applied, no error", done, err)
	}
	if _, err := v1.Down(ctx, 1); !errors.Is(err, store.ErrSchemaAhead) || !strings.Contains(err.Error(), "the gaffer that applied 0003_index") {
		t.Fatalf("version-1 migrate down on a schema ahead of it: %v; want ErrSchemaAhead naming 0002_more", err)
	}

	if _, err := v4.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *store.Migrator
	}{{"version 1", v1}, {"version 3", v3}} {
		err := c.m.CheckSchema(ctx)
		if !errors.Is(err, store.ErrSchemaAhead) || !strings.Contains(err.Error(), "migration 0004_drop_v is a contract") ||
			!strings.Contains(err.Error(), "`gaffer migrate down --steps 1`") {
			t.Errorf("%s binary on a schema with a contract it does not carry: %v; want ErrSchemaAhead naming 0004_drop_v and `gaffer migrate down --steps 1`", c.name, err)
		}
		if _, err := c.m.Up(ctx); !errors.Is(err, store.ErrSchemaAhead) {
			t.Errorf("%s migrate up on a schema with a contract it does not carry: %v; want ErrSchemaAhead", c.name, err)
		}
	}

	// A contract that names version 4: binaries of 4 work on it, those of
	// 3 are still stopped by 0004 (two steps to revert).
	if _, err := v5.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v4.CheckSchema(ctx); err != nil {
		t.Errorf("version-4 binary on 0005 (compatible from 4): %v, want it accepted", err)
	}
	if err := v3.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaAhead) || !strings.Contains(err.Error(), "0004_drop_v") ||
		!strings.Contains(err.Error(), "--steps 2") {
		t.Errorf("version-3 binary on 0005: %v; want ErrSchemaAhead naming 0004_drop_v, --steps 2", err)
	}

	// Rows recorded without a declaration (a table from before the column)
	// count as contracts.
	if _, err := v5.Down(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE gaffer.schema_migrations DROP COLUMN compatible_from`); err != nil {
		t.Fatal(err)
	}
	if err := v1.CheckSchema(ctx); !errors.Is(err, store.ErrSchemaAhead) || !strings.Contains(err.Error(), "0002_more is a contract") {
		t.Errorf("version-1 binary on undeclared rows ahead of it: %v; want ErrSchemaAhead naming 0002_more", err)
	}
	if _, err := v3.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v1.CheckSchema(ctx); err != nil {
		t.Errorf("after a run of the version-3 binary recorded its declarations: %v, want version 1 accepted", err)
	}
}

// Concurrent runs wait for the migration lock without deadlocking a
// CREATE INDEX CONCURRENTLY the lock's holder runs: that build waits for
// every older transaction, a session blocked in pg_advisory_lock
// included, which waits for the holder in turn. Red with a blocking
// pg_advisory_lock: PostgreSQL breaks the deadlock by failing a run.
func TestConcurrentMigrateUpAcrossConcurrentIndexBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyPool(t)
	fsys := migrations(
		"0001_things.up.sql", thingsUp+"INSERT INTO gaffer.things SELECT g FROM generate_series(1, 20000) g;\n",
		"0001_things.down.sql", thingsDown,
		"0002_things_idx.up.sql", "-- gaffer:no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS things_v_idx ON gaffer.things (v);\n",
		"0002_things_idx.down.sql", "-- gaffer:no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS gaffer.things_v_idx;\n",
	)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := migrator(t, pool, fsys).Up(ctx)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := scalarInt(t, pool, `SELECT count(*) FROM pg_index WHERE indexrelid = 'gaffer.things_v_idx'::regclass AND indisvalid`); n != 1 {
		t.Fatal("the index is not there, valid")
	}
}
