// Package pgserver starts a private PostgreSQL server from the server
// binaries installed on the machine (initdb, postgres). Tests use it for a
// throwaway database and `gaffer dev` uses it so that nothing but Go and
// PostgreSQL's binaries is needed to run Gaffer.
//
// PostgreSQL refuses to run as root. When the calling process is root, the
// data directory is given to the "postgres" system user and the server runs
// with that user's credentials; that user must then be able to reach the
// data directory (see Config.Parent).
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gafferhq/gaffer/internal/localport"
	"github.com/gafferhq/gaffer/internal/runas"
	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is returned when initdb and postgres cannot be found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH or under /usr/lib/postgresql/*/bin: install PostgreSQL's server package, or set DATABASE_URL to use an existing server")

// Config says where and how to run the server. Zero values mean defaults.
type Config struct {
	// Dir is the data directory. Empty means a new temporary directory that
	// Stop removes. An existing, initialised directory is reused as is.
	Dir string
	// Port to listen on at 127.0.0.1. Zero picks a free port.
	Port int
	// Durable keeps fsync and synchronous_commit on. Tests leave it off:
	// a throwaway server does not need crash safety and runs much faster.
	Durable bool
	// Settings are extra server settings (name → value), e.g. shared_buffers.
	Settings map[string]string
	// LogPath receives the server's log. Empty means <Dir>/postgres.log.
	LogPath string
	// Parent, when set, is a directory of the caller's that holds Dir,
	// perhaps beside other data (gaffer dev --data keeps etcd's data next
	// to PostgreSQL's). When the server runs as the postgres user, Start
	// lets that user through Parent and the directories between it and
	// Dir: their group becomes the postgres user's, with search permission
	// only, so it can reach Dir but not list or read what lies beside it.
	// Directories above Parent (or above Dir, without Parent) are left as
	// they are: if one keeps the postgres user out, Start says which.
	Parent string
}

// Server is a running PostgreSQL server.
type Server struct {
	dir     string
	tempDir bool
	port    int
	bin     string
	args    []string
	logPath string
	cred    *syscall.Credential

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error

	stopOnce sync.Once
}

// Start initialises the data directory if needed and starts the server. It
// returns once the server accepts connections, or with the reason it did
// not. ctx bounds the start-up only; the server keeps running until Stop.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := runas.Postgres("PostgreSQL")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: cfg.Dir}
	if s.dir == "" {
		s.dir, err = os.MkdirTemp("", "gaffer-pg-")
		if err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
		s.tempDir = true
	} else if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if s.dir, err = filepath.Abs(s.dir); err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		if s.tempDir {
			os.RemoveAll(s.dir)
		}
		return nil, err
	}
	if err := letThrough(s.dir, cfg.Parent, cred); err != nil {
		return fail(err)
	}
	if err := chownForServer(s.dir, cred); err != nil {
		return fail(err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
			"-D", s.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := initdb.CombinedOutput(); err != nil {
			return fail(fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out))))
		}
	}
	s.port = cfg.Port
	if s.port == 0 {
		if s.port, err = freePort(); err != nil {
			return fail(err)
		}
	}
	settings := map[string]string{
		"listen_addresses":          "127.0.0.1",
		"port":                      strconv.Itoa(s.port),
		"unix_socket_directories":   "",
		"max_connections":           "300",
		"shared_buffers":            "128MB",
		"log_min_messages":          "warning",
		"log_line_prefix":           "%m [%p] ",
		"max_locks_per_transaction": "256",
	}
	if !cfg.Durable {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range cfg.Settings {
		settings[k] = v
	}
	args := []string{"-D", s.dir}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}
	logPath := cfg.LogPath
	if logPath == "" {
		logPath = filepath.Join(s.dir, "postgres.log")
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(fmt.Errorf("open server log: %w", err))
	}
	if cred != nil {
		os.Chown(logPath, int(cred.Uid), int(cred.Gid))
	}
	logFile.Close()
	s.bin, s.args, s.logPath, s.cred = bin, args, logPath, cred
	for attempt := 1; ; attempt++ {
		if err := s.launch(); err != nil {
			return fail(err)
		}
		err := s.waitReady(ctx, logPath)
		if err == nil {
			return s, nil
		}
		// A free port is found by listening and closing; another process
		// (a parallel test's server) can bind it first, and then our
		// postmaster exits saying so. Try a new port.
		if cfg.Port != 0 || attempt == 5 || !strings.Contains(err.Error(), "could not bind") {
			s.Stop()
			return nil, err
		}
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		for i, a := range s.args {
			if strings.HasPrefix(a, "port=") {
				s.args[i] = "port=" + strconv.Itoa(s.port)
			}
		}
	}
}

func (s *Server) launch() error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), s.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: if this process dies without stopping the server, the
	// server gets SIGQUIT (immediate shutdown) instead of being orphaned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logFile.Close()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(done)
	}()
	return nil
}

// Restart stops the server the way a crash would (immediate shutdown: no
// checkpoint, recovery on start, every session cut) and starts it again on
// the same data and port — `pg_ctl restart -m immediate`.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	<-done
	if err := s.launch(); err != nil {
		return err
	}
	return s.waitReady(ctx, s.logPath)
}

// URL is a connection string for the "postgres" superuser and database.
func (s *Server) URL() string { return s.DatabaseURL("postgres") }

// DatabaseURL is a connection string for the named database.
func (s *Server) DatabaseURL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Port is the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// Dir is the data directory.
func (s *Server) Dir() string { return s.dir }

// Stop shuts the server down (fast mode: sessions are disconnected) and
// waits for it to exit. A temporary data directory is removed. Stop is
// idempotent.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		s.mu.Lock()
		cmd, done := s.cmd, s.done
		s.mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			err = errors.New("postgres did not stop within 20s; killed")
		}
		if s.tempDir {
			os.RemoveAll(s.dir)
		}
	})
	return err
}

func (s *Server) waitReady(ctx context.Context, logPath string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			// The port may belong to another server that took it first:
			// only ours serves our data directory.
			var dir string
			err = conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir)
			conn.Close(ctx)
			if err == nil && sameDir(dir, s.dir) {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("port %d is served by another PostgreSQL (%s)", s.port, dir)
			}
		}
		s.mu.Lock()
		done, waitErr := s.done, s.waitErr
		s.mu.Unlock()
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres exited during start-up (%v): %s", waitErr, tail(string(log), 2000))
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func sameDir(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// FindBinaries returns the directory holding initdb and postgres: the PATH
// first, then the newest /usr/lib/postgresql/<version>/bin.
func FindBinaries() (string, error) {
	binOnce.Do(func() {
		if p, err := exec.LookPath("initdb"); err == nil {
			if _, err := exec.LookPath("postgres"); err == nil {
				binDir = filepath.Dir(p)
				return
			}
		}
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				binDir = d
				return
			}
		}
		binErr = ErrNoBinaries
	})
	return binDir, binErr
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// freePort finds a loopback port nobody listens on; a variable so a test
// can hand out a taken one.
var freePort = localport.Free

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
