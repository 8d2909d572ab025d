package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/gafferhq/gaffer/internal/store"
)

func (m *Main) runMigrate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("migrate", "migrate up|down|status [flags]\n\n  up      apply every pending migration\n  down    revert the latest migration (--steps N for more)\n  status  list migrations and whether each is applied")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL connection URL: a direct one, not through a transaction-mode pooler (a run holds a session lock)")
	steps := fs.Int("steps", "", 1, "migrations to revert (down only)")
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
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tNAME\tAPPLIED")
		for _, s := range statuses {
			at := "pending"
			if s.AppliedAt != nil {
				at = s.AppliedAt.Format("2006-01-02 15:04:05Z07:00")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", fmt.Sprintf("%04d", s.Version), s.Name, at)
		}
		tw.Flush()
	}
	return nil
}
