// Command migrategen writes the migrations of the gaffer schema's routines
// (functions and triggers) from store/schema, the schema's one current
// text, so that no routine is copied into a migration by hand. Run it from
// the repository:
//
//	go run ./store/internal/migrategen -name <snake_name> [-expand] [-replace]
//
// See usage below, and store/doc.go for how a schema change is made.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/internal/redact"
	"github.com/gafferhq/gaffer/store"
)

const usage = `Usage: go run ./store/internal/migrategen -name <snake_name> [-expand] [-replace]

migrategen writes the next migration of the gaffer schema's routines
(functions and triggers) from store/schema, the schema's one current text.

It starts a throwaway PostgreSQL (or uses -database-url), builds database A
from store/migrations and database B from store/schema, and compares their
catalogs:

  - nothing differs: it prints "no changes" and writes nothing;
  - tables, columns, constraints, indexes, sequences or seed rows differ: it
    prints the difference and exits 1: write that part as a hand-written
    migration first (store/doc.go says how), then run it again;
  - only routines differ: it writes store/migrations/NNNN_<name>.up.sql,
    from A to B (DROP TRIGGER and DROP FUNCTION for what goes, CREATE OR
    REPLACE FUNCTION for what is new or changed, DROP and CREATE where
    CREATE OR REPLACE cannot change a routine's arguments or result, CREATE
    TRIGGER), and NNNN_<name>.down.sql, from B to A. Both say
    "-- gaffer:generated". Before writing them it checks them: A plus the
    up file has B's catalog, and B plus the down file A's.

Then run the store tests (go test ./store/...).

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: it returns the exit code, 2 for a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("migrategen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprint(stderr, usage)
		flags.PrintDefaults()
	}
	name := flags.String("name", "", "the migration's name, snake_case (NNNN_<name>.up.sql); with -replace, the replaced migration's by default")
	expand := flags.Bool("expand", false, "declare the migration an expand (-- gaffer:expand): binaries of the release before keep working on the schema it leaves;\n"+
		"with -replace, the replaced migration's declaration is kept unless this flag is given (-expand=false drops it)")
	replace := flags.Bool("replace", false, "write the latest migration again, in place, when it is a generated one (to iterate before a release)")
	dir := flags.String("dir", "", "the store package's directory, holding migrations/ and schema/ (default: store/ of the module the current directory is in)")
	databaseURL := flags.String("database-url", "", "a PostgreSQL superuser URL to make the two scratch databases on, instead of starting a throwaway server")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "migrategen: unexpected arguments %q\n", flags.Args())
		flags.Usage()
		return 2
	}
	expandSet := false
	flags.Visit(func(f *flag.Flag) { expandSet = expandSet || f.Name == "expand" })

	storeDir := *dir
	if storeDir == "" {
		var err error
		if storeDir, err = findStore(); err != nil {
			fmt.Fprintf(stderr, "migrategen: %v\n", err)
			return 2
		}
	}
	migrationsDir := filepath.Join(storeDir, "migrations")
	cfg := Config{Migrations: os.DirFS(migrationsDir), Schema: os.DirFS(filepath.Join(storeDir, "schema")),
		Name: *name, Expand: *expand, Replace: *replace}
	if *replace {
		// The replaced migration's name and declaration, unless given.
		names, err := migrationNames(cfg.Migrations)
		if err != nil || len(names) == 0 {
			fmt.Fprintf(stderr, "migrategen: -replace: no migration to replace in %s (%v)\n", migrationsDir, err)
			return 1
		}
		latest := names[len(names)-1]
		if cfg.Name == "" {
			cfg.Name = latest[5:]
		}
		if !expandSet {
			up, _ := os.ReadFile(filepath.Join(migrationsDir, latest+".up.sql"))
			cfg.Expand = header(string(up))[store.ExpandMarker]
		}
	}
	if cfg.Name == "" {
		fmt.Fprintln(stderr, "migrategen: -name is required")
		flags.Usage()
		return 2
	}

	res, err := generate(ctx, cfg, *databaseURL)
	var tables *TablesDifferError
	switch {
	case errors.Is(err, ErrNoChanges):
		fmt.Fprintln(stdout, "no changes: store/schema has the routines the migrations build")
		return 0
	case errors.As(err, &tables):
		fmt.Fprintf(stderr, "migrategen: %v\n", err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "migrategen: %v\n", err)
		return 1
	}
	if err := write(migrationsDir, res); err != nil {
		fmt.Fprintf(stderr, "migrategen: %v\n", err)
		return 1
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "%s:\n", res.Name)
	for _, c := range res.Changes {
		fmt.Fprintf(stdout, "  %s\n", c)
	}
	if res.Replaced != "" {
		fmt.Fprintf(stdout, "replaced %s\n", res.Replaced)
	}
	fmt.Fprintf(stdout, "wrote %s.up.sql and %s.down.sql in %s (checked: the migrations before it plus the up file build store/schema's catalog, the down file takes it back)\n",
		res.Name, res.Name, migrationsDir)
	return 0
}

// findStore returns the store directory of the gaffer module the current
// directory is in.
func findStore() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		mod, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(mod), []byte("module github.com/gafferhq/gaffer\n")) {
			return filepath.Join(d, "store"), nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside the gaffer repository: run it there, or pass -dir")
		}
	}
}

// generate runs Generate on two scratch databases: on the server of
// adminURL, or else on a throwaway server it starts and stops.
func generate(ctx context.Context, cfg Config, adminURL string) (Result, error) {
	if adminURL == "" {
		srv, err := pgserver.Start(ctx, pgserver.Config{})
		if err != nil {
			return Result{}, fmt.Errorf("start a throwaway PostgreSQL (or pass -database-url): %w", err)
		}
		defer srv.Stop()
		adminURL = srv.URL()
	}
	a, dropA, err := scratchDatabase(ctx, adminURL)
	if err != nil {
		return Result{}, err
	}
	defer dropA()
	b, dropB, err := scratchDatabase(ctx, adminURL)
	if err != nil {
		return Result{}, err
	}
	defer dropB()
	return Generate(ctx, cfg, a, b)
}

// scratchDatabase creates an empty database on the server of adminURL
// and returns a pool on it, and the func that closes the pool and drops
// the database.
func scratchDatabase(ctx context.Context, adminURL string) (*pgxpool.Pool, func(), error) {
	buf := make([]byte, 6)
	rand.Read(buf)
	name := "migrategen_" + hex.EncodeToString(buf)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", redact.URL(adminURL), err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return nil, nil, fmt.Errorf("create a scratch database: %w", err)
	}
	drop := func() {
		ctx := context.WithoutCancel(ctx)
		if conn, err := pgx.Connect(ctx, adminURL); err == nil {
			conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
			conn.Close(ctx)
		}
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("database URL: %w", err)
	}
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		drop()
		return nil, nil, fmt.Errorf("connect to the scratch database: %w", err)
	}
	return pool, func() { pool.Close(); drop() }, nil
}

// write puts the migration's files in dir: in place of the replaced
// migration's, or beside the others for a new one.
func write(dir string, res Result) error {
	up, down := filepath.Join(dir, res.Name+".up.sql"), filepath.Join(dir, res.Name+".down.sql")
	if res.Replaced == "" {
		for _, p := range []string{up, down} {
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("%s exists already", p)
			}
		}
	}
	if err := os.WriteFile(up, []byte(res.Up), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(down, []byte(res.Down), 0o644); err != nil {
		return err
	}
	if res.Replaced != "" && res.Replaced != res.Name {
		for _, ext := range []string{".up.sql", ".down.sql"} {
			if err := os.Remove(filepath.Join(dir, res.Replaced+ext)); err != nil {
				return err
			}
		}
	}
	return nil
}
