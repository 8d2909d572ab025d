package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConnectOptions say how Gaffer connects, beyond what the URL says.
type ConnectOptions struct {
	// MaxConns caps the pool; zero keeps pgx's default.
	MaxConns int32
	// TransactionPooler says the URL reaches PostgreSQL through a
	// transaction-mode pooler (PgBouncer with pool_mode = transaction),
	// which gives each transaction whichever server connection is free.
	// Then nothing may outlive a transaction on a server connection: no
	// named prepared statements (pgx caches statement descriptions
	// instead and sends each statement unnamed, in the same round trip
	// as its execution) and no startup parameters a pooler refuses
	// (jit). LISTEN cannot work there; see Listener.
	TransactionPooler bool
}

// MultiHostConnectTimeout bounds each host's connection attempt when a
// URL names several hosts and sets no connect_timeout: a host that does
// not answer (a dead machine, a partition) would otherwise hold every new
// connection for the kernel's TCP timeout, about two minutes, before the
// next host is tried.
const MultiHostConnectTimeout = 5 * time.Second

// PoolConfig parses databaseURL into a pool configuration with Gaffer's
// defaults, and returns notes on what it chose that an operator should
// see at start-up:
//
//   - A URL naming several hosts (host=a,b or postgres://a:1,b:2/db)
//     without target_session_attrs gets read-write, so that the pool
//     connects to whichever host is the primary, and a connect_timeout of
//     MultiHostConnectTimeout unless it sets one.
//   - PostgreSQL's JIT is turned off (jit=off as a startup parameter)
//     unless the URL sets jit, or o.TransactionPooler is set.
//   - With o.TransactionPooler, statements are described and cached, not
//     prepared (default_query_exec_mode=cache_describe); a URL that asks
//     for a mode that cannot work through such a pooler is refused.
func PoolConfig(databaseURL string, o ConnectOptions) (*pgxpool.Config, []string, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("parse database URL: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	notes := connDefaults(cfg.ConnConfig, databaseURL)
	// Gaffer's queries are short and indexed; PostgreSQL's JIT, which the
	// planner turns on for any query its estimates call expensive (a
	// dashboard's capped counts over a big table), costs far more to
	// compile than it saves. A URL that sets jit decides for itself.
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set && !o.TransactionPooler {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	if o.TransactionPooler {
		explicit := strings.Contains(databaseURL, "default_query_exec_mode")
		switch mode := cfg.ConnConfig.DefaultQueryExecMode; {
		case !explicit:
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		case mode == pgx.QueryExecModeCacheStatement || mode == pgx.QueryExecModeDescribeExec:
			return nil, nil, fmt.Errorf("database URL: default_query_exec_mode=%s cannot work through a transaction pooler "+
				"(it needs one server connection across round trips); leave it out, or use cache_describe", modeName(mode))
		}
		notes = append(notes, "the database URL goes through a transaction pooler: statements are not prepared "+
			"(query mode "+modeName(cfg.ConnConfig.DefaultQueryExecMode)+"), and jit is not sent at connection; set jit = off on the role or database instead")
	}
	return cfg, notes, nil
}

// ListenConfig parses the URL of a LISTEN connection with the same
// multi-host defaults as PoolConfig. It sends no jit: the connection runs
// no queries, and a session-mode pooler would refuse the parameter.
func ListenConfig(databaseURL string) (*pgx.ConnConfig, []string, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("parse listen database URL: %w", err)
	}
	return cfg, connDefaults(cfg, databaseURL), nil
}

// connDefaults applies the multi-host defaults to cfg.
func connDefaults(cfg *pgx.ConnConfig, raw string) []string {
	hosts := hostsOf(&cfg.Config)
	if len(hosts) < 2 {
		return nil
	}
	var notes []string
	if cfg.ValidateConnect == nil && !strings.Contains(raw, "target_session_attrs") && os.Getenv("PGTARGETSESSIONATTRS") == "" {
		cfg.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
		notes = append(notes, fmt.Sprintf("the database URL names %d hosts (%s) and no target_session_attrs: connecting to whichever accepts writes (read-write)",
			len(hosts), strings.Join(hosts, ", ")))
	}
	if cfg.ConnectTimeout == 0 && !strings.Contains(raw, "connect_timeout") && os.Getenv("PGCONNECT_TIMEOUT") == "" {
		cfg.ConnectTimeout = MultiHostConnectTimeout
	}
	return notes
}

// hostsOf lists the distinct host:port pairs a configuration tries.
func hostsOf(cfg *pgconn.Config) []string {
	var out []string
	add := func(host string, port uint16) {
		if e := net.JoinHostPort(host, strconv.Itoa(int(port))); !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return out
}

func modeName(m pgx.QueryExecMode) string {
	return map[pgx.QueryExecMode]string{pgx.QueryExecModeCacheStatement: "cache_statement", pgx.QueryExecModeCacheDescribe: "cache_describe",
		pgx.QueryExecModeDescribeExec: "describe_exec", pgx.QueryExecModeExec: "exec", pgx.QueryExecModeSimpleProtocol: "simple_protocol"}[m]
}

// OpenWith connects a new pool to databaseURL, configured by PoolConfig
// and o, and checks that it answers. ctx bounds the check. A server that
// refuses the jit startup parameter (a pooler, in session mode too) is
// connected to again without it, and a note says so. Notes returns what
// an operator should see at start-up.
func OpenWith(ctx context.Context, databaseURL string, o ConnectOptions) (*Store, error) {
	cfg, notes, err := PoolConfig(databaseURL, o)
	if err != nil {
		return nil, err
	}
	pool, err := connectPool(ctx, cfg)
	if err != nil && refusedJit(err) && !strings.Contains(databaseURL, "jit") {
		delete(cfg.ConnConfig.RuntimeParams, "jit")
		notes = append(notes, "the server refused the jit startup parameter (a pooler such as PgBouncer is in the way): "+
			"connected without it; set jit = off on the role or database (ALTER ROLE … SET jit = off) to keep PostgreSQL's JIT off")
		pool, err = connectPool(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	s := &Store{pool: pool, notes: notes}
	if _, sent := cfg.ConnConfig.RuntimeParams["jit"]; !sent {
		var jit string
		if err := pool.QueryRow(ctx, "SHOW jit").Scan(&jit); err == nil && jit == "on" {
			s.warnings = append(s.warnings, "PostgreSQL's JIT is on for this database URL (it cannot be turned off at connection here): "+
				"queries the planner thinks expensive, such as the dashboard's queue depths, then spend seconds compiling; "+
				"turn it off for Gaffer's role or database: ALTER ROLE … SET jit = off")
		}
	}
	return s, nil
}

func connectPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// refusedJit reports whether err is PgBouncer's refusal of the jit
// startup parameter.
func refusedJit(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "unsupported startup parameter: jit")
}

// Notes are what Open chose or worked around that an operator should see
// at start-up (see PoolConfig); nil for a Store made with New.
func (s *Store) Notes() []string { return s.notes }

// Warnings are what Open found wrong but could start with; nil for a
// Store made with New.
func (s *Store) Warnings() []string { return s.warnings }
