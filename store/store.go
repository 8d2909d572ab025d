package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned when a row the caller named does not exist (or
// belongs to another tenant).
var ErrNotFound = errors.New("not found")

// ErrConflict: a concurrent change got there first; retrying may succeed.
var ErrConflict = errors.New("conflict")

// isUniqueViolation reports whether err is PostgreSQL's unique_violation.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// DB is what the store needs from a connection: a pool or a transaction.
// Passing the caller's pgx.Tx makes a write part of that transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store is Gaffer's PostgreSQL access layer. All SQL lives here. A Store
// is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	notes    []string
	warnings []string
}

// New wraps an existing pool. The caller keeps ownership of the pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Open connects a new pool to databaseURL and checks that it answers
// (OpenWith with only MaxConns set).
func Open(ctx context.Context, databaseURL string, maxConns int32) (*Store, error) {
	return OpenWith(ctx, databaseURL, ConnectOptions{MaxConns: maxConns})
}

// Pool returns the underlying connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// db returns the caller's transaction, or the pool when it is nil.
func (s *Store) db(q DB) DB {
	if q == nil {
		return s.pool
	}
	return q
}

//go:embed queries/*.sql
var queryFiles embed.FS

var (
	queryHeader = regexp.MustCompile(`(?m)^-- name: ([a-z0-9_]+)\s*$`)
	queryMacro  = regexp.MustCompile(`\{\{job(?::([a-z_]+))?\}\}`)
	queries     = mustLoadQueries()
)

// jobColumns are the columns scanJob reads, in its order.
var jobColumns = []string{
	"id", "tenant", "kind", "queue", "state", "priority", "attempt", "max_attempts",
	"timeout_ms", "run_at", "created_at", "attempted_at", "finalized_at", "lease_token",
	"lease_expires_at", "cancel_requested", "node", "unique_key", "replay_of", "args", "result", "errors",
	"cron_entry", "cron_at", "workflow_run", "step", "inputs", "fairness_key", "limit_key",
	"traceparent", "tracestate", "inputs_from", "uncounted_attempts", "sequence_key", "sequence_halt", "tags",
}

// jobZero is a row of jobColumns' types that no job has (id 0): the
// {{job:zero}} macro, for a statement that must return a row of job
// columns when no job is there (the claim's trailer).
var jobZero = []string{
	"0::bigint", "''::text", "''::text", "''::text", "''::text", "0::smallint", "0::integer", "0::integer",
	"0::bigint", "'epoch'::timestamptz", "'epoch'::timestamptz", "NULL::timestamptz", "NULL::timestamptz", "NULL::bigint",
	"NULL::timestamptz", "false", "NULL::text", "NULL::text", "NULL::bigint", "'{}'::json", "NULL::json", "'[]'::jsonb",
	"NULL::text", "NULL::timestamptz", "NULL::bigint", "NULL::text", "NULL::json", "''::text", "NULL::text",
	"NULL::text", "NULL::text", "NULL::bigint[]", "0::integer", "NULL::text", "false", "NULL::text[]",
}

func mustLoadQueries() map[string]string {
	out := map[string]string{}
	err := fs.WalkDir(queryFiles, "queries", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := queryFiles.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(body)
		idx := queryHeader.FindAllStringSubmatchIndex(text, -1)
		for i, m := range idx {
			end := len(text)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			name := text[m[2]:m[3]]
			if _, dup := out[name]; dup {
				return fmt.Errorf("query %q defined twice", name)
			}
			out[name] = expandJobColumns(strings.TrimSpace(text[m[1]:end]))
		}
		return nil
	})
	if err != nil {
		panic("store: load queries: " + err.Error())
	}
	return out
}

func expandJobColumns(sql string) string {
	return queryMacro.ReplaceAllStringFunc(sql, func(m string) string {
		alias := queryMacro.FindStringSubmatch(m)[1]
		if alias == "zero" {
			return strings.Join(jobZero, ", ")
		}
		if alias == "" {
			return strings.Join(jobColumns, ", ")
		}
		cols := make([]string, len(jobColumns))
		for i, c := range jobColumns {
			cols[i] = alias + "." + c
		}
		return strings.Join(cols, ", ")
	})
}

// query returns the named query; a missing name panics at package init,
// because every use is a package-level variable.
func query(name string) string {
	q, ok := queries[name]
	if !ok {
		panic("store: no query named " + name)
	}
	return q
}

// IdleInTxTimeout bounds how long the server keeps one of Gaffer's own
// transactions open while its client sends nothing. A node paused
// (SIGSTOP, a VM freeze) between a transaction's statements would
// otherwise hold the row locks it took for as long as it stays paused, and
// every other node's SKIP LOCKED claim and rescue would pass those jobs
// by; past this bound the server ends the session and releases them.
const IdleInTxTimeout = 5 * time.Second

// guarded begins Gaffer's own transactions, with IdleInTxTimeout set in
// the same round trip as BEGIN.
var guarded = pgx.TxOptions{BeginQuery: fmt.Sprintf("BEGIN; SET LOCAL idle_in_transaction_session_timeout = %d", IdleInTxTimeout.Milliseconds())}

// InTx runs fn in a transaction, committing if fn returns nil. The
// transaction is bounded by IdleInTxTimeout.
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, guarded, fn)
}

// Begin starts a transaction bounded by IdleInTxTimeout, for callers that
// commit it themselves.
func (s *Store) Begin(ctx context.Context) (pgx.Tx, error) { return s.pool.BeginTx(ctx, guarded) }

// begin opens a transaction inside q, or a bounded one when q is nil. In
// the caller's transaction it is a savepoint, and the caller's settings
// stand.
func (s *Store) begin(ctx context.Context, q DB) (pgx.Tx, error) {
	if q == nil {
		return s.Begin(ctx)
	}
	return q.Begin(ctx)
}

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
