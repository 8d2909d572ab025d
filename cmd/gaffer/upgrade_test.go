package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// upgradeCluster is the nodes of an upgrade under way, old and new, and
// the load sent to whichever of them are up.
type upgradeCluster struct {
	t     *testing.T
	dbURL string
	etcd  string
	allow string // --webhook-allow for the receiver
	token string

	mu   sync.RWMutex // held for reading while a request is sent to a node
	live []*upgradeNode

	logsMu sync.Mutex
	logs   map[string]*bytes.Buffer // node id → its log
}

type upgradeNode struct {
	id, url string
	cmd     *exec.Cmd
	done    chan struct{}
}

// start runs `gaffer server` from bin (the previous release, or this
// test binary as HEAD's gaffer) and waits until it is ready and taking
// API requests.
func (c *upgradeCluster) start(bin, id string) *upgradeNode {
	c.t.Helper()
	addr := freeAddr(c.t)
	cmd := exec.Command(bin, "server", "--node-id", id, "--addr", addr, "--etcd", c.etcd, "--session-ttl", "3s",
		"--poll-interval", "200ms", "--drain-timeout", "10s", "--webhook-allow", c.allow, "--cluster-prefix", "/upgrade")
	cmd.Env = append(os.Environ(), "GAFFER_E2E_MAIN=1", "DATABASE_URL="+c.dbURL)
	log := &bytes.Buffer{}
	c.logsMu.Lock()
	c.logs[id] = log
	c.logsMu.Unlock()
	cmd.Stdout, cmd.Stderr = io.Discard, &lockedWriter{mu: &c.logsMu, w: log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n := &upgradeNode{id: id, url: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(n.done) }()
	c.t.Cleanup(func() {
		cmd.Process.Kill()
		<-n.done
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(n.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-n.done:
			c.t.Fatalf("%s exited before it was ready:\n%s", id, c.log(id))
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s never became ready:\n%s", id, c.log(id))
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.mu.Lock()
	c.live = append(c.live, n)
	c.mu.Unlock()
	return n
}

// stop takes n out of the load first, then stops it with SIGTERM (a
// drain) and checks it exited cleanly.
func (c *upgradeCluster) stop(n *upgradeNode) {
	c.t.Helper()
	c.mu.Lock()
	for i, l := range c.live {
		if l == n {
			c.live = append(c.live[:i], c.live[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("%s did not stop within 30s of SIGTERM", n.id)
	}
	if code := n.cmd.ProcessState.ExitCode(); code != 0 {
		c.t.Fatalf("%s exited %d after SIGTERM:\n%s", n.id, code, c.log(n.id))
	}
}

func (c *upgradeCluster) log(id string) string {
	c.logsMu.Lock()
	defer c.logsMu.Unlock()
	if b, ok := c.logs[id]; ok {
		return b.String()
	}
	return ""
}

// post sends one API request to a live node, the i-th picks the node,
// and decodes the answer. It reports the node's id and the status.
func (c *upgradeCluster) post(i int, path, idemKey string, body any, out any) (string, int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := c.live[i%len(c.live)]
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", n.url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		return n.id, 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return n.id, resp.StatusCode, fmt.Errorf("%s %s on %s: %d %s", "POST", path, n.id, resp.StatusCode, raw)
	}
	return n.id, resp.StatusCode, json.Unmarshal(raw, out)
}

// A cluster is upgraded from the previous release to HEAD the way the
// docs say (migrate, then roll the nodes one at a time) under a steady
// load of jobs, http jobs to a receiver, workflow runs and a cron entry
// firing every second. Old nodes work on the migrated schema, an old node
// starts on it, old and new nodes work side by side, and leadership (cron)
// passes from an old node to a new one. Nothing may be lost or fail: every
// accepted job completes, with no error on any attempt; every run
// completes; every webhook is delivered; every cron second in the run
// fires exactly once; and each node exits cleanly on SIGTERM.
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	prev := buildPreviousRelease(t)
	head := os.Args[0]
	ctx := context.Background()

	etcd, err := etcdserver.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	dbURL := pgtest.NewEmptyDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	gaffer := func(bin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GAFFER_E2E_MAIN=1", "DATABASE_URL="+dbURL)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	version := func() int {
		var v int
		if err := pool.QueryRow(ctx, `SELECT max(version) FROM gaffer.schema_migrations`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	// Webhook receiver: which jobs it was called for.
	var delivered sync.Map
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered.Store(r.Header.Get("Idempotency-Key"), true)
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}))
	defer hook.Close()

	// The previous release's cluster, on its own schema.
	gaffer(prev, "migrate", "up")
	oldVersion := version()
	tokenOut := strings.TrimSpace(gaffer(prev, "tokens", "create", "--name", "upgrade", "--tenant", "*", "--scopes", "admin"))
	c := &upgradeCluster{t: t, dbURL: dbURL, etcd: etcd.Endpoint(), allow: strings.TrimPrefix(hook.URL, "http://"),
		token: tokenOut[strings.LastIndex(tokenOut, "\n")+1:], logs: map[string]*bytes.Buffer{}}
	defer func() {
		if t.Failed() {
			for _, id := range []string{"old-1", "old-2", "old-3", "new-1", "new-2"} {
				t.Logf("%s log:\n%s", id, c.log(id))
			}
		}
	}()
	old1 := c.start(prev, "old-1")
	old2 := c.start(prev, "old-2")
	waitLeader := func(want ...string) string {
		t.Helper()
		var leader string
		deadline := time.Now().Add(20 * time.Second)
		for {
			pool.QueryRow(ctx, `SELECT coalesce(leader, '') FROM gaffer.leader_fence`).Scan(&leader)
			for _, w := range want {
				if leader == w {
					return leader
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("leader %q, want one of %v", leader, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLeader("old-1", "old-2")
	var entry struct{}
	if _, _, err := c.post(0, "/v1/cron", "", map[string]any{"name": "tick", "schedule": "@every 1s", "job": map[string]any{"kind": "noop"}}, &entry); err != nil {
		t.Fatal(err)
	}

	// The load: jobs (noop and http, args and bodies of several shapes)
	// and workflow runs, each sent with an Idempotency-Key. A request that
	// fails is an error of the test, and is sent again with the same key,
	// so that the rest of the run still accounts for every job. Accepted
	// ids are kept.
	var (
		accepted   sync.Map // job id → kind
		runs       sync.Map // run id → true
		retries    atomic.Int64
		stopLoad   = make(chan struct{})
		loadWG     sync.WaitGroup
		submitOnce = func(i int, path string, body, out any) {
			key := fmt.Sprintf("%s-%d", strings.TrimPrefix(path, "/v1/"), i)
			for attempt := 0; ; attempt++ {
				_, _, err := c.post(i+attempt, path, key, body, out)
				if err == nil {
					return
				}
				if attempt == 20 {
					t.Errorf("%s gave up after %d tries: %v", key, attempt+1, err)
					return
				}
				retries.Add(1)
				t.Errorf("%s, try %d: %v", key, attempt+1, err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	)
	for w := range 2 {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			for i := w; ; i += 2 {
				select {
				case <-stopLoad:
					return
				default:
				}
				body := map[string]any{"kind": "noop", "args": map[string]any{"n": i, "nested": map[string]any{"b": []int{1, 2}, "a": "é<&>"}}}
				if i%3 == 0 {
					body = map[string]any{"kind": "http", "args": map[string]any{"url": hook.URL + "/hook", "body": map[string]any{"n": i}}}
				}
				var res struct {
					Job struct {
						ID   int64  `json:"id"`
						Kind string `json:"kind"`
					} `json:"job"`
				}
				submitOnce(i, "/v1/jobs", body, &res)
				if res.Job.ID != 0 {
					accepted.Store(res.Job.ID, res.Job.Kind)
				}
				time.Sleep(15 * time.Millisecond)
			}
		}()
	}
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			case <-time.After(250 * time.Millisecond):
			}
			var run struct {
				ID int64 `json:"id"`
			}
			submitOnce(i, "/v1/workflows", map[string]any{"name": "upgrade", "steps": []map[string]any{
				{"name": "a", "kind": "noop", "args": map[string]any{"i": i}},
				{"name": "b", "kind": "noop", "depends_on": []string{"a"}},
				{"name": "c", "kind": "noop", "depends_on": []string{"a", "b"}},
			}}, &run)
			if run.ID != 0 {
				runs.Store(run.ID, true)
			}
		}
	}()

	// 1. Migrate to HEAD's schema while the old nodes work.
	time.Sleep(2 * time.Second)
	migrated := time.Now()
	t.Logf("HEAD migrate up:\n%s", gaffer(head, "migrate", "up"))
	if v := version(); v <= oldVersion {
		t.Fatalf("schema at %d after HEAD's migrate up, was %d: nothing to upgrade across", v, oldVersion)
	}
	t.Logf("schema %d → %d in %s", oldVersion, version(), time.Since(migrated).Round(time.Millisecond))
	// What this test shows, the migrations must say: each one since the
	// previous release is declared compatible with its nodes.
	var undeclared []string
	declared, err := pool.Query(ctx, `SELECT format('%s (compatible from %s)', name, coalesce(compatible_from::text, 'nothing'))
		FROM gaffer.schema_migrations WHERE version > $1 AND (compatible_from IS NULL OR compatible_from > $1) ORDER BY version`, oldVersion)
	if err == nil {
		undeclared, err = pgx.CollectRows(declared, pgx.RowTo[string])
	}
	if err != nil || len(undeclared) > 0 {
		t.Errorf("migrations since the previous release (schema %d) not declared compatible with it: %v (%v); "+
			"a rolling upgrade needs each to be an expand (-- gaffer:expand)", oldVersion, undeclared, err)
	}
	// An old node (re)starting on the migrated schema, as one does when it
	// crashes or is rescheduled mid-upgrade.
	old3 := c.start(prev, "old-3")
	time.Sleep(2 * time.Second)

	// 2. Roll the nodes one at a time; the leader last.
	oldLeader, oldFollower := old1, old2
	if waitLeader("old-1", "old-2") == "old-2" {
		oldLeader, oldFollower = old2, old1
	}
	c.stop(oldFollower)
	c.stop(old3)
	new1 := c.start(head, "new-1")
	mixedFrom := time.Now()
	time.Sleep(4 * time.Second) // the old leader and a new node side by side
	mixedTo := time.Now()
	c.stop(oldLeader)
	waitLeader("new-1")
	new2 := c.start(head, "new-2")
	time.Sleep(3 * time.Second)
	close(stopLoad)
	loadWG.Wait()

	// Everything accepted finishes.
	var ids []int64
	accepted.Range(func(k, _ any) bool { ids = append(ids, k.(int64)); return true })
	var runIDs []int64
	runs.Range(func(k, _ any) bool { runIDs = append(runIDs, k.(int64)); return true })
	if len(ids) < 200 || len(runIDs) < 20 {
		t.Fatalf("only %d jobs and %d runs accepted: no load to speak of", len(ids), len(runIDs))
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var open int
		pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM gaffer.jobs WHERE state NOT IN ('completed', 'failed', 'cancelled') AND cron_entry IS NULL)
			+ (SELECT count(*) FROM gaffer.workflow_runs WHERE state = 'running')`).Scan(&open)
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs and runs still unfinished 60s after the load stopped", open)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.stop(new1)
	c.stop(new2)

	// Nothing lost: every accepted job is there and completed, with no
	// failed attempt. (A job a stopping node claimed and released at once
	// has a "released" entry in its history: that is a drain, which uses
	// up no attempt, not a failure.)
	type outcome struct {
		state  string
		errors int
		node   string
		last   string
	}
	rows, err := pool.Query(ctx, `SELECT id, state, count(e.e), coalesce(node, ''), coalesce(max(e.e ->> 'error'), '')
		FROM gaffer.jobs LEFT JOIN LATERAL jsonb_array_elements(errors) e(e) ON e.e ->> 'kind' IS DISTINCT FROM 'released'
		WHERE id = ANY($1) GROUP BY id`, ids)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]outcome{}
	for rows.Next() {
		var id int64
		var o outcome
		if err := rows.Scan(&id, &o.state, &o.errors, &o.node, &o.last); err != nil {
			t.Fatal(err)
		}
		got[id] = o
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, id := range ids {
		o, ok := got[id]
		switch {
		case !ok:
			t.Errorf("job %d was accepted and is gone", id)
		case o.state != "completed" || o.errors != 0:
			t.Errorf("job %d ended %s on %s after %d failed attempts, one of them: %s", id, o.state, o.node, o.errors, o.last)
		default:
			continue
		}
		if bad++; bad == 10 {
			t.Fatal("and more")
		}
	}
	for _, id := range ids {
		if kind, _ := accepted.Load(id); kind == "http" {
			if _, ok := delivered.Load(fmt.Sprint(id)); !ok {
				t.Errorf("http job %d completed but its receiver never saw it", id)
			}
		}
	}
	var failedRuns, dlq, erroredJobs int
	pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM gaffer.workflow_runs WHERE id = ANY($1) AND state <> 'completed'),
		(SELECT count(*) FROM gaffer.dlq),
		(SELECT count(*) FROM gaffer.jobs WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(errors) e WHERE e ->> 'kind' IS DISTINCT FROM 'released'))`,
		runIDs).Scan(&failedRuns, &dlq, &erroredJobs)
	if failedRuns != 0 || dlq != 0 || erroredJobs != 0 {
		t.Errorf("%d workflow runs did not complete, %d DLQ entries, %d jobs (workflow steps and cron jobs included) with a failed attempt; want none",
			failedRuns, dlq, erroredJobs)
	}

	// The versions really mixed: the old nodes worked on the migrated
	// schema, and the old leader and the new node completed jobs in the
	// same stretch of time.
	for _, c := range []struct {
		what     string
		node     string
		from, to time.Time
	}{
		{"an old node on the migrated schema", "old-", migrated, mixedFrom},
		{"the old leader beside a new node", oldLeader.id, mixedFrom, mixedTo},
		{"the new node beside an old one", "new-1", mixedFrom, mixedTo},
		{"the old node started on the migrated schema", "old-3", migrated, mixedFrom},
	} {
		var n int
		pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE node LIKE $1 || '%' AND finalized_at BETWEEN $2 AND $3`, c.node, c.from, c.to).Scan(&n)
		if n == 0 {
			t.Errorf("%s (%s) completed no job between %s and %s", c.what, c.node, c.from.Format(time.TimeOnly), c.to.Format(time.TimeOnly))
		}
	}

	// Cron, across the hand-over from an old leader to a new one: every
	// second from the first occurrence to the last fired, once, with one
	// job, by leaders of both versions.
	var first, last time.Time
	var fired, notFired, jobs, dupes, epochs int
	err = pool.QueryRow(ctx, `SELECT min(scheduled_at), max(scheduled_at), count(*) FILTER (WHERE status = 'fired'),
		count(*) FILTER (WHERE status <> 'fired'), count(DISTINCT epoch),
		(SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'tick'),
		(SELECT count(*) FROM (SELECT cron_at FROM gaffer.jobs WHERE cron_entry = 'tick' GROUP BY cron_at HAVING count(*) > 1) d)
		FROM gaffer.cron_occurrences WHERE entry = 'tick'`).Scan(&first, &last, &fired, &notFired, &epochs, &jobs, &dupes)
	if err != nil {
		t.Fatal(err)
	}
	want := int(last.Sub(first)/time.Second) + 1
	if fired != want || notFired != 0 || jobs != fired || dupes != 0 {
		t.Errorf("cron: %d occurrences fired and %d not, %d jobs (%d instants with more than one), over %d seconds; want each second fired once with one job",
			fired, notFired, jobs, dupes, want)
	}
	if epochs < 2 {
		t.Errorf("cron fired under %d leader epoch(s): leadership never passed from an old node to a new one", epochs)
	}
	// Nothing went wrong on the way either: no node logged an error.
	for _, id := range []string{"old-1", "old-2", "old-3", "new-1", "new-2"} {
		for _, line := range strings.Split(c.log(id), "\n") {
			if strings.Contains(line, "[ERROR]") {
				t.Errorf("%s logged: %s", id, line)
			}
		}
	}
	t.Logf("%d jobs, %d workflow runs, %d cron occurrences (%d leader epochs); %d requests failed and were sent again",
		len(ids), len(runIDs), fired, epochs, retries.Load())
}
