package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one versioned schema change, embedded in the binary.
type Migration struct {
	Version int
	Name    string
	up      string
	down    string
}

// MigrationStatus reports whether a migration is applied, and when.
type MigrationStatus struct {
	Version   int
	Name      string
	AppliedAt *time.Time
}

// ErrSchemaBehind is returned by CheckSchema when the database needs
// migrations this binary carries.
var ErrSchemaBehind = errors.New("database schema is behind")

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// migrationLockID is the advisory lock that serialises migration runs.
const migrationLockID = 0x6761666665720001

var migrations = mustLoadMigrations()

func mustLoadMigrations() []Migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			panic("store: badly named migration " + e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		mig := byVersion[v]
		if mig == nil {
			mig = &Migration{Version: v, Name: m[2]}
			byVersion[v] = mig
		}
		if m[3] == "up" {
			mig.up = string(body)
		} else {
			mig.down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.up == "" || m.down == "" {
			panic(fmt.Sprintf("store: migration %04d needs both up and down files", m.Version))
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			panic(fmt.Sprintf("store: migrations must be numbered 1, 2, 3…; found %04d at position %d", m.Version, i+1))
		}
	}
	return out
}

// LatestVersion is the schema version this binary needs.
func LatestVersion() int { return len(migrations) }

const bootstrapSQL = `
CREATE SCHEMA IF NOT EXISTS gaffer;
CREATE TABLE IF NOT EXISTS gaffer.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// MigrateUp applies every pending migration in one transaction (all land or
// none do) and returns the versions it applied. Concurrent callers are serialised
// by an advisory lock, so several nodes may run it at once.
func (s *Store) MigrateUp(ctx context.Context) ([]int, error) {
	return s.migrate(ctx, func(tx pgx.Tx, current int) ([]int, error) {
		var done []int
		for _, m := range migrations[current:] {
			if _, err := tx.Exec(ctx, m.up); err != nil {
				return done, fmt.Errorf("migration %04d_%s up: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO gaffer.schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return done, err
			}
			done = append(done, m.Version)
		}
		return done, nil
	})
}

// MigrateDown reverts the latest `steps` applied migrations, newest first,
// and returns the versions it reverted.
func (s *Store) MigrateDown(ctx context.Context, steps int) ([]int, error) {
	if steps < 1 {
		return nil, fmt.Errorf("steps must be at least 1, got %d", steps)
	}
	return s.migrate(ctx, func(tx pgx.Tx, current int) ([]int, error) {
		var done []int
		for v := current; v > 0 && len(done) < steps; v-- {
			m := migrations[v-1]
			if _, err := tx.Exec(ctx, m.down); err != nil {
				return done, fmt.Errorf("migration %04d_%s down: %w", m.Version, m.Name, err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM gaffer.schema_migrations WHERE version = $1`, m.Version); err != nil {
				return done, err
			}
			done = append(done, m.Version)
		}
		return done, nil
	})
}

// migrate runs fn in one transaction holding the migration lock: either
// every step lands or none does.
func (s *Store) migrate(ctx context.Context, fn func(tx pgx.Tx, current int) ([]int, error)) ([]int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLockID)); err != nil {
		return nil, fmt.Errorf("migrate: take lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLockID))
	if _, err := conn.Exec(ctx, bootstrapSQL); err != nil {
		return nil, fmt.Errorf("migrate: bootstrap: %w", err)
	}
	var done []int
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		current, err := currentVersion(ctx, tx)
		if err != nil {
			return err
		}
		if current > len(migrations) {
			return fmt.Errorf("database schema is at version %d, newer than this binary knows (%d): use a newer gaffer", current, len(migrations))
		}
		done, err = fn(tx, current)
		return err
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// SchemaVersion returns the highest applied migration, 0 for none.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('gaffer.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	return currentVersion(ctx, s.pool)
}

func currentVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var v int
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM gaffer.schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// MigrationStatuses lists every migration this binary carries and whether
// the database has it.
func (s *Store) MigrationStatuses(ctx context.Context) ([]MigrationStatus, error) {
	applied := map[int]time.Time{}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('gaffer.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, err
	}
	if exists {
		rows, err := s.pool.Query(ctx, `SELECT version, applied_at FROM gaffer.schema_migrations`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var v int
			var at time.Time
			if err := rows.Scan(&v, &at); err != nil {
				return nil, err
			}
			applied[v] = at
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	out := make([]MigrationStatus, len(migrations))
	for i, m := range migrations {
		out[i] = MigrationStatus{Version: m.Version, Name: m.Name}
		if at, ok := applied[m.Version]; ok {
			out[i].AppliedAt = &at
		}
	}
	return out, nil
}

// CheckSchema returns an error wrapping ErrSchemaBehind, naming the command
// to run, when the database lacks migrations this binary needs.
func (s *Store) CheckSchema(ctx context.Context) error {
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if v < LatestVersion() {
		return fmt.Errorf("%w: it is at version %d and this gaffer needs version %d; run `gaffer migrate up`", ErrSchemaBehind, v, LatestVersion())
	}
	return nil
}

// MigrationsHash identifies the exact set of embedded migrations; test
// harnesses key template databases on it.
func MigrationsHash() string {
	h := sha256.New()
	for _, m := range migrations {
		fmt.Fprintf(h, "%d\x00%s\x00%s\x00", m.Version, m.up, m.down)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
