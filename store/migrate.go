package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrationStatus reports whether a migration is applied, and when.
type MigrationStatus struct {
	Version int
	Name    string
	// CompatibleFrom is the oldest schema version whose binaries keep
	// working once the migration is applied (see Migration).
	CompatibleFrom int
	AppliedAt      *time.Time
}

// ErrSchemaBehind is returned by CheckSchema when the database needs
// migrations this binary carries.
var ErrSchemaBehind = errors.New("database schema is behind")

// ErrSchemaAhead is returned by CheckSchema, Up and Down when the database
// has migrations this binary does not carry and cannot work with (a
// contract), or, for Down, any it does not carry.
var ErrSchemaAhead = errors.New("database schema is ahead of this gaffer")

// ErrMigrationEdited is returned when a migration applied to the
// database differs from this binary's migration of the same version.
var ErrMigrationEdited = errors.New("applied migration was edited")

// migrationLockID is the advisory lock that serialises migration runs.
const migrationLockID = 0x6761666665720001

// LatestVersion is the schema version this binary needs.
func LatestVersion() int { return len(embeddedMigrations) }

// The checksum column came after the table: databases created before it
// gain it on their next run, and their rows get checksums then.
const bootstrapSQL = `
CREATE SCHEMA IF NOT EXISTS gaffer;
CREATE TABLE IF NOT EXISTS gaffer.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE gaffer.schema_migrations ADD COLUMN IF NOT EXISTS checksum text;
ALTER TABLE gaffer.schema_migrations ADD COLUMN IF NOT EXISTS compatible_from integer`

// Migrator applies one set of migrations to one database. Every run holds
// a session advisory lock on a single connection from start to end, so
// concurrent runs (several nodes upgrading at once) are serialised, across
// transactions and across no-transaction migrations alike.
type Migrator struct {
	pool       *pgxpool.Pool
	migrations []Migration
}

// NewMigrator returns a migrator for the migrations in fsys
// (NNNN_name.up.sql and NNNN_name.down.sql at its root), or an error
// naming the file that is wrong. Gaffer's own are MigrationFiles().
func NewMigrator(pool *pgxpool.Pool, fsys fs.FS) (*Migrator, error) {
	ms, err := loadMigrations(fsys, nil)
	if err != nil {
		return nil, err
	}
	return &Migrator{pool: pool, migrations: ms}, nil
}

func (s *Store) migrator() *Migrator { return &Migrator{pool: s.pool, migrations: embeddedMigrations} }

// MigrateUp applies every pending migration of this binary; see Migrator.Up.
func (s *Store) MigrateUp(ctx context.Context) ([]int, error) { return s.migrator().Up(ctx) }

// MigrateDown reverts the latest steps migrations; see Migrator.Down.
func (s *Store) MigrateDown(ctx context.Context, steps int) ([]int, error) {
	return s.migrator().Down(ctx, steps)
}

// MigrationStatuses lists every migration this binary carries and whether
// the database has it.
func (s *Store) MigrationStatuses(ctx context.Context) ([]MigrationStatus, error) {
	return s.migrator().Statuses(ctx)
}

// Up applies every pending migration, oldest first, and returns the
// versions it applied, also when it fails partway: each migration commits
// on its own (in its own transaction, or statement by statement for a
// no-transaction one), so a failure leaves the database at the last
// version that landed, and the next run resumes from there.
//
// Before applying anything it checks the applied migrations against this
// set: a migration whose up file changed since it was applied is refused
// with ErrMigrationEdited, naming it. Rows applied before checksums
// existed get this set's checksums.
//
// A database already ahead of this set (a newer gaffer migrated it) is
// left as it is: Up applies nothing and succeeds when this set's
// binaries work on it — every migration it does not know is declared
// compatible — and fails with ErrSchemaAhead otherwise. So an older node
// that runs `migrate up` as it starts, during a rolling upgrade, starts.
func (m *Migrator) Up(ctx context.Context) ([]int, error) {
	return m.run(ctx, func(conn *pgx.Conn, current int, ahead []appliedMigration) ([]int, error) {
		if len(ahead) > 0 {
			return nil, m.aheadError(ahead)
		}
		var done []int
		for _, mig := range m.migrations[current:] {
			err := apply(ctx, conn, mig.up, `INSERT INTO gaffer.schema_migrations (version, name, checksum, compatible_from) VALUES ($1, $2, $3, $4)`,
				mig.Version, mig.Name, mig.Checksum(), mig.CompatibleFrom)
			if err != nil {
				return done, fmt.Errorf("migration %s up: %w", mig, err)
			}
			done = append(done, mig.Version)
		}
		return done, nil
	})
}

