package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gafferhq/gaffer/store"
)

func (m *Main) runMigrate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("migrate", "migrate up|down|status [flags]\n\n  up      apply every pending migration\n  down    revert the latest migration (--steps N for more)\n  status  list migrations and whether each is applied")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL connection URL: a direct one, not through a transaction-mode pooler (a run holds a session lock)")
	steps := fs.Int("steps", "", 1, "migrations to revert (down only)")
	asJSON := fs.Bool("json", "-", false, "status: print JSON instead of a table")
	fs.choices = []string{"up", "down", "status"}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageError("migrate needs exactly one of: up, down, status")
	}
	switch fs.Arg(0) {
	case "up", "down", "status":
	default:
		fs.Usage()
		return usageError("unknown migrate action " + strconv.Quote(fs.Arg(0)) + ": use up, down or status")
	}
	if *steps < 1 {
		return usageError(fmt.Sprintf("--steps must be at least 1, got %d", *steps))
	}
	if *dbURL == "" {
		return usageError("--database-url (or $DATABASE_URL) is required")
	}
	st, err := store.Open(ctx, *dbURL, 2)
	if err != nil {
		return err
	}
	defer st.Close()
	switch fs.Arg(0) {
	case "up":
		// Each migration commits on its own: report what landed, also
		// before a failure.
		done, err := st.MigrateUp(ctx)
		for _, v := range done {
			fmt.Fprintf(m.Stdout, "applied %04d\n", v)
		}
		if err != nil {
			return err
		}
		if len(done) == 0 {
			v, err := st.SchemaVersion(ctx)
			if err != nil {
				return err
			}
			if v > store.LatestVersion() {
				// A newer gaffer migrated it, with expands only: this one
				// works on it as it is (a rolling upgrade in progress).
				fmt.Fprintf(m.Stdout, "schema is at version %d, ahead of this gaffer (%d); the migrations after %d are compatible with it\n",
					v, store.LatestVersion(), store.LatestVersion())
				return nil
			}
			fmt.Fprintf(m.Stdout, "schema is up to date (version %d)\n", store.LatestVersion())
		}
	case "down":
		done, err := st.MigrateDown(ctx, *steps)
		for _, v := range done {
			fmt.Fprintf(m.Stdout, "reverted %04d\n", v)
		}
		if err != nil {
			return err
		}
		if len(done) == 0 {
			fmt.Fprintln(m.Stdout, "nothing to revert")
		}
	case "status":
		statuses, err := st.MigrationStatuses(ctx)
		if err != nil {
			return err
		}
		rows := make([]migrationRow, len(statuses))
		for i, s := range statuses {
			rows[i] = migrationRow{Version: s.Version, Name: s.Name, Applied: s.AppliedAt != nil, AppliedAt: s.AppliedAt,
				CompatibleFrom: s.CompatibleFrom}
		}
		return printRows(m, *asJSON, rows, table[migrationRow]{
			header: "VERSION\tNAME\tAPPLIED\tCOMPATIBLE FROM",
			row: func(s migrationRow) []any {
				at := "pending"
				if s.AppliedAt != nil {
					at = m.fmtTime(s.AppliedAt)
				}
				return []any{fmt.Sprintf("%04d", s.Version), s.Name, at, fmt.Sprintf("%04d", s.CompatibleFrom)}
			},
		})
	}
	return nil
}

// migrationRow is a migration as migrate status shows it.
type migrationRow struct {
	Version   int        `json:"version"`
	Name      string     `json:"name"`
	Applied   bool       `json:"applied"`
	AppliedAt *time.Time `json:"applied_at"`
	// CompatibleFrom is the oldest schema version whose nodes keep
	// working once it is applied: a rolling upgrade from schema V is
	// possible when every pending migration has it at V or below.
	CompatibleFrom int `json:"compatible_from"`
}
