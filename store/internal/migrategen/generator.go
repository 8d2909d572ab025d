package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/store/internal/catalog"
)

// Config is what one run of the generator works from.
type Config struct {
	// Migrations are the migrations so far (store/migrations).
	Migrations fs.FS
	// Schema is the schema's current text (store/schema).
	Schema fs.FS
	// Name is the new migration's name, snake_case.
	Name string
	// Expand declares the new migration an expand (store.ExpandMarker).
	Expand bool
	// Replace writes the migration anew in place of the latest one, which
	// must be a generated one: the migrations before it are the start.
	Replace bool
}

// Result is a migration the generator wrote and checked.
type Result struct {
	Version int
	Name    string // the migration's name, NNNN_name
	Up      string // the up file's text
	Down    string // the down file's text
	// Replaced is the name (NNNN_name) of the migration it replaces, with
	// Config.Replace.
	Replaced string
	// Changes lists what the up file does, one routine or trigger a line.
	Changes []string
	// Warnings are what an expand should not do, which it does.
	Warnings []string
}

// ErrNoChanges is returned when the schema's current text has the
// routines the migrations build: there is nothing to write.
var ErrNoChanges = errors.New("no changes")

// TablesDifferError is returned when the migrations and the schema's
// current text differ in more than routines: a change the generator does
// not write.
type TablesDifferError struct {
	// Diff is the difference, "-" the migrations' side, "+" the text's.
	Diff string
}

// Error says what differs and what to do about it.
func (e *TablesDifferError) Error() string {
	return "store/schema differs from the migrations in more than routines (- migrations, + store/schema):\n" + e.Diff +
		"\nWrite that part as a hand-written migration first (store/doc.go says how), then run migrategen again for the routines."
}

// snakeName is what a migration's name may be (store's migrationName).
var snakeName = regexp.MustCompile(`^[a-z0-9_]+$`)

// Generate writes the migration from what cfg.Migrations build to what
// cfg.Schema says, for the routines (functions and triggers), and checks
// it. a and b are empty databases it builds and changes: a from the
// migrations, b from the text. It returns ErrNoChanges when they have the
// same routines, and a *TablesDifferError when they differ in anything
// else (tables, columns, constraints, indexes, sequences, seed rows).
//
// What it returns has been checked: the migrations before it plus its up
// file build b's catalog, its down file (run by the migrator) takes that
// back to a's, and so does the down file run on b.
func Generate(ctx context.Context, cfg Config, a, b *pgxpool.Pool) (Result, error) {
	if !snakeName.MatchString(cfg.Name) {
		return Result{}, fmt.Errorf("migration name %q: want snake_case (a-z, 0-9, _)", cfg.Name)
	}
	base, names, res, err := startingPoint(cfg)
	if err != nil {
		return Result{}, err
	}
	res.Name = fmt.Sprintf("%04d_%s", res.Version, cfg.Name)

	migrator, err := store.NewMigrator(a, base)
	if err != nil {
		return Result{}, err
	}
	if _, err := migrator.Up(ctx); err != nil {
		return Result{}, fmt.Errorf("build a database from the migrations: %w", err)
	}
	if err := store.LoadSchema(ctx, b, cfg.Schema); err != nil {
		return Result{}, fmt.Errorf("build a database from store/schema: %w", err)
	}
	from, err := catalog.Snapshot(ctx, a)
	if err != nil {
		return Result{}, err
	}
	to, err := catalog.Snapshot(ctx, b)
	if err != nil {
		return Result{}, err
	}
	if d := catalog.Diff(from.Without(catalog.Routines...), to.Without(catalog.Routines...)); d != "" {
		return Result{}, &TablesDifferError{Diff: d}
	}
	if catalog.Diff(from, to) == "" {
		return Result{}, ErrNoChanges
	}

	if err := noAggregates(from, to); err != nil {
		return Result{}, err
	}
	res.compose(cfg, base, names, from, to)
	if err := check(ctx, base, res, a, b, from, to); err != nil {
		return Result{}, fmt.Errorf("the migration written does not do what it should: %w%s\n\n%s.up.sql:\n%s",
			err, pgDetail(err), res.Name, res.Up)
	}
	return res, nil
}

