// Package pgtest gives each test its own freshly migrated PostgreSQL
// database. The server is TEST_DATABASE_URL when set; otherwise a
// throwaway server started from the local PostgreSQL binaries, one per test
// binary, stopped by Main.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/store"
)

var (
	mu       sync.Mutex
	started  *pgserver.Server
	adminURL string
	template string
)

// Main runs the package's tests and stops the throwaway server, if one
// was started. Use it from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit, for a TestMain that has more to clean
// up: it runs the tests, stops the throwaway server and returns the code
// to exit with.
func Run(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	if started != nil {
		started.Stop()
	}
	mu.Unlock()
	return code
}

// admin returns a superuser URL on the test server, starting the server
// and the migrated template database on first use.
func admin(t testing.TB) (string, string) {
	mu.Lock()
	defer mu.Unlock()
	if adminURL == "" {
		if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
			adminURL = u
		} else {
			srv, err := pgserver.Start(context.Background(), pgserver.Config{})
			if err != nil {
				t.Fatalf("start test PostgreSQL (or set TEST_DATABASE_URL): %v", err)
			}
			started, adminURL = srv, srv.URL()
		}
	}
	if template == "" {
		name, err := ensureTemplate(adminURL)
		if err != nil {
			t.Fatalf("prepare template database: %v", err)
		}
		template = name
	}
	return adminURL, template
}

// ensureTemplate creates and migrates the template database for this set
// of migrations, once per server (an advisory lock serialises test
// binaries sharing a server).
func ensureTemplate(admin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := "gaffer_tmpl_" + store.MigrationsHash()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7243)`); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, `SELECT pg_advisory_unlock(7243)`)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	// Build under a scratch name and rename, so that a half-built
	// template left by a killed run is never used.
	scratch := name + "_build"
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+scratch+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+scratch); err != nil {
		return "", err
	}
	st, err := store.Open(ctx, withDatabase(admin, scratch), 2)
	if err != nil {
		return "", err
	}
	_, err = st.MigrateUp(ctx)
	st.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+scratch+` RENAME TO `+name); err != nil {
		return "", err
	}
	return name, nil
}

// NewDatabase creates a fresh, migrated database for t, dropped when t
// ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin, tmpl := admin(t)
	return createDatabase(t, admin, tmpl)
}

// NewEmptyDatabase creates a database with no Gaffer schema, for
// migration tests, and returns its URL.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	admin, _ := admin(t)
	return createDatabase(t, admin, "")
}

// NewStore returns a Store on a fresh, migrated database; its pool is
// closed when t ends.
func NewStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), NewDatabase(t), 20)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

func createDatabase(t testing.TB, admin, tmpl string) string {
	t.Helper()
	ctx := context.Background()
	buf := make([]byte, 6)
	rand.Read(buf)
	name := "t_" + hex.EncodeToString(buf)
	create := `CREATE DATABASE ` + name
	if tmpl != "" {
		create += ` TEMPLATE ` + tmpl
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	defer conn.Close(ctx)
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, create)
		var pgErr *pgconn.PgError
		// 55006: the template is briefly in use by a concurrent CREATE.
		if err != nil && errors.As(err, &pgErr) && pgErr.Code == "55006" && attempt < 50 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	})
	return withDatabase(admin, name)
}

func withDatabase(raw, db string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(fmt.Sprintf("pgtest: bad database URL: %v", err))
	}
	u.Path = "/" + db
	return u.String()
}
