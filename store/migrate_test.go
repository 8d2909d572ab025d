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
