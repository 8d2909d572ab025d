package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/store/internal/catalog"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func emptyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func files(pairs ...string) fstest.MapFS {
	out := fstest.MapFS{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[pairs[i]] = &fstest.MapFile{Data: []byte(pairs[i+1])}
	}
	return out
}

func snapshotOf(t *testing.T, db catalog.DB) catalog.Catalog {
	t.Helper()
	c, err := catalog.Snapshot(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// generateFresh runs Generate on two fresh databases.
func generateFresh(t *testing.T, cfg Config) (Result, error) {
	t.Helper()
	return Generate(context.Background(), cfg, emptyPool(t), emptyPool(t))
}

const (
	thingsTable = "CREATE TABLE gaffer.things (v integer);\n"
	// The routines of migration 0001 below.
	routinesBefore = `
CREATE FUNCTION gaffer.kept() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION gaffer.changed(a integer) RETURNS integer LANGUAGE sql AS $$ SELECT a $$;
CREATE FUNCTION gaffer.renamed_arg(a integer) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION gaffer.retyped() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION gaffer.gone() RETURNS integer LANGUAGE sql AS $$ SELECT gaffer.kept() $$;
CREATE FUNCTION gaffer.stamp() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN NEW.v := 1; RETURN NEW; END $fn$;
CREATE TRIGGER stamp BEFORE INSERT ON gaffer.things FOR EACH ROW EXECUTE FUNCTION gaffer.stamp();
CREATE FUNCTION gaffer.old_hook() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER old_hook AFTER INSERT ON gaffer.things FOR EACH ROW EXECUTE FUNCTION gaffer.old_hook();
`
	// The routines store/schema has: one kept, one with a new body, one
	// whose argument is renamed and one whose result changes (both need
	// DROP and CREATE), one gone, a trigger and its function changed, a
	// trigger and its function gone, and a new function with a new
	// trigger.
	routinesAfter = `
CREATE FUNCTION gaffer.kept() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
-- Now adds one.
CREATE FUNCTION gaffer.changed(a integer) RETURNS integer LANGUAGE sql AS $$ SELECT a + 1 $$;
CREATE FUNCTION gaffer.renamed_arg(b integer) RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION gaffer.retyped() RETURNS bigint LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION gaffer.stamp() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN NEW.v := 2; RETURN NEW; END $fn$;
CREATE TRIGGER stamp BEFORE INSERT OR UPDATE ON gaffer.things FOR EACH ROW EXECUTE FUNCTION gaffer.stamp();
CREATE FUNCTION gaffer.added() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER added AFTER UPDATE ON gaffer.things FOR EACH ROW EXECUTE FUNCTION gaffer.added('x');
`
)

func baseMigrations() fstest.MapFS {
	return files("0001_things.up.sql", thingsTable+routinesBefore, "0001_things.down.sql", "DROP TABLE gaffer.things;\n"+
		"DROP FUNCTION gaffer.kept(), gaffer.changed(integer), gaffer.renamed_arg(integer), gaffer.retyped(), gaffer.gone(), gaffer.stamp(), gaffer.old_hook();\n")
}

func schemaText(routines string) fstest.MapFS {
	return files("tables.sql", "CREATE SCHEMA IF NOT EXISTS gaffer;\n"+thingsTable, "things.sql", routines)
}

// The generator writes the migration of every kind of routine change —
// new, changed, dropped, dropped and created again, triggers with them —
// and what it writes, applied by the migrator to a database of the
// migrations before it, gives store/schema's catalog, and its down file
// gives back the one before.
func TestGenerateRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := Config{Migrations: baseMigrations(), Schema: schemaText(routinesAfter), Name: "things_routines", Expand: true}
	res, err := generateFresh(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != "0002_things_routines" || res.Version != 2 {
		t.Fatalf("migration %s (version %d), want 0002_things_routines", res.Name, res.Version)
	}
	wantChanges := []string{
		"dropped   function gaffer.gone()",
		"dropped   function gaffer.old_hook()",
		"new       function gaffer.added()",
		"changed   function gaffer.changed(integer)",
		"recreated function gaffer.renamed_arg(integer)",
		"recreated function gaffer.retyped()",
		"changed   function gaffer.stamp()",
		"dropped   trigger gaffer.things.old_hook",
		"new       trigger gaffer.things.added",
		"changed   trigger gaffer.things.stamp",
	}
	if !slices.Equal(res.Changes, wantChanges) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(res.Changes, "\n"), strings.Join(wantChanges, "\n"))
	}
	for _, want := range []string{
		store.GeneratedMarker + "\n" + store.ExpandMarker + "\n",
		"SET LOCAL check_function_bodies = off;\n",
		"DROP TRIGGER old_hook ON gaffer.things;\nDROP TRIGGER stamp ON gaffer.things;\n" +
			"DROP FUNCTION gaffer.gone();\nDROP FUNCTION gaffer.old_hook();\nDROP FUNCTION gaffer.renamed_arg(integer);\nDROP FUNCTION gaffer.retyped();\n",
		"-- changed: gaffer.changed(integer), as store/schema/things.sql has it\nCREATE OR REPLACE FUNCTION gaffer.changed(a integer)\n",
		"CREATE TRIGGER added AFTER UPDATE ON gaffer.things FOR EACH ROW EXECUTE FUNCTION gaffer.added('x');\n",
	} {
		if !strings.Contains(res.Up, want) {
			t.Errorf("the up file has no\n%s\nup file:\n%s", want, res.Up)
		}
	}
	for _, want := range []string{
		store.GeneratedMarker + "\n-- Back to the routines 0001_things left",
		"DROP FUNCTION gaffer.added();\n",
		"-- gaffer.gone() as 0001_things left it\nCREATE OR REPLACE FUNCTION gaffer.gone()\n",
	} {
		if !strings.Contains(res.Down, want) {
			t.Errorf("the down file has no\n%s\ndown file:\n%s", want, res.Down)
		}
	}
	if strings.Contains(res.Down, store.ExpandMarker) {
		t.Errorf("the down file declares an expand:\n%s", res.Down)
	}
	if len(res.Warnings) != 4 {
		t.Errorf("an expand that drops two routines and changes two signatures: warnings %q, want 4", res.Warnings)
	}

	// Checked here too, by hand, not only by Generate.
	fromText := emptyPool(t)
	if err := store.LoadSchema(ctx, fromText, cfg.Schema); err != nil {
		t.Fatal(err)
	}
	before := emptyPool(t)
	if _, err := mustMigrator(t, before, cfg.Migrations).Up(ctx); err != nil {
		t.Fatal(err)
	}
	withNew := baseMigrations()
	withNew[res.Name+".up.sql"] = &fstest.MapFile{Data: []byte(res.Up)}
	withNew[res.Name+".down.sql"] = &fstest.MapFile{Data: []byte(res.Down)}
	migrated := emptyPool(t)
	m := mustMigrator(t, migrated, withNew)
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("apply the migrations with the generated one: %v\n%s", err, res.Up)
	}
	if d := catalog.Diff(snapshotOf(t, fromText), snapshotOf(t, migrated)); d != "" {
		t.Errorf("store/schema (-) and the migrations with the generated one (+) differ:\n%s", d)
	}
	if _, err := m.Down(ctx, 1); err != nil {
		t.Fatalf("revert the generated migration: %v\n%s", err, res.Down)
	}
	if d := catalog.Diff(snapshotOf(t, before), snapshotOf(t, migrated)); d != "" {
		t.Errorf("the migrations before (-) and after the generated one's up and down (+) differ:\n%s", d)
	}
}

