package gaffer_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
)

// auditRunning records, after every statement that moves jobs, how many
// jobs of kind "work" are running: the claim that admits a job holds the
// limit's bucket lock until it commits, so the count each claim sees
// includes every running job, its own too.
func auditRunning(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		CREATE TABLE test_running (n int, at timestamptz DEFAULT clock_timestamp());
		CREATE FUNCTION test_count_running() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO test_running (n) SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND kind = 'work';
			RETURN NULL;
		END $$;
		CREATE TRIGGER test_count_running AFTER UPDATE ON gaffer.jobs FOR EACH STATEMENT
			EXECUTE FUNCTION test_count_running();`)
	if err != nil {
		t.Fatal(err)
	}
}

// G10, limits: a concurrency limit holds across three node processes, one
// SIGKILLed and one SIGSTOPped past its lease while holding slots. The
// dead node's slots come back when its jobs are rescued, never earlier
// (its rows stay running until then, and the audit counts them); the
// paused node's stale attempts neither hold nor free a slot after the
// rescue. Red with the limit check removed from the claim: up to 30 run.
func TestLimitHoldsAcrossNodeProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	auditCompletions(t, pool)
	auditRunning(t, pool)
	client := job.NewClient(pool, nil)
	const limit = 3
	if _, err := client.SetLimit(ctx, job.Limit{Name: "work-3", Kind: "work", Concurrency: limit}); err != nil {
		t.Fatal(err)
	}
	const lease = 2 * time.Second
	nodes := []*child{startChild(t, url, "node-1", lease), startChild(t, url, "node-2", lease), startChild(t, url, "node-3", lease)}
	const total = 40
	reqs := make([]job.Request, total)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "work", Args: map[string]int{"ms": 400}}
	}
	if _, err := client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	// holding waits for one of nodes to run a limited job and returns it.
	holding := func(nodes ...*child) *child {
		var got *child
		waitUntil(t, 30*time.Second, "a node to run a limited job", func() bool {
			for _, c := range nodes {
				if scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1`, c.ID) > 0 {
					got = c
					return true
				}
			}
			return false
		})
		return got
	}
	killed := holding(nodes...)
	killed.Signal(syscall.SIGKILL)
	<-killed.Exited
	var rest []*child
	for _, c := range nodes {
		if c != killed {
			rest = append(rest, c)
		}
	}
	paused := holding(rest...)
	paused.Signal(syscall.SIGSTOP)
	time.Sleep(lease + time.Second) // past its lease: its jobs are rescued meanwhile
	paused.Signal(syscall.SIGCONT)
	waitUntil(t, 90*time.Second, "every job to complete", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE state = 'completed'`) == total
	})
	most := scalar[int](t, pool, `SELECT max(n) FROM test_running`)
	if most > limit {
		at := scalar[time.Time](t, pool, `SELECT min(at) FROM test_running WHERE n > $1`, limit)
		t.Fatalf("%d jobs ran at once at %s; the limit is %d", most, at.Format(time.RFC3339Nano), limit)
	}
	if most < limit {
		t.Fatalf("at most %d ran at once: the limit of %d never bound, so the test proved nothing", most, limit)
	}
	if n := scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE errors @> '[{"kind": "lost"}]'`); n < 2 {
		t.Fatalf("%d jobs were rescued: the kill and the pause did not land on running jobs", n)
	}
	if n := scalar[int](t, pool, `SELECT count(*) FROM (SELECT job_id FROM test_completions GROUP BY job_id HAVING count(*) > 1) d`); n != 0 {
		t.Fatalf("%d jobs have two accepted completions", n)
	}
}

