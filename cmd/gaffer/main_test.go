package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

func TestMain(m *testing.M) {
	// The end-to-end tests run this test binary as the gaffer command.
	if os.Getenv("GAFFER_E2E_MAIN") != "" {
		main()
		os.Exit(0)
	}
	// The remote worker tests run it as a remote worker process.
	if os.Getenv("GAFFER_E2E_REMOTE_WORKER") != "" {
		os.Exit(runRemoteWorker())
	}
	pgtest.Main(m)
}

func run(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
	err = m.Run(context.Background(), args)
	return out.String(), errOut.String(), err
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "no command given"},
		{[]string{"frobnicate"}, nil, `unknown command "frobnicate"`},
		{[]string{"migrate"}, nil, "exactly one of: up, down, status"},
		{[]string{"migrate", "up"}, nil, "--database-url (or $DATABASE_URL) is required"},
		{[]string{"migrate", "sideways", "--database-url", "postgres://127.0.0.1:1/x"}, nil, `unknown migrate action "sideways"`},
		{[]string{"server"}, nil, "--database-url (or $DATABASE_URL) is required"},
		{[]string{"server", "--database-url", "postgres://127.0.0.1:1/x", "--queues", "mail=0"}, nil, "concurrency must be a positive integer"},
		{[]string{"server", "--database-url", "postgres://127.0.0.1:1/x", "--queues", "a=1,a=2"}, nil, "listed twice"},
		{[]string{"server", "--database-url", "postgres://127.0.0.1:1/x", "--lease-ttl", "-1s"}, nil, "--lease-ttl must be positive"},
		{[]string{"server", "--database-url", "postgres://127.0.0.1:1/x", "--log-level", "loud"}, nil, `unknown level "loud"`},
		{[]string{"server"}, map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x", "GAFFER_LEASE_TTL": "soon"}, "$GAFFER_LEASE_TTL"},
		{[]string{"server", "--database-url", "postgres://127.0.0.1:1/x", "--webhook-allow", "10.0.0.0/8,*.internal"}, nil, `--webhook-allow: allow entry "*.internal"`},
		{[]string{"server"}, map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x", "GAFFER_WEBHOOK_ALLOW": "2130706433"}, "--webhook-allow"},
		{[]string{"dev", "--webhook-allow", "hooks:99999"}, nil, `allow entry "hooks:99999"`},
		{[]string{"server", "--database-url", "postgres://127.0.0.1:1/x", "--own-hosts", "203.0.113.7,10.0.0.0/8"}, nil, `--own-hosts: own host "10.0.0.0/8"`},
		{[]string{"server"}, map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/x", "GAFFER_OWN_HOSTS": "0x7f.1"}, `--own-hosts: own host "0x7f.1"`},
		{[]string{"dev", "--own-hosts", "nat.example:0"}, nil, `own host "nat.example:0"`},
		{[]string{"dev", "--nodes", "0"}, nil, "--nodes must be between 1 and 16"},
		{[]string{"dev", "--token", "short"}, nil, "--token must be at least 16 characters"},
		{[]string{"dev", "--data", "/tmp/x", "--database-url", "postgres://127.0.0.1:1/x"}, nil, "do not mix"},
		// dev's token is $GAFFER_DEV_TOKEN; $GAFFER_TOKEN is the client commands'.
		{[]string{"dev", "--webhook-allow", "hooks:99999"}, map[string]string{"GAFFER_TOKEN": "short"}, `allow entry "hooks:99999"`},
		{[]string{"dev", "--webhook-allow", "hooks:99999"}, map[string]string{"GAFFER_DEV_TOKEN": "short"}, "--token must be at least 16 characters"},
		{[]string{"bench", "sideways"}, nil, "bench needs a mode"},
		{[]string{"bench", "pressure", "sideways"}, nil, "the pressures are backend-kill, idle-in-tx, readers and restart"},
		{[]string{"bench", "pressure", "restart", "--database-url", "postgres://127.0.0.1:1/x"}, nil, "restarts the bench's own throwaway PostgreSQL: leave out --database-url"},
		{[]string{"bench", "pressure", "idle-in-tx", "--clean", "5s"}, nil, "--clean must be a positive multiple of --sample"},
		{[]string{"bench", "pressure", "readers", "--hold-for", "20s"}, nil, "--duration must be a multiple of --sample and outlast"},
		{[]string{"bench", "pressure", "readers", "--readers", "0"}, nil, "--readers must be positive"},
	}
	for _, c := range cases {
		_, stderr, err := run(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error()+stderr, c.want) {
			t.Errorf("gaffer %v: err %v, stderr %q; want %q", c.args, err, stderr, c.want)
		}
		if err != nil && exitCode(err) != 2 {
			t.Errorf("gaffer %v: exit code %d, want 2", c.args, exitCode(err))
		}
	}
}

func TestHelpListsEnvironmentVariables(t *testing.T) {
	t.Parallel()
	// Help goes to stdout and exits 0 (gaffer server --help | less).
	stdout, _, err := run(t, nil, "server", "--help")
	if err != nil {
		t.Errorf("server --help: %v", err)
	}
	for _, want := range []string{"--lease-ttl", "$GAFFER_LEASE_TTL", "$DATABASE_URL", "--drain-timeout", "--webhook-allow", "$GAFFER_WEBHOOK_ALLOW", "--own-hosts", "$GAFFER_OWN_HOSTS"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("server --help lacks %q:\n%s", want, stdout)
		}
	}
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	env := map[string]string{"DATABASE_URL": url}
	out, _, err := run(t, env, "migrate", "status")
	if err != nil || !strings.Contains(out, "pending") {
		t.Fatalf("status on empty db: %v\n%s", err, out)
	}
	if out, _, err = run(t, env, "migrate", "up"); err != nil || !strings.Contains(out, "applied 0001") || !strings.Contains(out, "applied 0002") {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if out, _, err = run(t, env, "migrate", "up"); err != nil || !strings.Contains(out, "up to date") {
		t.Fatalf("second up: %v\n%s", err, out)
	}
	// A node refuses a schema that is behind, naming the fix.
	if out, _, err = run(t, env, "migrate", "down", "--steps", "1"); err != nil || !strings.Contains(out, fmt.Sprintf("reverted %04d", store.LatestVersion())) {
		t.Fatalf("down: %v\n%s", err, out)
	}
	_, _, err = run(t, map[string]string{"DATABASE_URL": url, "GAFFER_ADDR": "127.0.0.1:0"}, "server")
	if err == nil || !strings.Contains(err.Error(), "gaffer migrate up") {
		t.Fatalf("server on an old schema: %v", err)
	}
	st, err := store.Open(context.Background(), url, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, _ := st.SchemaVersion(context.Background()); v != store.LatestVersion()-1 {
		t.Fatalf("schema version %d after one step down, want %d", v, store.LatestVersion()-1)
	}

	// A schema ahead by a migration this gaffer does not carry: refused
	// by node start and migrate up while that migration is a contract,
	// naming it and the revert; worked on once it is declared compatible.
	if _, _, err = run(t, env, "migrate", "up"); err != nil {
		t.Fatal(err)
	}
	next := store.LatestVersion() + 1
	if _, err := st.Pool().Exec(context.Background(), `INSERT INTO gaffer.schema_migrations (version, name, checksum) VALUES ($1, 'from_the_future', 'x')`, next); err != nil {
		t.Fatal(err)
	}
	wantAhead := fmt.Sprintf("migration %04d_from_the_future is a contract this gaffer cannot work with; run a gaffer that carries migration %04d, "+
		"or revert with that gaffer's `gaffer migrate down --steps 1`", next, next)
	_, _, err = run(t, map[string]string{"DATABASE_URL": url, "GAFFER_ADDR": "127.0.0.1:0"}, "server")
	if err == nil || !strings.Contains(err.Error(), wantAhead) {
		t.Fatalf("server on a schema ahead by a contract: %v; want %q", err, wantAhead)
	}
	if _, _, err = run(t, env, "migrate", "up"); err == nil || !strings.Contains(err.Error(), wantAhead) {
		t.Fatalf("migrate up on a schema ahead by a contract: %v; want %q", err, wantAhead)
	}
	if _, err := st.Pool().Exec(context.Background(), `UPDATE gaffer.schema_migrations SET compatible_from = $1 WHERE version = $2`, store.LatestVersion(), next); err != nil {
		t.Fatal(err)
	}
	if out, _, err = run(t, env, "migrate", "up"); err != nil || !strings.Contains(out, fmt.Sprintf("ahead of this gaffer (%d)", store.LatestVersion())) {
		t.Fatalf("migrate up on a schema ahead by an expand: %v\n%s", err, out)
	}
}
