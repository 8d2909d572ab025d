package tzdata

import (
	"crypto/sha256"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The embedded zip is the one gen.go recorded, so Version names its data.
func TestVersionDescribesTheEmbeddedZip(t *testing.T) {
	if got := fmt.Sprintf("%x", sha256.Sum256(zoneinfoZip)); got != zipSHA256 {
		t.Fatalf("zoneinfo.zip has SHA-256 %s, version.go records %s: run go generate ./internal/tzdata", got, zipSHA256)
	}
	if !regexp.MustCompile(`^\d{4}[a-z]$`).MatchString(Version) {
		t.Fatalf("Version %q is not an IANA release name", Version)
	}
}

func TestLoadLocation(t *testing.T) {
	ny, err := LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-08 02:00 EST jumps to 03:00 EDT, at 07:00Z.
	for _, c := range []struct {
		at   string
		name string
		off  int
	}{{"2026-03-08T06:59:59Z", "EST", -5 * 3600}, {"2026-03-08T07:00:00Z", "EDT", -4 * 3600}, {"2026-11-01T06:00:00Z", "EST", -5 * 3600}} {
		at, _ := time.Parse(time.RFC3339, c.at)
		if name, off := at.In(ny).Zone(); name != c.name || off != c.off {
			t.Errorf("%s in New York: %s %d, want %s %d", c.at, name, off, c.name, c.off)
		}
	}
	if ny.String() != "America/New_York" {
		t.Errorf("name %q", ny)
	}
	if again, _ := LoadLocation("America/New_York"); again != ny {
		t.Error("a second load did not come from the cache")
	}
	for _, utc := range []string{"", "UTC"} {
		if loc, err := LoadLocation(utc); err != nil || loc != time.UTC {
			t.Errorf("LoadLocation(%q) = %v, %v; want UTC", utc, loc, err)
		}
	}
	for _, bad := range []string{"Local", "Mars/Olympus", "america/new_york", "../../etc/passwd", "/usr/share/zoneinfo/UTC", "America/", "America"} {
		if loc, err := LoadLocation(bad); err == nil {
			t.Errorf("LoadLocation(%q) = %v, want an error", bad, loc)
		}
	}
	if _, err := LoadLocation("Europe/Kyiv"); err != nil {
		t.Errorf("a zone added in 2022: %v", err)
	}
}

func TestLoadLocationConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	locs := make([]*time.Location, 16)
	for i := range locs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			locs[i], _ = LoadLocation("Asia/Kolkata")
		}()
	}
	wg.Wait()
	for _, l := range locs {
		if l == nil || l != locs[0] {
			t.Fatalf("concurrent loads: %v", locs)
		}
	}
}

func TestDisagreement(t *testing.T) {
	type node struct {
		id, version string
		live        bool
	}
	describe := func(n node) (string, string, bool) { return n.id, n.version, n.live }
	if got := Disagreement([]node{{"a", "2025c", true}, {"b", "2025c", true}, {"gone", "2024a", false}}, describe); got != "" {
		t.Errorf("agreeing live nodes: %q", got)
	}
	if got := Disagreement(nil, describe); got != "" {
		t.Errorf("no nodes: %q", got)
	}
	got := Disagreement([]node{{"b", "2025c", true}, {"a", "2025c", true}, {"c", "2024a", true}, {"d", "", true}, {"gone", "2023c", false}}, describe)
	if strings.Contains(got, "gone") {
		t.Errorf("a node that left counts: %q", got)
	}
	for _, want := range []string{"tzdata 2024a on c; tzdata 2025c on a, b", "unknown (an older gaffer: its OS's rules) on d", "different time zone rules"} {
		if !strings.Contains(got, want) {
			t.Errorf("Disagreement = %q, want it to contain %q", got, want)
		}
	}
}

// Every zone the module loads comes from here: no non-test Go file calls
// time.LoadLocation, which prefers $ZONEINFO and the OS.
func TestNothingElseLoadsZones(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && sel.Sel.Name == "LoadLocation" {
					t.Errorf("%s: time.%s: load zones with tzdata.LoadLocation (or cron.LoadLocation)", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