// Down reverts the latest steps applied migrations, newest first, each
// committed on its own, and returns the versions it reverted. It refuses
// (ErrSchemaAhead) a database with migrations this set does not carry:
// their down files are in the gaffer that applied them.
func (m *Migrator) Down(ctx context.Context, steps int) ([]int, error) {
	if steps < 1 {
		return nil, fmt.Errorf("steps must be at least 1, got %d", steps)
	}
	return m.run(ctx, func(conn *pgx.Conn, current int, ahead []appliedMigration) ([]int, error) {
		if len(ahead) > 0 {
			last := ahead[len(ahead)-1]
			return nil, fmt.Errorf("%w: it is at version %d and this gaffer carries migrations up to %d; "+
				"revert with the gaffer that applied %04d_%s", ErrSchemaAhead, last.version, len(m.migrations), last.version, last.name)
		}
		var done []int
		for v := current; v > 0 && len(done) < steps; v-- {
			mig := m.migrations[v-1]
			if err := apply(ctx, conn, mig.down, `DELETE FROM gaffer.schema_migrations WHERE version = $1`, mig.Version); err != nil {
				return done, fmt.Errorf("migration %s down: %w", mig, err)
			}
			done = append(done, mig.Version)
		}
		return done, nil
	})
}

// appliedMigration is a schema_migrations row.
type appliedMigration struct {
	version        int
	name           string
	checksum       *string
	compatibleFrom *int
}

// compatibleWith says whether binaries built for schema version v work on
// a schema with this migration applied. A row without a declaration
// counts as a contract.
func (a appliedMigration) compatibleWith(v int) bool {
	return a.compatibleFrom != nil && *a.compatibleFrom <= v
}

// run calls fn on a connection holding the migration lock, after checking
// the applied migrations against this set. current is the highest applied
// version this set carries; ahead are the applied rows beyond this set.
func (m *Migrator) run(ctx context.Context, fn func(conn *pgx.Conn, current int, ahead []appliedMigration) ([]int, error)) ([]int, error) {
	pc, err := m.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer pc.Release()
	conn := pc.Conn()
	if err := takeMigrationLock(ctx, conn); err != nil {
		return nil, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLockID))
	if _, err := conn.Exec(ctx, bootstrapSQL); err != nil {
		return nil, fmt.Errorf("migrate: bootstrap: %w", err)
	}
	current, ahead, err := m.verify(ctx, conn)
	if err != nil {
		return nil, err
	}
	return fn(conn, current, ahead)
}

