// Package patroni runs a PostgreSQL cluster managed by Patroni — the
// failover manager operators run in front of replicated PostgreSQL — for
// tests: a primary and standbys from the local PostgreSQL binaries, each
// member a Patroni process keeping its state in an etcd given by the test
// (Patroni 3 speaks etcd's v3 HTTP/JSON gateway, its "etcd3" section).
//
// PostgreSQL and Patroni refuse to run as root. When the calling process
// is root, the directories are given to the "postgres" system user and
// Patroni (and so PostgreSQL) runs with that user's credentials.
package patroni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/internal/localport"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/internal/runas"
)

// ErrNotInstalled is returned when the patroni command cannot be found.
var ErrNotInstalled = errors.New("patroni not found on PATH: install it (Debian: apt-get install patroni)")

// Config shapes a cluster. Zero values mean the defaults shown.
type Config struct {
	// Etcd are etcd client URLs (http://127.0.0.1:2379). Required.
	Etcd []string
	// Scope names the cluster in etcd, under /patroni/. Default "gaffer".
	Scope string
	// Members is how many PostgreSQL servers run. Default 2.
	Members int
	// Asynchronous turns Patroni's synchronous_mode off: commits are
	// acknowledged before a standby has them. Default: synchronous.
	Asynchronous bool
	// TTL is Patroni's leader lock TTL: how long a dead primary keeps the
	// lock before a standby may take over. Default 10s.
	TTL time.Duration
	// ReplicationLatency, when set, delays the WAL stream (each member's
	// replication connections go through a proxy adding this in both
	// directions), as a standby in another zone would see it.
	ReplicationLatency time.Duration
	// Settings are extra PostgreSQL settings.
	Settings map[string]string
	// Logf receives progress lines (the test's t.Logf). Default: none.
	Logf func(format string, args ...any)
}

// Cluster is a running Patroni cluster.
type Cluster struct {
	cfg     Config
	dir     string
	bin     string
	Members []*Member
}

// Member is one Patroni process and the PostgreSQL it manages.
type Member struct {
	Name     string
	Port     int // PostgreSQL, on 127.0.0.1
	RestPort int // Patroni's REST API, on 127.0.0.1
	dir      string
	config   string
	cred     *syscall.Credential
	proxy    *faultproxy.Proxy // the replication path to this member, with ReplicationLatency

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
}

