package store_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

var functionDef = regexp.MustCompile(`(?s)CREATE (?:OR REPLACE )?FUNCTION gaffer\.(\w+)\(.*?\$\$(.*?)\$\$`)

// Reverting the latest migration puts back every function it replaced as
// the migration before it wrote it, and drops the functions it added.
func TestMigrateDownRestoresFunctions(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("migrations/*.up.sql")
	if err != nil || len(files) != store.LatestVersion() {
		t.Fatalf("%d up migrations on disk, %d embedded: %v", len(files), store.LatestVersion(), err)
	}
	sort.Strings(files)
	bodies := func(file string) map[string]string {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, m := range functionDef.FindAllStringSubmatch(string(src), -1) {
			out[m[1]] = m[2]
		}
		return out
	}
	latest := bodies(files[len(files)-1])
	if len(latest) == 0 {
		t.Skip("the latest migration defines no function")
	}
	before := map[string]string{} // each function as the migrations before the latest left it
	for _, f := range files[:len(files)-1] {
		for name, body := range bodies(f) {
			before[name] = body
		}
	}

	ctx := context.Background()
	st := pgtest.NewStore(t)
	if _, err := st.MigrateDown(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for name := range latest {
		var src string
		err := st.Pool().QueryRow(ctx, `SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = 'gaffer' AND p.proname = $1`, name).Scan(&src)
		want, existed := before[name]
		switch {
		case !existed && err == nil:
			t.Errorf("gaffer.%s, added by the latest migration, survives its down", name)
		case existed && err != nil:
			t.Errorf("gaffer.%s after down: %v", name, err)
		case existed && src != want:
			t.Errorf("gaffer.%s after down differs from the previous migrations' text:\n%s", name, src)
		}
	}
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
