package store_test

import (
	"context"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/store/internal/catalog"
)

// Reverting each migration gives back the schema as it was before the
// migration: the catalog (tables, columns, constraints, indexes, routines
// byte for byte, triggers, seed rows) after its down file equals the
// catalog before its up file. Red when a down file leaves out a DROP, an
// index or a function's earlier body (TestMigrateDownCheckHasTeeth).
func TestMigrateDownRestoresTheCatalog(t *testing.T) {
	t.Parallel()
	diffs := revertDiffs(t, store.MigrationFiles())
	for _, v := range sortedVersions(diffs) {
		t.Errorf("reverting migration %04d does not give back the schema before it (- before its up, + after its down):\n%s", v, diffs[v])
	}
}

// The check above goes red at the migration whose down file lost a line:
// a DROP FUNCTION (0010), a DROP INDEX (0009), the CREATE OR REPLACE that
// restores a function's earlier body (0007).
func TestMigrateDownCheckHasTeeth(t *testing.T) {
	t.Parallel()
	fsys := migrationsUpTo(t, store.MigrationFiles(), 10)
	cut := func(file, from, to string) {
		t.Helper()
		src := string(fsys[file].Data)
		i := strings.Index(src, from)
		j := strings.Index(src[max(i, 0):], to)
		if i < 0 || j < 0 {
			t.Fatalf("%s holds no %q … %q", file, from, to)
		}
		fsys[file] = &fstest.MapFile{Data: []byte(src[:i] + src[i+j+len(to):])}
	}
	cut("0010_workflow_replay.down.sql", "DROP FUNCTION gaffer.workflow_count_deps", ";\n")
	cut("0009_dashboard.down.sql", "DROP INDEX gaffer.jobs_cancelled_idx", ";\n")
	cut("0007_step_clock.down.sql", "CREATE OR REPLACE FUNCTION gaffer.workflow_start_ready", "$$;\n")
	want := map[int]string{
		10: "function gaffer.workflow_count_deps(bigint, text)",
		9:  "index gaffer.jobs_cancelled_idx",
		7:  "function gaffer.workflow_start_ready(bigint)",
	}
	diffs := revertDiffs(t, fsys)
	for v, object := range want {
		if !strings.Contains(diffs[v], object) {
			t.Errorf("reverting %04d with a line cut from its down file: the difference does not name %s:\n%s", v, object, diffs[v])
		}
	}
	for v, d := range diffs {
		if want[v] == "" {
			t.Errorf("reverting %04d, whose down file is whole, differs:\n%s", v, d)
		}
	}
}