// Start starts every member and returns once one is primary and, unless
// Asynchronous, a standby is synchronous (Patroni lists it as
// sync_standby): only then are acknowledged commits on two servers.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	bin, err := exec.LookPath("patroni")
	if err != nil {
		return nil, ErrNotInstalled
	}
	pgBin, err := pgserver.FindBinaries()
	if err != nil {
		return nil, err
	}
	// Patroni wants pg_ctl, pg_basebackup, pg_rewind and the rest beside
	// initdb, which the PATH may hold as a lone symlink.
	if real, err := filepath.EvalSymlinks(filepath.Join(pgBin, "initdb")); err == nil {
		pgBin = filepath.Dir(real)
	}
	if len(cfg.Etcd) == 0 {
		return nil, errors.New("patroni: Config.Etcd is required")
	}
	if cfg.Scope == "" {
		cfg.Scope = "gaffer"
	}
	if cfg.Members == 0 {
		cfg.Members = 2
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	cred, err := runas.Postgres("Patroni")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gaffer-patroni-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, dir: dir, bin: bin}
	if err := runas.Chown(dir, cred); err != nil {
		c.Stop()
		return nil, err
	}
	for i := range cfg.Members {
		m := &Member{Name: fmt.Sprintf("pg%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("pg%d", i+1)), cred: cred}
		if m.Port, err = localport.Free(); err != nil {
			c.Stop()
			return nil, err
		}
		if m.RestPort, err = localport.Free(); err != nil {
			c.Stop()
			return nil, err
		}
		if m.proxy, err = faultproxy.Start(fmt.Sprintf("127.0.0.1:%d", m.Port)); err != nil {
			c.Stop()
			return nil, err
		}
		m.proxy.SetDelay(cfg.ReplicationLatency)
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			c.Stop()
			return nil, err
		}
		m.config = filepath.Join(m.dir, "patroni.yml")
		if err := os.WriteFile(m.config, []byte(c.memberConfig(m, pgBin)), 0o600); err != nil {
			c.Stop()
			return nil, err
		}
		if err := runas.Chown(m.dir, cred); err != nil {
			c.Stop()
			return nil, err
		}
		c.Members = append(c.Members, m)
	}
	// The first member bootstraps the cluster; the others clone it.
	if err := c.Members[0].start(c.bin); err != nil {
		c.Stop()
		return nil, err
	}
	if _, err := c.WaitPrimary(ctx, nil); err != nil {
		c.Stop()
		return nil, err
	}
	for _, m := range c.Members[1:] {
		if err := m.start(c.bin); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitReplicas(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// memberConfig is the Patroni configuration of m.
func (c *Cluster) memberConfig(m *Member, pgBin string) string {
	var etcd []string
	for _, e := range c.cfg.Etcd {
		etcd = append(etcd, strconv.Quote(strings.TrimPrefix(strings.TrimPrefix(e, "http://"), "https://")))
	}
	ttl := int(c.cfg.TTL / time.Second)
	params := map[string]string{
		"max_connections":    "200",
		"shared_buffers":     "128MB",
		"max_wal_senders":    "10",
		"wal_keep_size":      "256MB",
		"wal_log_hints":      "on",
		"synchronous_commit": "on",
		// The test kills processes, not the machine: the page cache
		// survives, so fsync buys nothing here but time.
		"fsync":            "off",
		"full_page_writes": "on",
		"log_min_messages": "warning",
		"log_line_prefix":  strconv.Quote("%m [%p] "),
	}
	for k, v := range c.cfg.Settings {
		params[k] = v
	}
	var p strings.Builder
	for k, v := range params {
		fmt.Fprintf(&p, "      %s: %s\n", k, v)
	}
	return fmt.Sprintf(`scope: %s
namespace: /patroni/
name: %s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%d
  connect_address: 127.0.0.1:%d
etcd3:
  hosts: [%s]
  protocol: http
bootstrap:
  dcs:
    ttl: %d
    loop_wait: 1
    retry_timeout: %d
    maximum_lag_on_failover: 16777216
    synchronous_mode: %v
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
%s  initdb:
  - encoding: UTF8
  - locale: C
  - auth: trust
  pg_hba:
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%d
  connect_address: %s
  data_dir: %s
  bin_dir: %s
  pgpass: %s
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
  parameters:
    unix_socket_directories: %s
watchdog:
  mode: off
`, c.cfg.Scope, m.Name, m.RestPort, m.RestPort, strings.Join(etcd, ", "), ttl, max(1, (ttl-1)/2), !c.cfg.Asynchronous,
		p.String(), m.Port, m.proxy.Addr(), filepath.Join(m.dir, "data"), pgBin, filepath.Join(m.dir, "pgpass"), strconv.Quote(m.dir))
}

func (m *Member) start(bin string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(m.dir, "patroni.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, m.config)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), "HOME="+m.dir)
	cmd.Stdout, cmd.Stderr = log, log
	// Pdeathsig: a test killed outright stops Patroni, and Patroni stops
	// its PostgreSQL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.cred, Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start patroni %s: %w", m.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	m.cmd, m.exited, m.log = cmd, exited, log
	return nil
}

// Restart starts a killed member's Patroni again on its data: it rejoins
// as a standby (rewound, or cloned afresh when it cannot be).
func (c *Cluster) Restart(m *Member) error { return m.start(c.bin) }

// Kill SIGKILLs the member's Patroni and every process of its PostgreSQL
// at once, as a machine that dies would lose them, and waits for Patroni
// to be gone.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	m.killPostgres(syscall.SIGKILL)
	if exited != nil {
		<-exited
	}
	if m.log != nil {
		m.log.Close()
	}
}

// CrashPostgres kills the member's PostgreSQL (not Patroni) at once,
// every process of it: Patroni sees it gone and starts it again.
func (m *Member) CrashPostgres() { m.killPostgres(syscall.SIGKILL) }

// killPostgres signals the postmaster's process group (Patroni starts
// PostgreSQL in a session of its own, so the group is the postmaster and
// its backends).
func (m *Member) killPostgres(sig syscall.Signal) {
	b, err := os.ReadFile(filepath.Join(m.dir, "data", "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 {
		syscall.Kill(-pgid, sig)
	}
	syscall.Kill(pid, sig)
}

// Dir holds every member's directory (its patroni.log and data).
func (c *Cluster) Dir() string { return c.dir }

// URL is a multi-host connection URL for database db naming every
// member, with extra appended to its query (e.g.
// "target_session_attrs=read-write").
func (c *Cluster) URL(db, extra string) string {
	var hosts []string
	for _, m := range c.Members {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", m.Port))
	}
	u := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", strings.Join(hosts, ","), db)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

// MemberURL is a connection URL for database db on m alone.
func (m *Member) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", m.Port, db)
}

// Log returns the member's Patroni log (PostgreSQL's goes to its data
// directory's log/).
func (m *Member) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "patroni.log"))
	return string(b)
}

// Stop kills every member and removes the cluster's directories.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		m.Kill()
		if m.proxy != nil {
			m.proxy.Close()
		}
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// Require skips t where patroni is not installed, or fails it when
// GAFFER_REQUIRE_PATRONI is set (CI installs it, so there a missing
// patroni is a broken set-up, not a reason to skip).
func Require(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("patroni"); err == nil {
		return
	}
	if os.Getenv("GAFFER_REQUIRE_PATRONI") != "" {
		t.Fatalf("GAFFER_REQUIRE_PATRONI is set and %v", ErrNotInstalled)
	}
	t.Skipf("skipped: %v (set GAFFER_REQUIRE_PATRONI=1 to fail instead)", ErrNotInstalled)
}