func mustMigrator(t *testing.T, pool *pgxpool.Pool, fsys fs.FS) *store.Migrator {
	t.Helper()
	m, err := store.NewMigrator(pool, fsys)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Nothing to write when store/schema has the migrations' routines; a
// difference in a table is refused, named, whatever the routines do.
func TestGenerateWritesRoutinesOnly(t *testing.T) {
	t.Parallel()
	if _, err := generateFresh(t, Config{Migrations: baseMigrations(), Schema: schemaText(routinesBefore), Name: "x"}); !errors.Is(err, ErrNoChanges) {
		t.Fatalf("same routines: %v, want ErrNoChanges", err)
	}
	schema := schemaText(routinesAfter)
	schema["tables.sql"] = &fstest.MapFile{Data: []byte("CREATE SCHEMA IF NOT EXISTS gaffer;\nCREATE TABLE gaffer.things (v integer, w text);\n" +
		"CREATE INDEX things_v_idx ON gaffer.things (v);\n")}
	_, err := generateFresh(t, Config{Migrations: baseMigrations(), Schema: schema, Name: "x"})
	var tables *TablesDifferError
	if !errors.As(err, &tables) {
		t.Fatalf("a new column and index: %v, want a *TablesDifferError", err)
	}
	for _, want := range []string{"~ table gaffer.things", "+     w text", "+ index gaffer.things_v_idx"} {
		if !strings.Contains(tables.Diff, want) {
			t.Errorf("the difference does not say %q:\n%s", want, tables.Diff)
		}
	}
	if strings.Contains(tables.Diff, "function") {
		t.Errorf("the difference lists routines:\n%s", tables.Diff)
	}
	if _, err := generateFresh(t, Config{Migrations: baseMigrations(), Schema: schemaText(routinesAfter), Name: "Bad-Name"}); err == nil {
		t.Error("a name that is not snake_case is accepted")
	}
}

// -replace writes the latest migration again when it is generated, from
// the migrations before it; it refuses a hand-written one.
func TestGenerateReplace(t *testing.T) {
	t.Parallel()
	first, err := generateFresh(t, Config{Migrations: baseMigrations(), Schema: schemaText(routinesAfter), Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	migrations := baseMigrations()
	migrations[first.Name+".up.sql"] = &fstest.MapFile{Data: []byte(first.Up)}
	migrations[first.Name+".down.sql"] = &fstest.MapFile{Data: []byte(first.Down)}
	if _, err := generateFresh(t, Config{Migrations: migrations, Schema: schemaText(routinesAfter), Name: "again"}); !errors.Is(err, ErrNoChanges) {
		t.Fatalf("after the generated migration: %v, want ErrNoChanges", err)
	}

	changedAgain := strings.Replace(routinesAfter, "SELECT a + 1", "SELECT a + 2", 1)
	res, err := generateFresh(t, Config{Migrations: migrations, Schema: schemaText(changedAgain), Name: "second", Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != "0002_second" || res.Replaced != first.Name {
		t.Fatalf("replace wrote %s in place of %q, want 0002_second in place of %s", res.Name, res.Replaced, first.Name)
	}
	if !strings.Contains(res.Up, "SELECT a + 2") || !strings.Contains(res.Up, "DROP FUNCTION gaffer.gone();") {
		t.Errorf("the replacement does not go from 0001 to the schema:\n%s", res.Up)
	}

	if _, err := generateFresh(t, Config{Migrations: baseMigrations(), Schema: schemaText(routinesAfter), Name: "x", Replace: true}); err == nil ||
		!strings.Contains(err.Error(), "written by hand") {
		t.Fatalf("replacing a hand-written migration: %v, want it refused", err)
	}
}

// What the next engineer does: change a routine of the real schema (here
// a comment in claim's body). The generator writes migration 0030
// (or whatever comes next) with that routine alone.
func TestGenerateOnTheRealSchema(t *testing.T) {
	t.Parallel()
	schema := fstest.MapFS{}
	err := fs.WalkDir(store.SchemaFiles(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(store.SchemaFiles(), p)
		schema[p] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	claim := string(schema["claim.sql"].Data)
	const from, to = "-- The grace: a unit the last claim served is among those found.", "-- The grace: a unit the last claim served is among those found (reworded)."
	if !strings.Contains(claim, from) {
		t.Fatalf("claim.sql no longer says %q: pick another line to change", from)
	}
	schema["claim.sql"] = &fstest.MapFile{Data: []byte(strings.Replace(claim, from, to, 1))}
	res, err := generateFresh(t, Config{Migrations: store.MigrationFiles(), Schema: schema, Name: "claim_comment", Expand: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"changed   function gaffer.claim_ready(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer)"}
	if res.Version != store.LatestVersion()+1 || !slices.Equal(res.Changes, want) {
		t.Fatalf("migration %s changes %q, want version %d changing %q", res.Name, res.Changes, store.LatestVersion()+1, want)
	}
	if !strings.Contains(res.Up, to) || strings.Contains(res.Down, to) {
		t.Errorf("the up file should hold the new text and the down file the old:\n%s", res.Up)
	}
}

// write puts a new migration beside the others, and a replacement in
// place of the one it replaces, renamed.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := write(dir, Result{Name: "0002_a", Up: "up a", Down: "down a"}); err != nil {
		t.Fatal(err)
	}
	if err := write(dir, Result{Name: "0002_a", Up: "up a", Down: "down a"}); err == nil {
		t.Fatal("a new migration overwrote one of the same name")
	}
	if err := write(dir, Result{Name: "0002_b", Up: "up b", Down: "down b", Replaced: "0002_a"}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		names = append(names, e.Name()+": "+string(data))
	}
	if want := []string{"0002_b.down.sql: down b", "0002_b.up.sql: up b"}; !slices.Equal(names, want) {
		t.Fatalf("files %q, want %q", names, want)
	}
}

// The command's flags: help exits 0, a missing name or a stray argument
// is a usage error (2), before any server starts.
func TestRunFlags(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-replace") {
		t.Errorf("-h: exit %d, usage %q", code, errOut.String())
	}
	for _, args := range [][]string{{}, {"-name", "x", "extra"}} {
		if code := run(context.Background(), append(args, "-dir", t.TempDir()), &out, &errOut); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