// noAggregates refuses a change to an aggregate: the catalog describes
// one, but has no statement that makes it.
func noAggregates(from, to catalog.Catalog) error {
	a, b := from.Of(catalog.Function), to.Of(catalog.Function)
	for _, side := range []map[string]catalog.Object{a, b} {
		for name, o := range side {
			if strings.HasPrefix(o.Drop, "AGGREGATE ") && a[name].Def != b[name].Def {
				return fmt.Errorf("aggregate %s differs: write its migration by hand", name)
			}
		}
	}
	return nil
}

// startingPoint returns the migrations the new one follows, their names,
// and the new one's version: after every migration of cfg, or, with
// cfg.Replace, in place of the latest, which must be generated.
func startingPoint(cfg Config) (fs.FS, []string, Result, error) {
	names, err := migrationNames(cfg.Migrations)
	if err != nil {
		return nil, nil, Result{}, err
	}
	if !cfg.Replace {
		return cfg.Migrations, names, Result{Version: len(names) + 1}, nil
	}
	if len(names) == 0 {
		return nil, nil, Result{}, errors.New("-replace: there is no migration to replace")
	}
	latest := names[len(names)-1]
	up, err := fs.ReadFile(cfg.Migrations, latest+".up.sql")
	if err != nil {
		return nil, nil, Result{}, err
	}
	if !header(string(up))[store.GeneratedMarker] {
		return nil, nil, Result{}, fmt.Errorf("-replace: migration %s was written by hand (its up file has no %q line); "+
			"only a generated migration may be written again", latest, store.GeneratedMarker)
	}
	names = names[:len(names)-1]
	base, err := subset(cfg.Migrations, names)
	if err != nil {
		return nil, nil, Result{}, err
	}
	return base, names, Result{Version: len(names) + 1, Replaced: latest}, nil
}

// compose fills in the up and down files, the changes and the warnings of
// the migration from catalog from (the migrations base, named names) to
// catalog to (cfg.Schema).
func (res *Result) compose(cfg Config, base fs.FS, names []string, from, to catalog.Catalog) {
	up, down := planRoutines(from, to), planRoutines(to, from)
	previous := "no migration"
	if len(names) > 0 {
		previous = names[len(names)-1]
	}
	for _, c := range up.changes {
		res.Changes = append(res.Changes, c.String())
	}
	if cfg.Expand {
		for _, o := range up.droppedForGood {
			res.Warnings = append(res.Warnings, fmt.Sprintf("an expand drops %s, which nodes of the release before may call", o.Name))
		}
		for _, c := range up.makeRoutines {
			if c.what == "recreated" {
				res.Warnings = append(res.Warnings, fmt.Sprintf("an expand changes the arguments or result of %s, which nodes of the release before may call", c.object.Name))
			}
		}
	}
	res.Up = up.script(upHeader(previous, cfg.Expand, up), func(c change) string {
		l := c.what + ": " + c.object.Name
		if f := definedIn(cfg.Schema, c.object, false); f != "" {
			l += ", as store/schema/" + f + " has it"
		}
		return l
	})
	res.Down = down.script(downHeader(res.Name, previous), func(c change) string {
		if f := definedIn(base, c.object, true); f != "" {
			return c.object.Name + " as " + strings.TrimSuffix(f, ".up.sql") + " left it"
		}
		return c.object.Name + " as before"
	})
}

// pgDetail returns the detail and hint of a PostgreSQL error, which its
// Error leaves out (what depends on a routine that cannot be dropped, say).
func pgDetail(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	var b strings.Builder
	if pgErr.Detail != "" {
		b.WriteString("\nDETAIL: " + pgErr.Detail)
	}
	if pgErr.Hint != "" {
		b.WriteString("\nHINT: " + pgErr.Hint)
	}
	return b.String()
}

func upHeader(previous string, expand bool, p plan) string {
	var b strings.Builder
	b.WriteString(store.GeneratedMarker + "\n")
	if expand {
		b.WriteString(store.ExpandMarker + "\n")
	}
	fmt.Fprintf(&b, "-- The routines of store/schema that differ from those %s left,\n", previous)
	b.WriteString("-- written by `go run ./store/internal/migrategen`. Edit store/schema, not\n")
	b.WriteString("-- this file, and write it again (-replace) while no release carries it.\n--\n")
	for _, c := range p.changes {
		b.WriteString("--   " + c.String() + "\n")
	}
	if p.recreates() {
		b.WriteString("--\n-- " + recreated + "\n")
	}
	return b.String()
}

