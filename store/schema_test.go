package store_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/store/internal/catalog"
)

// schemaFix says what to do when store/schema and the migrations differ.
const schemaFix = `store/schema is the schema's one current text, and the migrations must reach it:
  - changed a routine (function, trigger) in store/schema? Write its migration with
    go run ./store/internal/migrategen -name <snake_name> [-expand]
  - changed a table, column, constraint, index or seed row? Write that migration by hand
    (store/doc.go), then run migrategen for any routines;
  - changed a migration? Make the same change in store/schema.`

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func snapshot(t *testing.T, db catalog.DB) catalog.Catalog {
	t.Helper()
	c, err := catalog.Snapshot(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The migrations and the schema's current text (store/schema) build the
// same schema: the same tables with the same columns in the same order,
// constraints, indexes, sequences, routines byte for byte, triggers and
// seed rows. Red when a routine or a table is changed in one and not the
// other.
func TestSchemaMatchesMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	migrated := openPool(t, pgtest.NewDatabase(t))
	fromText := openPool(t, pgtest.NewEmptyDatabase(t))
	if err := store.LoadSchema(ctx, fromText, store.SchemaFiles()); err != nil {
		t.Fatal(err)
	}
	want, got := snapshot(t, migrated), snapshot(t, fromText)
	// A snapshot that saw nothing would make any two databases equal.
	for kind, least := range map[catalog.Kind]int{catalog.Table: 15, catalog.Constraint: 40, catalog.Index: 30, catalog.Sequence: 3,
		catalog.Function: 20, catalog.Trigger: 3, catalog.Rows: 2} {
		if n := len(want.Of(kind)); n < least {
			t.Fatalf("the migrated database's snapshot has %d objects of kind %s, want at least %d:\n%s", n, kind, least, want)
		}
	}
	if d := catalog.Diff(want, got); d != "" {
		t.Fatalf("the migrations (-) and store/schema (+) build different schemas:\n%s\n%s", d, schemaFix)
	}
}

// LoadSchema points at the line of a file PostgreSQL refused, and at the
// routine whose body does not compile, though bodies are checked only
// after every file has run.
func TestLoadSchemaNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"statement", fstest.MapFS{
			"tables.sql": {Data: []byte("CREATE SCHEMA IF NOT EXISTS gaffer;\n\nCREATE TABLE gaffer.t (v integr);\n")},
		}, "tables.sql:3:26"},
		{"body", fstest.MapFS{
			"tables.sql": {Data: []byte("CREATE SCHEMA IF NOT EXISTS gaffer;\nCREATE TABLE gaffer.t (v integer);\n")},
			"a.sql":      {Data: []byte("CREATE FUNCTION gaffer.f() RETURNS integer LANGUAGE sql AS $$ SELECT gaffer.g() $$;\n")},
			"b.sql": {Data: []byte("CREATE FUNCTION gaffer.g() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;\n" +
				"CREATE FUNCTION gaffer.h() RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN 1 END $$;\n")},
		}, "gaffer.h()"},
		{"no tables", fstest.MapFS{"a.sql": {Data: []byte("SELECT 1;\n")}}, "no tables.sql"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := store.LoadSchema(ctx, openPool(t, pgtest.NewEmptyDatabase(t)), c.files)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("LoadSchema: %v; want an error naming %s", err, c.want)
			}
		})
	}
}
