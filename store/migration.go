package store

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// A migration file may open with header lines, each "-- gaffer:" and a
// directive:
//
//   - NoTransactionMarker (up or down file) makes the runner apply that
//     file outside a transaction, one statement at a time: what CREATE
//     INDEX CONCURRENTLY needs. Statements in such a file end with a
//     semicolon at the end of a line and hold no dollar quoting.
//   - ExpandMarker (up file) declares the migration an expand: every
//     binary that worked on the schema before it keeps working after it,
//     so it may be applied while older nodes run (a rolling upgrade).
//   - CompatibleFromMarker N (up file) declares that binaries built for
//     schema version N or later keep working after it: a contract that
//     removes only what releases before N used.
//   - GeneratedMarker (up and down file) says that migrategen
//     (store/internal/migrategen) wrote the file from the difference
//     between the migrations before it and store/schema: change
//     store/schema, not the file, and regenerate it (`migrategen
//     -replace`, while no release carries it). It changes nothing in how
//     the file runs.
//
// A migration declaring neither ExpandMarker nor CompatibleFromMarker is a
// contract: only binaries that carry it work on a schema that has it
// (CheckSchema).
const (
	NoTransactionMarker  = "-- gaffer:no-transaction"
	ExpandMarker         = "-- gaffer:expand"
	CompatibleFromMarker = "-- gaffer:compatible-from"
	GeneratedMarker      = "-- gaffer:generated"
)

// Migration is one versioned schema change.
type Migration struct {
	Version int
	Name    string
	// CompatibleFrom is the oldest schema version whose binaries keep
	// working on a schema with this migration applied: Version for a
	// contract, the previous migration's CompatibleFrom for an expand.
	CompatibleFrom int
	up             script
	down           script
}

// script is one direction of a migration.
type script struct {
	sql  string
	noTx bool
	// expand and compatibleFrom are the header's declarations (up files
	// only); compatibleFrom is 0 when none was made.
	expand         bool
	compatibleFrom int
	// statements are the statements of a no-transaction script, run one
	// by one, without their comment lines.
	statements []string
}

// Checksum identifies the text of the migration's up file: what was
// applied. The down file is not covered: fixing a broken revert of a
// migration already applied is allowed.
func (m Migration) Checksum() string {
	sum := sha256.Sum256([]byte(m.up.sql))
	return hex.EncodeToString(sum[:])
}

func (m Migration) String() string { return fmt.Sprintf("%04d_%s", m.Version, m.Name) }

var (
	migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)
	// concurrentIndex matches CREATE INDEX CONCURRENTLY and captures
	// IF NOT EXISTS, the index name and the table.
	concurrentIndex = regexp.MustCompile(`(?is)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(IF\s+NOT\s+EXISTS\s+)?("[^"]+"|\w+)\s+ON\s+(?:ONLY\s+)?((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)`)
	concurrently    = regexp.MustCompile(`(?i)\bCONCURRENTLY\b`)
	dollarQuote     = regexp.MustCompile(`\$\w*\$`)
	lineComment     = regexp.MustCompile(`--[^\n]*`)
)

// undeclaredExpands are migrations written before a header could declare
// an expand, which are ones: their checksums forbid adding the line.
// 0018_node_tzdata adds a column with a constant default, which nodes of
// schema 17 neither read nor write (TestRollingUpgradeFromPreviousRelease
// runs them on it).
var undeclaredExpands = map[string]bool{"0018_node_tzdata": true}

// embeddedMigrations are the migrations built into this binary.
var embeddedMigrations = mustLoadEmbedded()

func mustLoadEmbedded() []Migration {
	dir, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	ms, err := loadMigrations(dir, undeclaredExpands)
	if err != nil {
		panic("store: " + err.Error())
	}
	return ms
}

// MigrationFiles returns the migration files built into this binary, for
// tests that extend them with migrations of their own.
func MigrationFiles() fs.FS {
	dir, _ := fs.Sub(migrationFiles, "migrations")
	return dir
}

