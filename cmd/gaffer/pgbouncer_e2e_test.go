package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/pgbouncer"
)

// TestServerThroughPgBouncer runs `gaffer server` with --database-url
// through a real PgBouncer in transaction mode (three server connections
// for the node's pool and its API), --transaction-pooler, and LISTEN on a
// direct --listen-database-url; the poll is a minute, so jobs start at once
// only through LISTEN. Under load — enqueues over the API from eight
// clients, reads of jobs, lists and queues between them, the leader's
// services running — every request succeeds, every accepted job is claimed
// and completed once (an audit trigger counts completions), and no request
// made two jobs. Migrations ran on the direct connection.
//
// A second node given --transaction-pooler and no listen URL says at
// start-up that it cannot LISTEN and polls.
func TestServerThroughPgBouncer(t *testing.T) {
	t.Parallel()
	pgbouncer.Require(t)
	e := newE2E(t)
	e.ok("migrate", "up") // direct: migrations hold a session lock
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "pooled", "--tenant", "*", "--scopes", "admin"))
	if _, err := e.pool.Exec(context.Background(), `
		CREATE TABLE test_completions (job_id bigint);
		CREATE FUNCTION test_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO test_completions VALUES (NEW.id); RETURN NEW; END $$;
		CREATE TRIGGER test_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.state = 'completed' AND NEW.finalized_at IS DISTINCT FROM OLD.finalized_at)
			EXECUTE FUNCTION test_audit();`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// What docs/operations.md tells operators to do: the pooler passes no
	// jit parameter, so PostgreSQL's JIT is turned off for the database.
	if _, err := e.pool.Exec(context.Background(), `ALTER DATABASE `+strings.TrimPrefix(u.Path, "/")+` SET jit = off`); err != nil {
		t.Fatal(err)
	}
	b, err := pgbouncer.Start(context.Background(), pgbouncer.Config{Target: u.Host, PoolSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	pooled := b.URL(strings.TrimPrefix(u.Path, "/"))
	direct := e.dbURL
	e.env = []string{"DATABASE_URL=" + pooled}
	_, base := e.server("pooled-1", "--transaction-pooler", "--listen-database-url", direct, "--poll-interval", "1m", "--max-conns", "10", "--rate-limit", "100000")
	e.waitSQL("a leader", `SELECT leader FROM gaffer.leader_fence`, "pooled-1")
	var mu sync.Mutex

	call := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	var ids []int64
	var failures []string
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				code, body := call("POST", "/v1/jobs", fmt.Sprintf(`{"kind":"noop","args":{"g":%d,"i":%d}}`, g, i))
				var out struct{ Job struct{ ID int64 } }
				if code != http.StatusCreated || json.Unmarshal(body, &out) != nil || out.Job.ID == 0 {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("enqueue: %d %s", code, body))
					mu.Unlock()
					continue
				}
				mu.Lock()
				ids = append(ids, out.Job.ID)
				mu.Unlock()
				for _, path := range []string{fmt.Sprintf("/v1/jobs/%d", out.Job.ID), "/v1/jobs?limit=20", "/v1/queues"} {
					if code, body := call("GET", path, ""); code != http.StatusOK {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("GET %s: %d %s", path, code, body))
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d API requests failed through the pooler, first: %s", len(failures), failures[0])
	}
	e.waitSQL("every accepted job completed (woken through LISTEN: the poll is a minute)",
		`SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state = 'completed'`, fmt.Sprint(len(ids)), ids)
	took := time.Since(start)
	if got := e.scalar(`SELECT count(*) FROM gaffer.jobs WHERE kind = 'noop'`); got != fmt.Sprint(len(ids)) {
		t.Errorf("%s noop jobs for %d accepted enqueues", got, len(ids))
	}
	if got := e.scalar(`SELECT count(*) FROM (SELECT job_id FROM test_completions GROUP BY job_id HAVING count(*) <> 1) d`); got != "0" {
		t.Errorf("%s jobs completed other than once", got)
	}
	if got := e.scalar(`SELECT count(DISTINCT job_id) FROM test_completions`); got != fmt.Sprint(len(ids)) {
		t.Errorf("%s jobs have a completion, want %d", got, len(ids))
	}
	e.logsMu.Lock()
	log := e.logs["pooled-1"].String()
	e.logsMu.Unlock()
	if !strings.Contains(log, "statements are not prepared") || strings.Contains(log, "JIT is on") {
		t.Errorf("the node did not say how it works through the pooler; log:\n%s", log)
	}
	t.Logf("%d jobs enqueued, claimed and completed through PgBouncer with %d API reads, in %s", len(ids), 3*len(ids), took.Round(time.Millisecond))

	e.server("pooled-2", "--transaction-pooler", "--poll-interval", "1m")
	e.logsMu.Lock()
	log = e.logs["pooled-2"].String()
	e.logsMu.Unlock()
	if !strings.Contains(log, "cannot carry LISTEN") {
		t.Errorf("a node without a listen URL behind a transaction pooler did not say it cannot LISTEN; log:\n%s", log)
	}
}