// G10, rates: a rate limit of 5 starts a second (burst 5) holds across two
// node processes that could start 20 at once, and jobs over it wait,
// pending and due, rather than fail. Every window of a second holds at
// most burst + rate starts. Red with the rate check removed: all 30 start
// within the first few hundred milliseconds.
func TestRateLimitHoldsAcrossNodeProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	auditCompletions(t, pool)
	client := job.NewClient(pool, nil)
	const rate, burst, total = 5, 5, 30
	if _, err := client.SetLimit(ctx, job.Limit{Name: "five-a-second", Kind: "work", Rate: rate, Period: time.Second, Burst: burst}); err != nil {
		t.Fatal(err)
	}
	startChild(t, url, "node-1", 5*time.Second)
	startChild(t, url, "node-2", 5*time.Second)
	reqs := make([]job.Request, total)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "work", Args: map[string]int{"ms": 0}}
	}
	if _, err := client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "every job to complete", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE state = 'completed'`) == total
	})
	// The most starts in any one-second window beginning at a start. A
	// start is when the claim admitted the attempt (attempted_at, the
	// instant its bucket's tokens were spent), not when its handler got
	// to run: the handlers' effects come after their claim commits and
	// the node dispatches them, later by whatever the load makes it, so
	// two starts 1.02 s apart may have effects 0.98 s apart. Each job is
	// attempted once here (checked below).
	most := scalar[int](t, pool, `
		SELECT max((SELECT count(*) FROM gaffer.jobs b WHERE b.attempted_at >= a.attempted_at AND b.attempted_at < a.attempted_at + interval '1 second'))
		FROM gaffer.jobs a`)
	span := scalar[float64](t, pool, `SELECT extract(epoch FROM max(attempted_at) - min(attempted_at)) FROM gaffer.jobs`)
	if n := scalar[int](t, pool, `SELECT count(*) FROM test_effects`); n != total {
		t.Fatalf("%d handler effects for %d jobs", n, total)
	}
	t.Logf("30 starts over %.1fs, at most %d in a second", span, most)
	if most > burst+rate {
		t.Fatalf("%d starts within one second; the limit allows %d (burst %d + rate %d)", most, burst+rate, burst, rate)
	}
	if min := float64(total-burst)/rate - 1; span < min {
		t.Fatalf("the 30 starts took %.1fs; the rate allows them no faster than %.0fs", span, min)
	}
	if n := scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE attempt > 1 OR state <> 'completed'`); n != 0 {
		t.Fatalf("%d jobs failed or retried: jobs over the rate must wait, not fail", n)
	}
}

// G10, fairness: with tenant a's backlog of 3,000 jobs queued first, a job
// tenant b enqueues afterwards starts at once on real node processes, not
// after a's backlog. Red with first-in-first-out claiming: b waits for
// the backlog, seconds.
func TestFairClaimingAcrossNodeProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	auditCompletions(t, pool)
	client := job.NewClient(pool, nil)
	reqs := make([]job.Request, 3000)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "work", Tenant: "a", Args: map[string]int{"ms": 20}}
	}
	if _, err := client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	startChild(t, url, "node-1", 5*time.Second)
	startChild(t, url, "node-2", 5*time.Second)
	waitUntil(t, 30*time.Second, "tenant a's backlog to be worked", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM test_effects`) >= 100
	})
	behind := scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE tenant = 'a' AND state IN ('pending', 'retrying')`)
	if behind < 2000 {
		t.Fatalf("only %d of tenant a's jobs queued: the backlog is too small to show anything", behind)
	}
	res, err := client.Enqueue(ctx, job.Request{Kind: "work", Tenant: "b", Args: map[string]int{"ms": 0}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "tenant b's job to start", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM test_effects WHERE job_id = $1`, res.Job.ID) > 0
	})
	wait := scalar[float64](t, pool, `
		SELECT extract(epoch FROM e.at - j.created_at) FROM test_effects e JOIN gaffer.jobs j ON j.id = e.job_id WHERE j.id = $1`, res.Job.ID)
	t.Logf("tenant b's job started %.0f ms after its enqueue, behind %d of tenant a's", wait*1000, behind)
	if wait > 1 {
		t.Fatalf("tenant b's job waited %.2fs behind tenant a's backlog", wait)
	}
}

// G10, the default that protects people: http jobs to one host run at
// most 10 at once across the cluster (the http-per-host limit every
// database starts with), however many slots two node processes have. The
// receiver counts the calls it holds at once. Red without the default
// limit: 20 at once.
func TestHTTPPerHostDefaultLimitAcrossNodeProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	inFlight, most, calls := 0, 0, 0
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		calls++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	allow := "GAFFER_TEST_WEBHOOK_ALLOW=" + receiver.Listener.Addr().String()
	startChild(t, url, "node-1", 5*time.Second, allow, "GAFFER_TEST_CONCURRENCY=20")
	startChild(t, url, "node-2", 5*time.Second, allow, "GAFFER_TEST_CONCURRENCY=20")
	const total = 60
	reqs := make([]job.Request, total)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "http", Args: map[string]string{"url": receiver.URL + "/hook"}}
	}
	if _, err := job.NewClient(pool, nil).EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "every call to complete", func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE state = 'completed'`) == total
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d calls, at most %d at once", calls, most)
	if most > 10 {
		t.Fatalf("%d calls to one host at once; the default limit is 10", most)
	}
	if most < 10 {
		t.Fatalf("at most %d calls at once: the limit never bound, so the test proved nothing", most)
	}
}