// takeMigrationLock takes the migration lock on conn, polling for it
// rather than waiting in pg_advisory_lock: a session blocked there sits
// in a statement, and CREATE INDEX CONCURRENTLY, run by the lock's holder,
// waits for every transaction older than its build — that one included —
// while the blocked session waits for the holder: a deadlock, which
// PostgreSQL breaks by failing one of the two.
func takeMigrationLock(ctx context.Context, conn *pgx.Conn) error {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(migrationLockID)).Scan(&ok); err != nil {
			return fmt.Errorf("migrate: take lock: %w", err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migrate: take lock: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// verify checks every applied migration this set carries against it,
// records the checksums and compatibility of rows that have none, and
// returns the highest of them and the rows beyond this set.
func (m *Migrator) verify(ctx context.Context, conn *pgx.Conn) (int, []appliedMigration, error) {
	all, err := readApplied(ctx, conn, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("migrate: %w", err)
	}
	current := 0
	var unsummed, undeclared []Migration
	var ahead []appliedMigration
	for i, a := range all {
		if a.version != i+1 {
			return 0, nil, fmt.Errorf("migrate: applied migrations are not 1 to %d: the schema_migrations table was changed by hand", len(all))
		}
		if a.version > len(m.migrations) {
			ahead = append(ahead, a)
			continue
		}
		mig := m.migrations[a.version-1]
		switch {
		case a.name != mig.Name:
			return 0, nil, fmt.Errorf("%w: the database has %04d_%s applied where this gaffer has %s", ErrMigrationEdited, a.version, a.name, mig)
		case a.checksum == nil:
			unsummed = append(unsummed, mig)
		case *a.checksum != mig.Checksum():
			return 0, nil, fmt.Errorf("%w: migration %s changed after it was applied (checksum %.12s in the database, %.12s in this gaffer); "+
				"never edit an applied migration, add a new one", ErrMigrationEdited, mig, *a.checksum, mig.Checksum())
		}
		if a.compatibleFrom == nil {
			undeclared = append(undeclared, mig)
		}
		current = a.version
	}
	for _, mig := range unsummed {
		if _, err := conn.Exec(ctx, `UPDATE gaffer.schema_migrations SET checksum = $2 WHERE version = $1 AND checksum IS NULL`,
			mig.Version, mig.Checksum()); err != nil {
			return 0, nil, fmt.Errorf("migrate: record checksum of %s: %w", mig, err)
		}
	}
	for _, mig := range undeclared {
		if _, err := conn.Exec(ctx, `UPDATE gaffer.schema_migrations SET compatible_from = $2 WHERE version = $1 AND compatible_from IS NULL`,
			mig.Version, mig.CompatibleFrom); err != nil {
			return 0, nil, fmt.Errorf("migrate: record compatibility of %s: %w", mig, err)
		}
	}
	return current, ahead, nil
}

// readApplied reads the schema_migrations rows above version from, oldest
// first. A table without the compatible_from column (no gaffer that
// records it has run on it yet) reads as having no declarations.
func readApplied(ctx context.Context, q DB, from int) ([]appliedMigration, error) {
	var hasCompat bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = 'gaffer.schema_migrations'::regclass AND attname = 'compatible_from' AND NOT attisdropped)`).Scan(&hasCompat); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	compat := "NULL::integer"
	if hasCompat {
		compat = "compatible_from"
	}
	rows, err := q.Query(ctx, `SELECT version, name, checksum, `+compat+` FROM gaffer.schema_migrations WHERE version > $1 ORDER BY version`, from)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (a appliedMigration, err error) {
		err = row.Scan(&a.version, &a.name, &a.checksum, &a.compatibleFrom)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	return all, nil
}

// aheadError is nil when binaries of this set work on a schema with the
// ahead rows applied, and otherwise an ErrSchemaAhead naming the oldest
// migration in the way and the commands that resolve it: run a gaffer
// that carries every applied migration, or have that gaffer revert down
// to below the oldest one in the way.
func (m *Migrator) aheadError(ahead []appliedMigration) error {
	for _, a := range ahead {
		if a.compatibleWith(len(m.migrations)) {
			continue
		}
		last := ahead[len(ahead)-1]
		return fmt.Errorf("%w: it is at version %d and this gaffer carries migrations up to %d; "+
			"migration %04d_%s is a contract this gaffer cannot work with; "+
			"run a gaffer that carries migration %04d, or revert with that gaffer's `gaffer migrate down --steps %d`",
			ErrSchemaAhead, last.version, len(m.migrations), a.version, a.name, last.version, last.version-a.version+1)
	}
	return nil
}

// apply runs one direction of a migration and the statement that records
// it. A transactional script and its record commit together. A
// no-transaction script runs statement by statement, each committing on
// its own, and is recorded after its last: a script that fails partway is
// run again from its first statement, which is why each must be safe to
// repeat.
func apply(ctx context.Context, conn *pgx.Conn, sc script, record string, args ...any) error {
	if !sc.noTx {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, sc.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, record, args...)
			return err
		})
	}
	for _, stmt := range sc.statements {
		if m := concurrentIndex.FindStringSubmatch(stmt); m != nil {
			if err := dropInvalidIndex(ctx, conn, m[3], indexName(m[2])); err != nil {
				return err
			}
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	_, err := conn.Exec(ctx, record, args...)
	return err
}

// dropInvalidIndex drops the index name on table if it is INVALID: what a
// failed or cancelled CREATE INDEX CONCURRENTLY leaves behind. IF NOT
// EXISTS would otherwise skip the build and leave the invalid index in
// place for good. Concurrent runs hold the migration lock, so an invalid
// index found here is no other run's build in progress.
func dropInvalidIndex(ctx context.Context, conn *pgx.Conn, table, name string) error {
	var qualified string
	err := conn.QueryRow(ctx, `SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1) AND c.relname = $2 AND NOT i.indisvalid`, table, name).Scan(&qualified)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look for an invalid index %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+qualified); err != nil {
		return fmt.Errorf("drop invalid index %s left by an earlier build: %w", qualified, err)
	}
	return nil
}

// SchemaVersion returns the highest applied migration, 0 for none.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) { return schemaVersion(ctx, s.pool) }

func schemaVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('gaffer.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM gaffer.schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Statuses lists every migration of this set and whether the database
// has it.
func (m *Migrator) Statuses(ctx context.Context) ([]MigrationStatus, error) {
	applied := map[int]time.Time{}
	var exists bool
	if err := m.pool.QueryRow(ctx, `SELECT to_regclass('gaffer.schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, err
	}
	if exists {
		rows, err := m.pool.Query(ctx, `SELECT version, applied_at FROM gaffer.schema_migrations`)
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
	out := make([]MigrationStatus, len(m.migrations))
	for i, mig := range m.migrations {
		out[i] = MigrationStatus{Version: mig.Version, Name: mig.Name, CompatibleFrom: mig.CompatibleFrom}
		if at, ok := applied[mig.Version]; ok {
			out[i].AppliedAt = &at
		}
	}
	return out, nil
}

// CheckSchema says whether this binary can work on the database's
// schema; see Migrator.CheckSchema.
func (s *Store) CheckSchema(ctx context.Context) error { return s.migrator().CheckSchema(ctx) }

// CheckSchema returns an error naming the command to run when binaries of
// this set cannot work on the database's schema: ErrSchemaBehind when it
// lacks migrations of this set, ErrSchemaAhead when it has newer ones not
// all declared compatible with this set (expand). It only reads.
func (m *Migrator) CheckSchema(ctx context.Context) error {
	v, err := schemaVersion(ctx, m.pool)
	if err != nil {
		return err
	}
	latest := len(m.migrations)
	switch {
	case v < latest:
		return fmt.Errorf("%w: it is at version %d and this gaffer needs version %d; run `gaffer migrate up`", ErrSchemaBehind, v, latest)
	case v == latest:
		return nil
	}
	ahead, err := readApplied(ctx, m.pool, latest)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	return m.aheadError(ahead)
}

// MigrationsHash identifies the exact set of embedded migrations; test
// harnesses key template databases on it.
func MigrationsHash() string {
	h := sha256.New()
	for _, m := range embeddedMigrations {
		fmt.Fprintf(h, "%d\x00%d\x00%s\x00%s\x00", m.Version, m.CompatibleFrom, m.up.sql, m.down.sql)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
