// Package pgbouncer runs a PgBouncer — the connection pooler most
// production PostgreSQL sits behind — in front of a test's PostgreSQL.
//
// PgBouncer refuses to run as root. When the calling process is root, its
// directory is given to the "postgres" system user and it runs with that
// user's credentials.
package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/localport"
	"github.com/gafferhq/gaffer/internal/runas"
	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is returned when the pgbouncer command cannot be found.
var ErrNotInstalled = errors.New("pgbouncer not found on PATH or in /usr/sbin: install it (Debian: apt-get install pgbouncer)")

// Config shapes a PgBouncer. Zero values mean the defaults shown.
type Config struct {
	// Target is the PostgreSQL server, host:port. Required. Every
	// database name is passed through to it.
	Target string
	// PoolMode is session, transaction or statement. Default transaction.
	PoolMode string
	// PoolSize is the most server connections per database and user.
	// Default 5.
	PoolSize int
	// Settings are extra [pgbouncer] settings.
	Settings map[string]string
}

// Server is a running PgBouncer.
type Server struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
}

// Find returns the pgbouncer command.
func Find() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	// Debian installs it in /usr/sbin, off an ordinary user's PATH.
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", ErrNotInstalled
}

// Start runs a PgBouncer on a free loopback port and returns once it
// answers. ctx bounds the start-up.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: Config.Target: %w", err)
	}
	if cfg.PoolMode == "" {
		cfg.PoolMode = "transaction"
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 5
	}
	cred, err := runas.Postgres("PgBouncer")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gaffer-pgbouncer-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	settings := map[string]string{
		"listen_addr":        "127.0.0.1",
		"unix_socket_dir":    "",
		"auth_type":          "trust",
		"auth_file":          filepath.Join(dir, "userlist.txt"),
		"pool_mode":          cfg.PoolMode,
		"max_client_conn":    "1000",
		"default_pool_size":  strconv.Itoa(cfg.PoolSize),
		"logfile":            filepath.Join(dir, "pgbouncer.log"),
		"log_connections":    "0",
		"log_disconnections": "0",
	}
	for k, v := range cfg.Settings {
		settings[k] = v
	}
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(`"postgres" ""`+"\n"), 0o600); err != nil {
		return nil, s.fail(err)
	}
	for attempt := 1; ; attempt++ {
		if s.port, err = localport.Free(); err != nil {
			return nil, s.fail(err)
		}
		settings["listen_port"] = strconv.Itoa(s.port)
		var ini strings.Builder
		fmt.Fprintf(&ini, "[databases]\n* = host=%s port=%s\n[pgbouncer]\n", host, port)
		for k, v := range settings {
			fmt.Fprintf(&ini, "%s = %s\n", k, v)
		}
		conf := filepath.Join(dir, "pgbouncer.ini")
		if err := os.WriteFile(conf, []byte(ini.String()), 0o600); err != nil {
			return nil, s.fail(err)
		}
		if err := runas.Chown(dir, cred); err != nil {
			return nil, s.fail(err)
		}
		cmd := exec.Command(bin, conf)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, s.fail(fmt.Errorf("start pgbouncer: %w", err))
		}
		s.cmd, s.exited = cmd, make(chan struct{})
		go func(exited chan struct{}) { cmd.Wait(); close(exited) }(s.exited)
		err = s.waitReady(ctx)
		if err == nil {
			return s, nil
		}
		s.kill()
		// Another process may take the free port first: try another.
		if attempt == 5 || !strings.Contains(s.Log(), "Address already in use") {
			return nil, s.fail(err)
		}
	}
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1")
			conn.Close(ctx)
			if err == nil {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("pgbouncer exited during start-up: %s", s.Log())
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer did not answer: %w: %s", err, s.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addr is host:port to connect to.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// URL is a connection URL for database db through the pooler.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Log returns PgBouncer's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "pgbouncer.log"))
	return string(b)
}

// Stop stops PgBouncer and removes its directory.
func (s *Server) Stop() {
	s.kill()
	os.RemoveAll(s.dir)
}

func (s *Server) kill() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
}

func (s *Server) fail(err error) error {
	s.Stop()
	return err
}

// Require skips t where pgbouncer is not installed, or fails it when
// GAFFER_REQUIRE_PGBOUNCER is set (CI installs it, so there a missing
// pgbouncer is a broken set-up, not a reason to skip).
func Require(t testing.TB) {
	t.Helper()
	if _, err := Find(); err == nil {
		return
	}
	if os.Getenv("GAFFER_REQUIRE_PGBOUNCER") != "" {
		t.Fatalf("GAFFER_REQUIRE_PGBOUNCER is set and %v", ErrNotInstalled)
	}
	t.Skipf("skipped: %v (set GAFFER_REQUIRE_PGBOUNCER=1 to fail instead)", ErrNotInstalled)
}
