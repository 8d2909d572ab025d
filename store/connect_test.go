package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/store"
)

// The defaults PoolConfig adds, and what it leaves to the URL.
func TestPoolConfigDefaults(t *testing.T) {
	cases := []struct {
		name, url  string
		pooler     bool
		readWrite  bool
		timeout    time.Duration
		mode       pgx.QueryExecMode
		jit        string
		note, fail string
	}{
		{name: "one host", url: "postgres://u@a:5432/db", mode: pgx.QueryExecModeCacheStatement, jit: "off"},
		{name: "URL with two hosts", url: "postgres://u@a:5432,b:5433/db", readWrite: true, timeout: store.MultiHostConnectTimeout,
			mode: pgx.QueryExecModeCacheStatement, jit: "off", note: "names 2 hosts (a:5432, b:5433)"},
		{name: "keyword form with two hosts", url: "host=a,b port=5432,5433 dbname=db", readWrite: true, timeout: store.MultiHostConnectTimeout,
			mode: pgx.QueryExecModeCacheStatement, jit: "off", note: "read-write"},
		{name: "two hosts, any server and a timeout asked for", url: "postgres://u@a,b/db?target_session_attrs=any&connect_timeout=2",
			timeout: 2 * time.Second, mode: pgx.QueryExecModeCacheStatement, jit: "off"},
		{name: "jit set by the URL", url: "postgres://u@a/db?jit=on", mode: pgx.QueryExecModeCacheStatement, jit: "on"},
		{name: "transaction pooler", url: "postgres://u@pgbouncer:6432/db", pooler: true, mode: pgx.QueryExecModeCacheDescribe, note: "not prepared"},
		{name: "transaction pooler, exec mode asked for", url: "postgres://u@pgbouncer/db?default_query_exec_mode=exec", pooler: true,
			mode: pgx.QueryExecModeExec, note: "query mode exec"},
		{name: "transaction pooler, prepared statements asked for", url: "postgres://u@pgbouncer/db?default_query_exec_mode=cache_statement",
			pooler: true, fail: "cannot work through a transaction pooler"},
		{name: "transaction pooler, describe_exec asked for", url: "postgres://u@pgbouncer/db?default_query_exec_mode=describe_exec",
			pooler: true, fail: "cannot work through a transaction pooler"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PGTARGETSESSIONATTRS", "")
			t.Setenv("PGCONNECT_TIMEOUT", "")
			cfg, notes, err := store.PoolConfig(c.url, store.ConnectOptions{TransactionPooler: c.pooler})
			if c.fail != "" {
				if err == nil || !strings.Contains(err.Error(), c.fail) {
					t.Fatalf("err %v, want %q", err, c.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cc := cfg.ConnConfig
			if got := cc.ValidateConnect != nil; got != c.readWrite {
				t.Errorf("read-write check %v, want %v", got, c.readWrite)
			}
			if cc.ConnectTimeout != c.timeout {
				t.Errorf("connect timeout %s, want %s", cc.ConnectTimeout, c.timeout)
			}
			if cc.DefaultQueryExecMode != c.mode {
				t.Errorf("query mode %s, want %s", cc.DefaultQueryExecMode, c.mode)
			}
			if got := cc.RuntimeParams["jit"]; got != c.jit {
				t.Errorf("jit startup parameter %q, want %q", got, c.jit)
			}
			if all := strings.Join(notes, "\n"); c.note != "" && !strings.Contains(all, c.note) || c.note == "" && all != "" {
				t.Errorf("notes %q, want %q", notes, c.note)
			}
		})
	}
}
