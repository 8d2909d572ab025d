package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed schema/*.sql
var schemaFiles embed.FS

// SchemaTables is the file of the schema's current text that holds its
// tables; it loads first.
const SchemaTables = "tables.sql"

// SchemaFiles returns the current text of the gaffer schema built into
// this binary (store/schema): SchemaTables, and one file per group of
// routines. It is what people edit; the migrations are checked against it
// (TestSchemaMatchesMigrations) and routine migrations generated from it
// (store/internal/migrategen). Nothing runs it in production: a
// database's schema is always its migrations'.
func SchemaFiles() fs.FS {
	dir, _ := fs.Sub(schemaFiles, "schema")
	return dir
}

// LoadSchema creates the gaffer schema on db's database from a current
// text laid out as SchemaFiles is (fsys: SchemaFiles(), or a copy being
// changed), in one transaction: SchemaTables first, then the other .sql
// files in name order. Routines are created without their bodies checked,
// so that a file may call what a later one creates, and every routine's
// body is checked once all are there; an error names the file and line,
// or the routine, at fault. The database must not have the schema's
// objects yet; schema_migrations is not part of the text (Migrator
// creates it).
func LoadSchema(ctx context.Context, db DB, fsys fs.FS) error {
	names, err := schemaOrder(fsys)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL check_function_bodies = off`); err != nil {
			return fmt.Errorf("load schema: %w", err)
		}
		for _, name := range names {
			sql, err := fs.ReadFile(fsys, name)
			if err != nil {
				return fmt.Errorf("load schema: %w", err)
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("load schema: %s: %w", errorPlace(name, string(sql), err), err)
			}
		}
		return checkRoutineBodies(ctx, tx)
	})
}

// schemaOrder lists the .sql files of fsys in the order LoadSchema runs
// them.
func schemaOrder(fsys fs.FS) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	var names []string
	hasTables := false
	for _, e := range entries {
		switch {
		case e.Name() == SchemaTables:
			hasTables = true
		case strings.HasSuffix(e.Name(), ".sql"):
			names = append(names, e.Name())
		}
	}
	if !hasTables {
		return nil, fmt.Errorf("read schema: no %s", SchemaTables)
	}
	sort.Strings(names)
	return append([]string{SchemaTables}, names...), nil
}

// checkRoutineBodies runs each gaffer routine's language validator with
// check_function_bodies on: what CREATE FUNCTION checks when it is on
// (PL/pgSQL syntax, SQL bodies parsed and analysed against the schema).
func checkRoutineBodies(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SET LOCAL check_function_bodies = on`); err != nil {
		return fmt.Errorf("load schema: %w", err)
	}
	rows, err := tx.Query(ctx, `
		SELECT p.oid, p.oid::regprocedure::text, l.lanvalidator::regproc::text
		FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = 'gaffer'::regnamespace AND l.lanvalidator <> 0
		ORDER BY 2`)
	if err != nil {
		return fmt.Errorf("load schema: list routines: %w", err)
	}
	type routine struct {
		oid             uint32
		name, validator string
	}
	routines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (r routine, err error) {
		err = row.Scan(&r.oid, &r.name, &r.validator)
		return r, err
	})
	if err != nil {
		return fmt.Errorf("load schema: list routines: %w", err)
	}
	for _, r := range routines {
		// The validator is a pg_catalog function named by the catalog.
		if _, err := tx.Exec(ctx, `SELECT `+r.validator+`($1)`, r.oid); err != nil {
			return fmt.Errorf("load schema: %s: %w", r.name, err)
		}
	}
	return nil
}

// errorPlace names the place in file name (text sql) that err, a PostgreSQL
// error, points at: "claim.sql:120:9", or the file alone.
func errorPlace(name, sql string, err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Position < 1 {
		return name
	}
	// Position counts characters from 1.
	line, col, n := 1, 1, 0
	for i := 0; i < len(sql) && n < int(pgErr.Position)-1; {
		r, size := utf8.DecodeRuneInString(sql[i:])
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
		n++
	}
	return fmt.Sprintf("%s:%d:%d", name, line, col)
}
