package job_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/job"
)

// enqueueOK enqueues r and says whether it made a new job (false: the key
// was held, and the holder is returned).
func (e *env) enqueueKeyed(r job.Request) (*job.Job, bool) {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), r)
	if err != nil {
		e.t.Fatalf("enqueue %+v: %v", r, err)
	}
	return res.Job, !res.Existing
}

// A window's states decide which holders hold the key: with completed
// among them a done job still blocks; without pending a pending job does
// not; the key of a job enqueued with a window is not the key of one
// enqueued without (and the other way round).
func TestUniqueWindowStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("w", func(ctx context.Context, j *job.Job) error { return nil })
	live := []job.State{job.Pending, job.Running, job.Retrying, job.Completed}

	first, made := e.enqueueKeyed(job.Request{Kind: "w", UniqueKey: "report", UniqueStates: live})
	if !made || first.UniqueKey != "report" {
		t.Fatalf("first: made %v, %+v", made, first)
	}
	if again, made := e.enqueueKeyed(job.Request{Kind: "w", UniqueKey: "report", UniqueStates: live}); made || again.ID != first.ID {
		t.Fatalf("while pending: made %v, job %d, want %d", made, again.ID, first.ID)
	}
	// Another tenant has its own keys.
	if _, made := e.enqueueKeyed(job.Request{Kind: "w", Tenant: "acme", UniqueKey: "report", UniqueStates: live}); !made {
		t.Fatal("another tenant's key held")
	}
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"default": 2}})
	e.waitState(first.ID, job.Completed)
	done, made := e.enqueueKeyed(job.Request{Kind: "w", UniqueKey: "report", UniqueStates: live})
	if made || done.ID != first.ID || done.State != job.Completed {
		t.Fatalf("after completion: made %v, %+v", made, done)
	}
	// Without completed among the states, the done job holds nothing.
	fresh, made := e.enqueueKeyed(job.Request{Kind: "w", UniqueKey: "report", UniqueStates: []job.State{job.Pending, job.Running}})
	if !made || fresh.ID == first.ID {
		t.Fatalf("pending/running window over a completed holder: made %v, %+v", made, fresh)
	}
	e.waitState(fresh.ID, job.Completed)
	// GetJob shows the key.
	if got, err := e.client.Get(context.Background(), "", first.ID); err != nil || got.UniqueKey != "report" {
		t.Fatalf("get: %+v, %v", got, err)
	}

	// A window that leaves pending out lets a job in beside a pending
	// holder: no unique index may stand in its way.
	held := e.enqueue(job.Request{Kind: "later", UniqueKey: "k2", UniqueStates: []job.State{job.Pending}, Delay: time.Hour})
	if _, made := e.enqueueKeyed(job.Request{Kind: "later", UniqueKey: "k2", UniqueStates: []job.State{job.Pending}}); made {
		t.Fatal("pending holder did not hold a pending window")
	}
	beside, made := e.enqueueKeyed(job.Request{Kind: "later", UniqueKey: "k2", UniqueStates: []job.State{job.Completed, job.Cancelled}, Delay: time.Hour})
	if !made || beside.ID == held.ID {
		t.Fatalf("completed/cancelled window over a pending holder: made %v", made)
	}
	// Keys with and without a window are apart.
	plain, made := e.enqueueKeyed(job.Request{Kind: "later", UniqueKey: "k2", Delay: time.Hour})
	if !made {
		t.Fatal("a key without a window was held by jobs enqueued with one")
	}
	if j, made := e.enqueueKeyed(job.Request{Kind: "later", UniqueKey: "k2", Delay: time.Hour}); made || j.ID != plain.ID {
		t.Fatal("the key without a window is not held as ever")
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE unique_window_key IS NOT NULL AND unique_key IS NOT NULL`); n != 0 {
		t.Fatalf("%d jobs carry both keys", n)
	}
	// An enqueue without a window writes no window key (today's path).
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE id = $1 AND unique_window_key IS NULL AND unique_key = 'k2'`, plain.ID); n != 1 {
		t.Fatal("the enqueue without a window took another path")
	}
}