// loadMigrations reads NNNN_name.up.sql and NNNN_name.down.sql pairs from
// the root of fsys and checks them: numbered 1, 2, 3…, both directions
// present, CONCURRENTLY only in no-transaction files, and every
// concurrent index build safe to run again.
func loadMigrations(fsys fs.FS, expands map[string]bool) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("badly named migration %s: want NNNN_name.up.sql or NNNN_name.down.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		sc, err := parseScript(string(body))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		mig := byVersion[v]
		if mig == nil {
			mig = &Migration{Version: v, Name: m[2]}
			byVersion[v] = mig
		}
		if mig.Name != m[2] {
			return nil, fmt.Errorf("migration %04d has two names: %s and %s", v, mig.Name, m[2])
		}
		if m[3] == "up" {
			mig.up = sc
		} else {
			if sc.expand || sc.compatibleFrom != 0 {
				return nil, fmt.Errorf("migration %s: %s and %s belong in the up file", e.Name(), ExpandMarker, CompatibleFromMarker)
			}
			mig.down = sc
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.up.sql == "" || m.down.sql == "" {
			return nil, fmt.Errorf("migration %s needs both up and down files", m)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	floor := 0 // the previous migration's CompatibleFrom
	for i := range out {
		m := &out[i]
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations must be numbered 1, 2, 3…; found %04d at position %d", m.Version, i+1)
		}
		switch {
		case m.up.expand || expands[m.String()]:
			m.CompatibleFrom = floor
		case m.up.compatibleFrom != 0:
			if m.up.compatibleFrom > m.Version {
				return nil, fmt.Errorf("migration %s: %s %d names a version after its own", m, CompatibleFromMarker, m.up.compatibleFrom)
			}
			m.CompatibleFrom = m.up.compatibleFrom
		default:
			m.CompatibleFrom = m.Version
		}
		floor = m.CompatibleFrom
	}
	return out, nil
}

// parseScript reads one migration file.
func parseScript(sql string) (script, error) {
	sc, err := parseHeader(sql)
	if err != nil {
		return script{}, err
	}
	if !sc.noTx {
		if concurrently.MatchString(lineComment.ReplaceAllString(sql, "")) {
			return script{}, fmt.Errorf("CONCURRENTLY cannot run in a transaction: make %q a header line (the file's first lines)", NoTransactionMarker)
		}
		return sc, nil
	}
	if dollarQuote.MatchString(sql) {
		return script{}, fmt.Errorf("a no-transaction migration holds no dollar-quoted text: put functions and DO blocks in a transactional migration")
	}
	for _, stmt := range splitStatements(sql) {
		if m := concurrentIndex.FindStringSubmatch(stmt); m != nil && m[1] == "" {
			return script{}, fmt.Errorf("write CREATE INDEX CONCURRENTLY IF NOT EXISTS %s: a failed run is run again from its first statement", m[2])
		}
		sc.statements = append(sc.statements, stmt)
	}
	if len(sc.statements) == 0 {
		return script{}, fmt.Errorf("no statements")
	}
	return sc, nil
}

// parseHeader reads the "-- gaffer:" lines a file opens with. An unknown
// directive is refused: a misspelt one would otherwise be a comment, and
// an expand taken for a contract (or a transactional file for a
// no-transaction one) is found only in production.
func parseHeader(sql string) (script, error) {
	sc := script{sql: sql}
	for _, line := range strings.Split(sql, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "-- gaffer:") {
			break
		}
		arg, isCompat := strings.CutPrefix(line, CompatibleFromMarker+" ")
		switch {
		case line == NoTransactionMarker:
			sc.noTx = true
		case line == ExpandMarker:
			sc.expand = true
		case line == GeneratedMarker:
			// Only for people and migrategen: nothing to do.
		case isCompat:
			v, err := strconv.Atoi(strings.TrimSpace(arg))
			if err != nil || v < 1 {
				return script{}, fmt.Errorf("%s needs a schema version, got %q", CompatibleFromMarker, arg)
			}
			sc.compatibleFrom = v
		default:
			return script{}, fmt.Errorf("unknown header line %q: use %s, %s, %s N or %s", line, NoTransactionMarker, ExpandMarker, CompatibleFromMarker, GeneratedMarker)
		}
	}
	if sc.expand && sc.compatibleFrom != 0 {
		return script{}, fmt.Errorf("%s and %s exclude each other", ExpandMarker, CompatibleFromMarker)
	}
	return sc, nil
}

// splitStatements splits a no-transaction script into its statements: a
// statement ends with a semicolon at the end of a line. Comment lines are
// left out.
func splitStatements(sql string) []string {
	var out []string
	var cur []string
	flush := func() {
		if s := strings.TrimSpace(strings.Join(cur, "\n")); s != "" {
			out = append(out, s)
		}
		cur = nil
	}
	for _, line := range strings.Split(sql, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(t, ";") {
			flush()
		}
	}
	flush()
	return out
}

// indexName is the name as PostgreSQL stores it: quoted names kept as
// written, others folded to lower case.
func indexName(s string) string {
	if strings.HasPrefix(s, `"`) {
		return strings.Trim(s, `"`)
	}
	return strings.ToLower(s)
}