func downHeader(name, previous string) string {
	return store.GeneratedMarker + "\n" +
		fmt.Sprintf("-- Back to the routines %s left, written by migrategen with\n", previous) +
		fmt.Sprintf("-- %s.up.sql.\n", name)
}

// check applies what Generate wrote: the migrations before it plus its up
// file must build to's catalog, its down file (by the migrator) take that
// back to from's, and the down file run on b (to's) give from's too.
func check(ctx context.Context, base fs.FS, res Result, a, b *pgxpool.Pool, from, to catalog.Catalog) error {
	files, err := subset(base, nil)
	if err != nil {
		return err
	}
	files[res.Name+".up.sql"] = &fstest.MapFile{Data: []byte(res.Up)}
	files[res.Name+".down.sql"] = &fstest.MapFile{Data: []byte(res.Down)}
	m, err := store.NewMigrator(a, files)
	if err != nil {
		return err
	}
	if _, err := m.Up(ctx); err != nil {
		return err
	}
	if err := same(ctx, a, to, "the migrations and the up file (-: store/schema, +: the result)"); err != nil {
		return err
	}
	if _, err := m.Down(ctx, 1); err != nil {
		return err
	}
	if err := same(ctx, a, from, "the migrations, the up file, then the down file (-: the migrations, +: the result)"); err != nil {
		return err
	}
	if err := pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, res.Down)
		return err
	}); err != nil {
		return fmt.Errorf("the down file on store/schema: %w", err)
	}
	return same(ctx, b, from, "store/schema and the down file (-: the migrations, +: the result)")
}

// same returns an error, with the difference, when db's catalog is not
// want.
func same(ctx context.Context, db *pgxpool.Pool, want catalog.Catalog, what string) error {
	got, err := catalog.Snapshot(ctx, db)
	if err != nil {
		return err
	}
	if d := catalog.Diff(want, got); d != "" {
		return fmt.Errorf("%s:\n%s", what, d)
	}
	return nil
}

// migrationNames lists the migrations of fsys (NNNN_name), in order,
// checking that they are numbered 1, 2, 3….
func migrationNames(fsys fs.FS) ([]string, error) {
	ups, err := fs.Glob(fsys, "*.up.sql")
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ups))
	for i, up := range ups {
		names[i] = strings.TrimSuffix(up, ".up.sql")
		if v, err := strconv.Atoi(strings.SplitN(names[i], "_", 2)[0]); err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want migrations numbered 1, 2, 3…", up)
		}
	}
	return names, nil
}

// subset copies the files of the named migrations (NNNN_name) of fsys,
// or all of them for nil.
func subset(fsys fs.FS, names []string) (fstest.MapFS, error) {
	keep := map[string]bool{}
	for _, n := range names {
		keep[n] = true
	}
	paths, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimSuffix(p, ".up.sql"), ".down.sql")
		if names != nil && !keep[name] {
			continue
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		out[p] = &fstest.MapFile{Data: data}
	}
	return out, nil
}

// header returns the "-- gaffer:" lines a migration file opens with.
func header(sql string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(sql, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "-- gaffer:") {
			break
		}
		out[line] = true
	}
	return out
}

// definedIn names the .sql file of fsys that writes routine or trigger
// o as it is: one whose CREATE statement of the routine is followed by
// its body (as written: PostgreSQL's prosrc), or that holds the trigger's
// CREATE TRIGGER. With latest, the last such file in name order (the
// latest migration); otherwise the first. Down files are passed over.
func definedIn(fsys fs.FS, o catalog.Object, latest bool) string {
	paths, _ := fs.Glob(fsys, "*.sql")
	if latest {
		slices.Reverse(paths)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, ".down.sql") {
			continue
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			continue
		}
		if writes(string(data), o) {
			return p
		}
	}
	return ""
}

func writes(text string, o catalog.Object) bool {
	if o.Kind == catalog.Trigger {
		return strings.Contains(text, "CREATE TRIGGER "+strings.TrimPrefix(o.Name, o.Table+".")+" ")
	}
	qualified, _, _ := strings.Cut(o.Name, "(")
	for _, create := range []string{"FUNCTION " + qualified + "(", "PROCEDURE " + qualified + "("} {
		if i := strings.Index(text, create); i >= 0 && strings.Contains(text[i:], o.Source) {
			return true
		}
	}
	return false
}
