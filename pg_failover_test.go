package gaffer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/patroni"
	"github.com/gafferhq/gaffer/internal/testnode"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// failoverDelay delays the WAL stream to the standby (and its replies),
// as a standby in another zone sees it, so that an asynchronous standby
// lags the primary by at least that much. GAFFER_FAILOVER_DELAY sets
// another (30ms makes the asynchronous run lose hundreds of jobs).
func failoverDelay(t *testing.T) time.Duration {
	d := 5 * time.Millisecond
	if s := os.Getenv("GAFFER_FAILOVER_DELAY"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("GAFFER_FAILOVER_DELAY: %v", err)
		}
	}
	return d
}

// TestPostgresFailover runs two nodes and an enqueuing client on a
// Patroni cluster — a primary and a synchronous standby, Patroni keeping
// its state in the same etcd the nodes elect their leader in — and
// SIGKILLs the primary (Patroni and PostgreSQL, as a machine dies) under
// load. Patroni promotes the standby; the nodes and the client, given
// every host in one URL, reconnect to it. Then:
//
//   - every enqueue the client saw acknowledged exists and completed;
//   - no job completed twice: one accepted completion per job (an audit
//     trigger), one effect row written in its completion's transaction,
//     and every completion a handler saw committed is there;
//   - the cron entry fired each second exactly once, through the outage;
//   - the nodes' LISTEN connections followed the primary: with the poll
//     a minute long, jobs enqueued after the failover start at once only
//     if LISTEN was re-established on the new primary.
//
// GAFFER_FAILOVER_ASYNC=1 runs the same with Patroni's synchronous_mode
// off, to see the test fail: acknowledged enqueues and completions are
// lost with the primary.
func TestPostgresFailover(t *testing.T) {
	patroni.Require(t)
	if testing.Short() {
		t.Skip("runs a Patroni cluster through a failover (about a minute)")
	}
	ctx := context.Background()
	etcd, err := etcdserver.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	async := os.Getenv("GAFFER_FAILOVER_ASYNC") != ""
	pc, err := patroni.Start(ctx, patroni.Config{Etcd: []string{etcd.Endpoint()}, Scope: "failover",
		ReplicationLatency: failoverDelay(t), Asynchronous: async, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range pc.Members {
				t.Logf("patroni %s:\n%s", m.Name, tail(m.Log(), 4000))
			}
		}
		pc.Stop()
	})
	primary, err := pc.WaitPrimary(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("patroni: %s", pc.Describe(ctx))

	admin, err := pgx.Connect(ctx, primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE gaffer`); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	// The nodes get the URL form naming both hosts and nothing else: the
	// node adds target_session_attrs=read-write itself. The client gets
	// the keyword/value form, with it spelled out.
	nodeURL := pc.URL("gaffer", "")
	var hosts, ports []string
	for _, m := range pc.Members {
		hosts, ports = append(hosts, "127.0.0.1"), append(ports, fmt.Sprint(m.Port))
	}
	clientDSN := fmt.Sprintf("host=%s port=%s user=postgres dbname=gaffer sslmode=disable target_session_attrs=read-write connect_timeout=5",
		strings.Join(hosts, ","), strings.Join(ports, ","))
	st, err := store.Open(ctx, nodeURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	check, err := pgxpool.New(ctx, clientDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(check.Close)
	testnode.AuditCompletions(t, check)
	if _, err := check.Exec(ctx, `CREATE TABLE fo_effects (job_id bigint, attempt int, node text)`); err != nil {
		t.Fatal(err)
	}

	// Completions the handlers saw commit, per job.
	var mu sync.Mutex
	committed := map[int64]int{}
	var nodes []*gaffer.Node
	for i := range 2 {
		n, err := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: nodeURL, ID: fmt.Sprintf("fo-%d", i+1),
			Queues: map[string]int{"default": 16}, LeaseTTL: 5 * time.Second, RescueInterval: 500 * time.Millisecond,
			PollInterval: time.Minute, EtcdEndpoints: []string{etcd.Endpoint()}, SessionTTL: 2 * time.Second,
			ClusterPrefix: "/gaffer-failover", MaxConns: 8,
			Logger: hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("fo-%d", i+1), Level: hclog.Warn, Output: testWriter{t}})})
		if err != nil {
			t.Fatal(err)
		}
		pool := n.Pool()
		type args struct {
			MS int `json:"ms"`
		}
		job.HandleArgs(n.Registry(), "fo.work", func(ctx context.Context, j *job.Job, a args) error {
			time.Sleep(time.Duration(a.MS) * time.Millisecond)
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(context.WithoutCancel(ctx))
			if _, err := tx.Exec(ctx, `INSERT INTO fo_effects VALUES ($1, $2, $3)`, j.ID, j.Attempt, n.ID()); err != nil {
				return err
			}
			if err := job.CompleteTx(ctx, tx, j); err != nil {
				return err
			}
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			mu.Lock()
			committed[j.ID]++
			mu.Unlock()
			return nil
		})
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			n.Stop(stop)
		})
		nodes = append(nodes, n)
	}
	if _, err := nodes[0].Cron().Create(ctx, cron.Entry{Name: "tick", Schedule: "@every 1s", Missed: cron.MissedAll,
		Job: cron.JobTemplate{Kind: "fo.work", Args: json.RawMessage(`{"ms": 1}`), MaxAttempts: 100}}); err != nil {
		t.Fatal(err)
	}

	// The load: eight clients enqueueing one job at a time, each
	// recording the ids whose enqueue returned success.
	client := job.NewClient(check, nil)
	var accepted []int64
	var lastAck, killedAt time.Time
	var firstAckAfter time.Time
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for load.Err() == nil {
				sent := time.Now()
				res, err := client.Enqueue(load, job.Request{Kind: "fo.work", Args: map[string]int{"ms": 5 + rng.IntN(40)}, MaxAttempts: 100})
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				mu.Lock()
				accepted = append(accepted, res.Job.ID)
				lastAck = time.Now()
				if !killedAt.IsZero() && sent.After(killedAt) && firstAckAfter.IsZero() {
					firstAckAfter = lastAck
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
			}
		}()
	}
	time.Sleep(6 * time.Second)
	mu.Lock()
	before := len(accepted)
	killedAt = time.Now()
	mu.Unlock()
	primary.Kill()
	t.Logf("killed primary %s (Patroni and PostgreSQL) after %d acknowledged enqueues", primary.Name, before)
	next, err := pc.WaitPrimary(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(killedAt)
	testnode.WaitUntil(t, time.Minute, "an enqueue acknowledged by the new primary", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !firstAckAfter.IsZero()
	})
	mu.Lock()
	outage := firstAckAfter.Sub(killedAt)
	mu.Unlock()
	t.Logf("%s promoted %s after the kill; enqueues acknowledged again after %s", next.Name, promoted.Round(time.Millisecond), outage.Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	stopLoad()
	wg.Wait()

	// LISTEN followed the primary: with a minute-long poll, these start at
	// once only if a notification woke a node.
	var woken []int64
	start := time.Now()
	for range 20 {
		res, err := client.Enqueue(ctx, job.Request{Kind: "fo.work", Args: map[string]int{"ms": 1}, Queue: "default"})
		if err != nil {
			t.Fatal(err)
		}
		woken = append(woken, res.Job.ID)
		time.Sleep(100 * time.Millisecond)
	}
	testnode.WaitUntil(t, 20*time.Second, "jobs enqueued after the failover to complete (LISTEN on the new primary)", func() bool {
		return testnode.Scalar[int](t, check, `SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state = 'completed'`, woken) == len(woken)
	})
	t.Logf("20 jobs enqueued after the failover completed within %s (poll interval 1m)", time.Since(start).Round(time.Millisecond))

	if _, err := nodes[0].Cron().Pause(ctx, "", "tick"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ids := append([]int64(nil), accepted...)
	mu.Unlock()
	// Count what is missing now: a lost job can never finish, and waiting
	// for it would only time out.
	missing := len(ids) - testnode.Scalar[int](t, check, `SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1)`, ids)
	if missing != 0 {
		t.Errorf("%d of %d acknowledged enqueues do not exist after the failover", missing, len(ids))
	}
	testnode.WaitUntil(t, 2*time.Minute, "every job to finish", func() bool {
		return testnode.Scalar[int](t, check, `SELECT count(*) FROM gaffer.jobs WHERE state IN ('pending', 'running', 'retrying')`) == 0
	})
	if n := testnode.Scalar[int](t, check, `SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state <> 'completed'`, ids); n != 0 {
		t.Errorf("%d acknowledged jobs did not complete", n)
	}
	if n := testnode.Scalar[int](t, check, `SELECT count(*) FROM (SELECT job_id FROM test_completions GROUP BY job_id HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d jobs have more than one accepted completion", n)
	}
	if n := testnode.Scalar[int](t, check, `SELECT count(*) FROM gaffer.jobs j
		LEFT JOIN (SELECT job_id, count(*) AS n FROM fo_effects GROUP BY job_id) e ON e.job_id = j.id
		WHERE j.state = 'completed' AND coalesce(e.n, 0) <> 1`); n != 0 {
		t.Errorf("%d completed jobs do not have exactly one effect from their completion transaction", n)
	}
	mu.Lock()
	var acked []int64
	for id, n := range committed {
		acked = append(acked, id)
		if n > 1 {
			t.Errorf("job %d: %d completions committed", id, n)
		}
	}
	mu.Unlock()
	if n := testnode.Scalar[int](t, check, `SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state = 'completed'`, acked); n != len(acked) {
		t.Errorf("%d of %d completions a handler saw commit were lost", len(acked)-n, len(acked))
	}
	var fired, jobs, distinct, other int
	var first, last *time.Time
	if err := check.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'fired'), count(*) FILTER (WHERE status <> 'fired'),
		min(scheduled_at), max(scheduled_at) FROM gaffer.cron_occurrences WHERE entry = 'tick' AND status <> 'triggered'`).Scan(&fired, &other, &first, &last); err != nil {
		t.Fatal(err)
	}
	if err := check.QueryRow(ctx, `SELECT count(*), count(DISTINCT cron_at) FROM gaffer.jobs WHERE cron_entry = 'tick'`).Scan(&jobs, &distinct); err != nil {
		t.Fatal(err)
	}
	if first == nil || last.Before(killedAt.Add(promoted)) {
		t.Fatalf("cron did not fire through the failover: first %v last %v", first, last)
	}
	if span := int(last.Sub(*first)/time.Second) + 1; fired != span || jobs != fired || distinct != jobs || other != 0 {
		t.Errorf("cron: %d instants from first to last, %d fired, %d jobs (%d distinct), %d missed or skipped", span, fired, jobs, distinct, other)
	}
	t.Logf("%d acknowledged enqueues (%d before the kill), %d completions committed by handlers, %d cron occurrences",
		len(ids), before, len(acked), fired)
}

// testWriter sends a logger's lines to t.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