// unique_for holds the key for that long from the holder's enqueue,
// whatever its state; with states too, both must hold.
func TestUniqueWindowPeriod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	hour := job.Request{Kind: "p", UniqueKey: "daily", UniqueFor: time.Hour, Delay: time.Hour}
	first, made := e.enqueueKeyed(hour)
	if !made {
		t.Fatal("first not made")
	}
	if _, err := e.client.Cancel(ctx, "", first.ID); err != nil {
		t.Fatal(err)
	}
	if j, made := e.enqueueKeyed(hour); made || j.ID != first.ID || j.State != job.Cancelled {
		t.Fatalf("within the hour, a cancelled holder: made %v, %+v", made, j)
	}
	// The hour passed.
	e.exec(`UPDATE gaffer.jobs SET created_at = created_at - interval '61 minutes' WHERE id = $1`, first.ID)
	second, made := e.enqueueKeyed(hour)
	if !made || second.ID == first.ID {
		t.Fatalf("after the hour: made %v", made)
	}

	// A window that ends by the clock.
	short := job.Request{Kind: "p", UniqueKey: "burst", UniqueFor: time.Second, Delay: time.Hour}
	a, _ := e.enqueueKeyed(short)
	if j, made := e.enqueueKeyed(short); made || j.ID != a.ID {
		t.Fatal("within the second: not held")
	}
	time.Sleep(1100 * time.Millisecond)
	if j, made := e.enqueueKeyed(short); !made || j.ID == a.ID {
		t.Fatal("after the second: still held")
	}

	// Both: held only by a pending holder enqueued within the hour.
	both := job.Request{Kind: "p", UniqueKey: "both", UniqueFor: time.Hour, UniqueStates: []job.State{job.Pending}, Delay: time.Hour}
	b, _ := e.enqueueKeyed(both)
	if j, made := e.enqueueKeyed(both); made || j.ID != b.ID {
		t.Fatal("pending within the hour: not held")
	}
	e.exec(`UPDATE gaffer.jobs SET created_at = created_at - interval '2 hours' WHERE id = $1`, b.ID)
	c, made := e.enqueueKeyed(both)
	if !made || c.ID == b.ID {
		t.Fatal("pending but enqueued before the hour: still held")
	}
	if _, err := e.client.Cancel(ctx, "", c.ID); err != nil {
		t.Fatal(err)
	}
	if d, made := e.enqueueKeyed(both); !made || d.ID == c.ID {
		t.Fatal("within the hour but cancelled: still held")
	}
}

// Many enqueues of one key at once, from separate pools (as from nodes
// of their own), make one job when the window says one.
func TestUniqueWindowConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	clients := make([]*job.Client, 4)
	for i := range clients {
		cfg := e.st.Pool().Config().Copy()
		cfg.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		clients[i] = job.NewClient(pool, nil)
	}
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		ids := make(chan int64, 32)
		start := make(chan struct{})
		for g := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := clients[g%len(clients)].Enqueue(ctx, job.Request{Kind: "r", UniqueKey: key, UniqueFor: time.Hour,
					UniqueStates: []job.State{job.Pending, job.Completed}, Delay: time.Hour})
				if err != nil {
					t.Error(err)
					return
				}
				ids <- res.Job.ID
			}()
		}
		close(start)
		wg.Wait()
		close(ids)
		distinct := map[int64]bool{}
		for id := range ids {
			distinct[id] = true
		}
		if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE unique_window_key = $1`, key); n != 1 || len(distinct) != 1 {
			t.Fatalf("round %d: 32 concurrent enqueues of one key made %d jobs (%d ids answered)", round, n, len(distinct))
		}
	}
}

// EnqueueTx holds the key's lock until the caller's transaction ends, and
// refuses a transaction whose snapshot could miss a concurrent holder;
// batches refuse windows; nothing is written on a refusal.
func TestUniqueWindowPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := job.Request{Kind: "t", UniqueKey: "tx", UniqueFor: time.Hour, Delay: time.Hour}

	tx, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	inTx, err := e.client.EnqueueTx(ctx, tx, r)
	if err != nil || inTx.Existing {
		t.Fatalf("in tx: %+v, %v", inTx, err)
	}
	// A concurrent enqueue of the key waits for the transaction, then sees
	// its job.
	other := make(chan job.Result, 1)
	go func() {
		res, err := e.client.Enqueue(ctx, r)
		if err != nil {
			t.Error(err)
		}
		other <- res
	}()
	select {
	case res := <-other:
		t.Fatalf("an enqueue of the key did not wait for the open transaction: %+v", res)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-other; !res.Existing || res.Job.ID != inTx.Job.ID {
		t.Fatalf("after commit: %+v", res)
	}

	// Above READ COMMITTED: refused, nothing written.
	rr, err := e.st.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Rollback(ctx)
	rk := r
	rk.UniqueKey = "rr"
	if _, err := e.client.EnqueueTx(ctx, rr, rk); !errors.Is(err, job.ErrWindowIsolation) {
		t.Fatalf("repeatable read: %v", err)
	}
	if err := rr.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE unique_window_key = 'rr'`); n != 0 {
		t.Fatal("a refused enqueue wrote a job")
	}

	// A batch refuses a window, naming the job and field.
	_, err = e.client.EnqueueMany(ctx, []job.Request{{Kind: "t"}, {Kind: "t", UniqueKey: "b", UniqueFor: time.Minute}})
	var ve *job.ValidationError
	if !errors.As(err, &ve) || ve.Field != "jobs[1].unique_for" {
		t.Fatalf("batch with a window: %v", err)
	}
	_, err = e.client.EnqueueMany(ctx, []job.Request{{Kind: "t", UniqueKey: "b", UniqueStates: []job.State{job.Pending}}})
	if !errors.As(err, &ve) || ve.Field != "jobs[0].unique_states" {
		t.Fatalf("batch with window states: %v", err)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE kind = 't'`); n != 1 {
		t.Fatalf("%d jobs of kind t, want the one from the transaction", n)
	}
}