// revertDiffs applies the migrations of fsys to an empty database one at
// a time, taking a catalog snapshot before the first and after each, then
// reverts them one at a time from the latest, and returns for each
// version whose revert does not give back the snapshot taken before it
// the difference. After such a revert the check goes on from a database
// built up to the version before it, so that each difference is the
// revert's own.
func revertDiffs(t *testing.T, fsys fs.FS) map[int]string {
	t.Helper()
	ctx := context.Background()
	pool := emptyPool(t)
	latest := len(migrationNames(t, fsys))
	before := []catalog.Catalog{snapshot(t, pool)} // before[v]: after migration v
	for v := 1; v <= latest; v++ {
		if _, err := migrator(t, pool, migrationsUpTo(t, fsys, v)).Up(ctx); err != nil {
			t.Fatal(err)
		}
		before = append(before, snapshot(t, pool))
	}
	diffs := map[int]string{}
	for v := latest; v >= 1; v-- {
		if _, err := migrator(t, pool, migrationsUpTo(t, fsys, v)).Down(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if d := catalog.Diff(before[v-1], snapshot(t, pool)); d != "" {
			diffs[v] = d
			pool = emptyPool(t)
			if _, err := migrator(t, pool, migrationsUpTo(t, fsys, v-1)).Up(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return diffs
}

// migrationNames returns the names (NNNN_name) of the migrations in fsys.
func migrationNames(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	ups, err := fs.Glob(fsys, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for i, up := range ups {
		ups[i] = strings.TrimSuffix(up, ".up.sql")
	}
	return ups
}

// migrationsUpTo returns the files of fsys's migrations 1 to v.
func migrationsUpTo(t *testing.T, fsys fs.FS, v int) fstest.MapFS {
	t.Helper()
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil || n > v {
			continue
		}
		data, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = &fstest.MapFile{Data: data}
	}
	return out
}

func sortedVersions(m map[int]string) []int {
	var vs []int
	for v := range m {
		vs = append(vs, v)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(vs)))
	return vs
}

// Reverting cron_status keeps one-shot entries, paused (the older schema
// needs a cursor and cannot fire "@at"), a done one at the instant it was
// done; up again, they are there.
func TestMigrateDownCronStatusKeepsOneShotEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	_, err := st.Pool().Exec(ctx, `
		INSERT INTO gaffer.cron_entries (tenant, name, schedule, job, next_run_at, done_at) VALUES
		  ('default', 'done', '@at 2020-01-01T00:00:00Z', '{}', NULL, now()),
		  ('default', 'pending', '@at 2030-01-01T00:00:00Z', '{}', '2030-01-01T00:00:00Z', NULL),
		  ('default', 'daily', '@daily', '{}', now() + interval '1 day', NULL);
		UPDATE gaffer.cron_entries SET last_error = 'x', consecutive_failures = 2, retry_at = now() WHERE name = 'daily'`)
	if err != nil {
		t.Fatal(err)
	}
	// Down to just before cron_status, whatever number it has by now.
	statuses, err := st.MigrationStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, m := range statuses {
		if m.Name == "cron_status" {
			steps = store.LatestVersion() - m.Version + 1
		}
	}
	if steps == 0 {
		t.Fatal("no cron_status migration")
	}
	if _, err := st.MigrateDown(ctx, steps); err != nil {
		t.Fatal(err)
	}
	var paused, total int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE paused AND schedule LIKE '@at%'), count(*) FROM gaffer.cron_entries WHERE next_run_at IS NOT NULL`).Scan(&paused, &total); err != nil {
		t.Fatal(err)
	}
	if paused != 2 || total != 3 {
		t.Fatalf("after down: %d paused one-shots of %d entries with a cursor; want 2 of 3", paused, total)
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
}

// A migration keeps every routine the schema before it had: it may give
// one a new body (CREATE OR REPLACE keeps the routine's identity) but not
// drop it, nor drop and create it again. A node of the previous release
// is inside a claim while its database is migrated (a rolling upgrade);
// a statement of that claim that found a routine before the migration
// committed and calls it after fails with "cache lookup failed for
// function" if the routine was dropped. Routines no release calls any
// more stay, giving nothing (store/schema/retired.sql), until the release
// after. The migrations listed here broke the rule before it was checked;
// they are applied history, not to be edited.
func TestMigrationsKeepEveryRoutine(t *testing.T) {
	t.Parallel()
	broke := map[int]bool{}
	for _, v := range migrationsDroppingRoutines(t, store.MigrationFiles()) {
		broke[v] = true
	}
	before := map[int]bool{24: true}
	for v := range broke {
		if !before[v] {
			t.Errorf("migration %04d drops a routine the schema before it had (or drops and creates it again); "+
				"keep it (CREATE OR REPLACE, or a body that gives nothing in store/schema/retired.sql)", v)
		}
	}
}

// migrationsDroppingRoutines applies the migrations of fsys one at a time
// and returns the versions after which a routine of the gaffer schema
// that was there before is gone (by its oid).
func migrationsDroppingRoutines(t *testing.T, fsys fs.FS) []int {
	t.Helper()
	ctx := context.Background()
	pool := emptyPool(t)
	routines := func() map[uint32]string {
		rows, err := pool.Query(ctx, `SELECT p.oid::int8, p.oid::regprocedure::text FROM pg_proc p
			WHERE p.pronamespace = 'gaffer'::regnamespace`)
		if err != nil {
			if strings.Contains(err.Error(), "gaffer") {
				return nil // no schema yet
			}
			t.Fatal(err)
		}
		out := map[uint32]string{}
		for rows.Next() {
			var oid int64
			var sig string
			if err := rows.Scan(&oid, &sig); err != nil {
				t.Fatal(err)
			}
			out[uint32(oid)] = sig
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var out []int
	last := routines()
	for v := 1; v <= len(migrationNames(t, fsys)); v++ {
		if _, err := migrator(t, pool, migrationsUpTo(t, fsys, v)).Up(ctx); err != nil {
			t.Fatal(err)
		}
		now := routines()
		for oid, sig := range last {
			if _, ok := now[oid]; !ok {
				t.Logf("migration %04d drops %s", v, sig)
				out = append(out, v)
				break
			}
		}
		last = now
	}
	return out
}
