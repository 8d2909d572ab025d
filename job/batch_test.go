package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
)

func (e *env) openBatch(tenant string) *job.Batch {
	e.t.Helper()
	b, err := e.client.OpenBatch(context.Background(), job.BatchRequest{Tenant: tenant, Kind: "cb", Args: map[string]int{"order": 7}})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// callbacks reads the callback jobs of batch id: their count and the
// summary of the first.
func (e *env) callbacks(id int64) (int, job.BatchSummary) {
	e.t.Helper()
	var n int
	var first []byte
	err := e.st.Pool().QueryRow(context.Background(), `SELECT count(*), min(args::text) FROM gaffer.jobs
		WHERE kind = 'cb' AND (args->>'batch')::bigint = $1`, id).Scan(&n, &first)
	if err != nil {
		e.t.Fatal(err)
	}
	var s job.BatchSummary
	if first != nil {
		if err := json.Unmarshal(first, &s); err != nil {
			e.t.Fatal(err)
		}
	}
	return n, s
}

// The last jobs of many closed batches finish at the same instant, each
// in its own transaction on its own connection (as completions on
// different nodes): every batch's callback is enqueued exactly once, with
// the right summary. Red with the batch's counting moved out of its row
// lock (a count of unfinished jobs from each transaction's snapshot: two
// last jobs each see the other unfinished, and no callback fires).
func TestBatchCallbackExactlyOnceUnderConcurrentFinishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	const batches, perBatch = 40, 8
	for round := range batches {
		b := e.openBatch("default")
		reqs := make([]job.Request, perBatch)
		for i := range reqs {
			reqs[i] = job.Request{Kind: "w", Batch: b.ID}
		}
		ids, err := e.client.EnqueueMany(ctx, reqs)
		if err != nil {
			t.Fatal(err)
		}
		// Half the rounds close before the finishes, half race the close
		// against them.
		closeFirst := round%2 == 0
		if closeFirst {
			if _, err := e.client.CloseBatch(ctx, "default", b.ID); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string]int{}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, id := range ids {
			st := []string{"completed", "failed", "cancelled"}[rng.IntN(3)]
			want[st]++
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := e.st.Pool().Exec(ctx, `UPDATE gaffer.jobs SET state = $2, finalized_at = now() WHERE id = $1`, id, st); err != nil {
					t.Error(err)
				}
			}()
		}
		if !closeFirst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := e.client.CloseBatch(ctx, "default", b.ID); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		n, s := e.callbacks(b.ID)
		if n != 1 {
			t.Fatalf("round %d (close first %v): batch %d has %d callbacks, want 1", round, closeFirst, b.ID, n)
		}
		if s.Total != perBatch || s.Completed != int64(want["completed"]) || s.Failed != int64(want["failed"]) ||
			s.Cancelled != int64(want["cancelled"]) || len(s.FailedIDs) != want["failed"] || string(s.Args) != `{"order":7}` {
			t.Fatalf("round %d: summary %+v, want %v", round, s, want)
		}
		got, err := e.client.GetBatch(ctx, "default", b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != job.BatchFinished || got.CallbackJobID == 0 {
			t.Fatalf("round %d: batch %+v", round, got)
		}
	}
}

// A real worker (two "nodes") runs every job of many batches; each
// batch's callback runs exactly once, after all its jobs, with their
// outcomes.
func TestBatchCallbackRunsOnceAfterItsJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var done sync.Map // job id -> true, once run
	var mu sync.Mutex
	got := map[int64]int{}
	var early atomic.Int64
	e.reg.HandleFunc("w", func(ctx context.Context, j *job.Job) error {
		done.Store(j.ID, true)
		var a struct{ Fail bool }
		_ = j.UnmarshalArgs(&a)
		if a.Fail {
			return job.Permanent(errors.New("told to fail"))
		}
		return nil
	})
	ids := map[int64][]int64{}
	job.HandleArgs(e.reg, "cb", func(ctx context.Context, j *job.Job, s job.BatchSummary) error {
		mu.Lock()
		got[s.Batch]++
		for _, id := range ids[s.Batch] {
			if _, ok := done.Load(id); !ok {
				early.Add(1)
			}
		}
		mu.Unlock()
		return nil
	})
	const batches, perBatch = 12, 20
	var order []int64
	for range batches {
		b := e.openBatch("default")
		for part := range 2 { // added over two calls
			reqs := make([]job.Request, perBatch/2)
			for i := range reqs {
				reqs[i] = job.Request{Kind: "w", Batch: b.ID, MaxAttempts: 1, Args: map[string]bool{"fail": i == 0 && part == 1}}
			}
			got, err := e.client.EnqueueMany(ctx, reqs)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			ids[b.ID] = append(ids[b.ID], got...)
			mu.Unlock()
		}
		order = append(order, b.ID)
	}
	e.startWorker(job.WorkerConfig{NodeID: "node-a", Queues: map[string]int{"default": 8}})
	e.startWorker(job.WorkerConfig{NodeID: "node-b", Queues: map[string]int{"default": 8}})
	for _, id := range order {
		if _, err := e.client.CloseBatch(ctx, "", id); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == batches || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a second callback would show by now
	mu.Lock()
	defer mu.Unlock()
	for _, id := range order {
		if got[id] != 1 {
			t.Fatalf("batch %d: callback ran %d times, want 1", id, got[id])
		}
		n, s := e.callbacks(id)
		if n != 1 || s.Completed != perBatch-1 || s.Failed != 1 || len(s.FailedIDs) != 1 {
			t.Fatalf("batch %d: %d callbacks, summary %+v", id, n, s)
		}
	}
	if early.Load() != 0 {
		t.Fatalf("%d callbacks ran before a job of their batch", early.Load())
	}
}

// Closing an empty batch fires its callback at once; adding to a closed
// batch is refused and writes nothing; closing twice changes nothing.
func TestBatchCloseAndRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	b := e.openBatch("default")
	closed, err := e.client.CloseBatch(ctx, "default", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if closed.State != job.BatchFinished || closed.CallbackJobID == 0 {
		t.Fatalf("empty batch after close: %+v", closed)
	}
	if n, s := e.callbacks(b.ID); n != 1 || s.Total != 0 || s.FailedIDs == nil {
		t.Fatalf("empty batch: %d callbacks, %+v", n, s)
	}
	var before int
	e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs`).Scan(&before)
	if _, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: b.ID}); !errors.Is(err, job.ErrBatchClosed) {
		t.Fatalf("enqueue into a finished batch: %v, want ErrBatchClosed", err)
	}
	if _, err := e.client.EnqueueMany(ctx, []job.Request{{Kind: "w", Batch: b.ID}, {Kind: "w", Batch: b.ID}}); !errors.Is(err, job.ErrBatchClosed) {
		t.Fatalf("enqueue many into a finished batch: %v, want ErrBatchClosed", err)
	}
	var after int
	e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs`).Scan(&after)
	if after != before {
		t.Fatalf("a refused enqueue wrote %d jobs", after-before)
	}
	if again, err := e.client.CloseBatch(ctx, "default", b.ID); err != nil || again.CallbackJobID != closed.CallbackJobID {
		t.Fatalf("close again: %+v, %v", again, err)
	}
	if n, _ := e.callbacks(b.ID); n != 1 {
		t.Fatalf("close again made a callback: %d", n)
	}
	// A closed batch with a job left: refused too, and the callback waits.
	b2 := e.openBatch("default")
	res, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: b2.ID})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := e.client.CloseBatch(ctx, "default", b2.ID); err != nil || c.State != job.BatchClosed || c.Counts[job.Pending] != 1 {
		t.Fatalf("close with a pending job: %+v, %v", c, err)
	}
	if _, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: b2.ID}); !errors.Is(err, job.ErrBatchClosed) {
		t.Fatalf("enqueue into a closed batch: %v", err)
	}
	if n, _ := e.callbacks(b2.ID); n != 0 {
		t.Fatal("callback before the job was final")
	}
	if _, err := e.client.Cancel(ctx, "default", res.Job.ID); err != nil {
		t.Fatal(err)
	}
	if n, s := e.callbacks(b2.ID); n != 1 || s.Cancelled != 1 {
		t.Fatalf("after its job was cancelled: %d callbacks, %+v", n, s)
	}
	// Refusals by validation.
	for _, r := range []job.Request{
		{Kind: "w", Batch: -1},
		{Kind: "w", Batch: b2.ID, UniqueKey: "k"},
		{Kind: "w", Batch: b2.ID, Debounce: &job.Debounce{Key: "k", Window: time.Second}},
	} {
		var ve *job.ValidationError
		if _, err := e.client.Enqueue(ctx, r); !errors.As(err, &ve) || ve.Field != "batch" {
			t.Fatalf("%+v: %v, want a validation error on batch", r, err)
		}
	}
	for _, rs := range [][]job.Request{{{Kind: "w", Batch: b2.ID}, {Kind: "w"}}, {{Kind: "w"}, {Kind: "w", Batch: b2.ID}}} {
		var ve *job.ValidationError
		if _, err := e.client.EnqueueMany(ctx, rs); !errors.As(err, &ve) || ve.Field != "batch" {
			t.Fatalf("mixed batches: %v, want a validation error on batch", err)
		}
	}
	if _, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: 1 << 40}); !errors.Is(err, job.ErrBatchNotFound) {
		t.Fatalf("no such batch: %v", err)
	}
	if _, err := e.client.OpenBatch(ctx, job.BatchRequest{Kind: "bad kind!"}); err == nil {
		t.Fatal("bad callback kind accepted")
	}
	big := fmt.Sprintf(`{"x":%q}`, make([]byte, job.MaxBatchArgsBytes))
	if _, err := e.client.OpenBatch(ctx, job.BatchRequest{Kind: "cb", Args: json.RawMessage(big)}); err == nil {
		t.Fatal("oversized callback args accepted")
	}
}

// A tenant sees and uses only its own batches.
func TestBatchTenants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	b := e.openBatch("acme")
	if _, err := e.client.GetBatch(ctx, "globex", b.ID); !errors.Is(err, job.ErrBatchNotFound) {
		t.Fatalf("other tenant's get: %v", err)
	}
	if _, err := e.client.CloseBatch(ctx, "globex", b.ID); !errors.Is(err, job.ErrBatchNotFound) {
		t.Fatalf("other tenant's close: %v", err)
	}
	if _, err := e.client.CancelBatch(ctx, "globex", b.ID); !errors.Is(err, job.ErrBatchNotFound) {
		t.Fatalf("other tenant's cancel: %v", err)
	}
	if _, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Tenant: "globex", Batch: b.ID}); !errors.Is(err, job.ErrBatchNotFound) {
		t.Fatalf("other tenant's enqueue: %v", err)
	}
	if l, err := e.client.ListBatches(ctx, job.BatchFilter{Tenant: "globex"}); err != nil || len(l) != 0 {
		t.Fatalf("other tenant's list: %v, %v", l, err)
	}
	if l, err := e.client.ListBatches(ctx, job.BatchFilter{Tenant: "acme", State: job.BatchOpen}); err != nil || len(l) != 1 {
		t.Fatalf("own list: %v, %v", l, err)
	}
	if got, err := e.client.GetBatch(ctx, "acme", b.ID); err != nil || got.State != job.BatchOpen {
		t.Fatalf("own get: %+v, %v", got, err)
	}
	if _, err := e.client.ListBatches(ctx, job.BatchFilter{State: "nope"}); err == nil {
		t.Fatal("bad state filter accepted")
	}
}

// Cancelling a batch cancels its pending jobs, asks its running one to
// stop, and fires the callback once, when that one is final.
func TestBatchCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	b := e.openBatch("default")
	ids, err := e.client.EnqueueMany(ctx, []job.Request{{Kind: "w", Batch: b.ID}, {Kind: "w", Batch: b.ID}, {Kind: "w", Batch: b.ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`UPDATE gaffer.jobs SET state = 'completed', finalized_at = now() WHERE id = $1`, ids[0])
	e.exec(`UPDATE gaffer.jobs SET state = 'running', attempt = 1, lease_token = 1, lease_expires_at = now() + interval '1 minute', node = 'n' WHERE id = $1`, ids[1])
	c, err := e.client.CancelBatch(ctx, "default", b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.State != job.BatchCancelled || c.Counts[job.Cancelled] != 1 || c.Counts[job.Running] != 1 {
		t.Fatalf("after cancel: %+v", c)
	}
	if n, _ := e.callbacks(b.ID); n != 0 {
		t.Fatal("callback while a job still runs")
	}
	if _, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: b.ID}); !errors.Is(err, job.ErrBatchClosed) {
		t.Fatalf("enqueue into a cancelled batch: %v", err)
	}
	var requested bool
	e.st.Pool().QueryRow(ctx, `SELECT cancel_requested FROM gaffer.jobs WHERE id = $1`, ids[1]).Scan(&requested)
	if !requested {
		t.Fatal("the running job was not asked to stop")
	}
	// Its node ends it cancelled.
	e.exec(`UPDATE gaffer.jobs SET state = 'cancelled', lease_expires_at = NULL, finalized_at = now() WHERE id = $1`, ids[1])
	n, s := e.callbacks(b.ID)
	if n != 1 || !s.BatchCancelled || s.Completed != 1 || s.Cancelled != 2 {
		t.Fatalf("after the last job: %d callbacks, %+v", n, s)
	}
	if again, err := e.client.CancelBatch(ctx, "default", b.ID); err != nil || again.State != job.BatchFinished {
		t.Fatalf("cancel a finished batch: %+v, %v", again, err)
	}
	if n, _ := e.callbacks(b.ID); n != 1 {
		t.Fatal("a second cancel made a callback")
	}
	// A pending batch job deleted counts as cancelled.
	b2 := e.openBatch("default")
	res, _ := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: b2.ID})
	e.client.CloseBatch(ctx, "default", b2.ID)
	e.exec(`DELETE FROM gaffer.jobs WHERE id = $1`, res.Job.ID)
	if n, s := e.callbacks(b2.ID); n != 1 || s.Cancelled != 1 {
		t.Fatalf("deleted job: %d callbacks, %+v", n, s)
	}
}

// A batch's last job is running when its node is declared dead: the
// rescue makes it retry (not final), so no callback yet; the stale
// attempt's completion, when it comes, is refused and counts nothing;
// the retry completes and the callback fires once, counting it once.
func TestBatchJobRescuedFromADeadNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan int, 4)
	var callbacks atomic.Int64
	e.reg.HandleFunc("w", func(ctx context.Context, j *job.Job) error {
		started <- j.Attempt
		if j.Attempt == 1 {
			<-release // the dead node's attempt, which ends late
		}
		return nil
	})
	e.reg.HandleFunc("cb", func(ctx context.Context, j *job.Job) error {
		callbacks.Add(1)
		return nil
	})
	b := e.openBatch("default")
	res, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: b.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CloseBatch(ctx, "default", b.ID); err != nil {
		t.Fatal(err)
	}
	e.startWorker(job.WorkerConfig{NodeID: "node-a", Queues: map[string]int{"default": 4}})
	if a := <-started; a != 1 {
		t.Fatalf("first attempt %d", a)
	}
	// The dead-node rescuer's statement for node-a.
	rescued, err := e.st.RescueJobs(ctx, nil, "node-a", 10, "node node-a died")
	if err != nil || len(rescued) != 1 {
		t.Fatalf("rescue: %v, %v", rescued, err)
	}
	if n, _ := e.callbacks(b.ID); n != 0 {
		t.Fatal("callback while the rescued job still retries")
	}
	if a := <-started; a != 2 {
		t.Fatalf("second attempt %d", a)
	}
	deadline := time.Now().Add(10 * time.Second)
	for callbacks.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(release) // the stale attempt completes now: refused
	time.Sleep(300 * time.Millisecond)
	n, s := e.callbacks(b.ID)
	if n != 1 || callbacks.Load() != 1 || s.Completed != 1 || s.Total != 1 {
		t.Fatalf("%d callbacks (%d ran), summary %+v", n, callbacks.Load(), s)
	}
	got, err := e.client.GetBatch(ctx, "default", b.ID)
	if err != nil || got.Counts[job.Completed] != 1 {
		t.Fatalf("batch %+v, %v", got, err)
	}
	j, _ := e.client.Get(ctx, "default", res.Job.ID)
	if j.State != job.Completed || j.Attempt != 2 {
		t.Fatalf("job %+v", j)
	}
}

// A DLQ replay of a batch's failed job, after the callback fired, makes a
// job outside the batch: the batch keeps counting the original as failed,
// and its callback does not fire again when the replay completes.
func TestBatchReplayAfterTheCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.reg.HandleFunc("w", func(ctx context.Context, j *job.Job) error {
		if j.ReplayOf == 0 {
			return job.Permanent(errors.New("bad row"))
		}
		return nil
	})
	b := e.openBatch("default")
	res, err := e.client.Enqueue(ctx, job.Request{Kind: "w", Batch: b.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CloseBatch(ctx, "default", b.ID); err != nil {
		t.Fatal(err)
	}
	e.startWorker(job.WorkerConfig{NodeID: "node-a", Queues: map[string]int{"default": 2}})
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := e.callbacks(b.ID); n == 0 && time.Now().Before(deadline); n, _ = e.callbacks(b.ID) {
		time.Sleep(20 * time.Millisecond)
	}
	n, s := e.callbacks(b.ID)
	if n != 1 || s.Failed != 1 || len(s.FailedIDs) != 1 || s.FailedIDs[0] != res.Job.ID {
		t.Fatalf("%d callbacks, summary %+v", n, s)
	}
	replay, err := e.client.Retry(ctx, "default", res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(deadline) {
		if j, _ := e.client.Get(ctx, "default", replay); j != nil && j.State == job.Completed {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var inBatch int
	e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE batch_id = $1`, b.ID).Scan(&inBatch)
	if inBatch != 1 {
		t.Fatalf("the batch holds %d jobs after the replay, want 1 (the replay is outside it)", inBatch)
	}
	time.Sleep(200 * time.Millisecond)
	if n, _ := e.callbacks(b.ID); n != 1 {
		t.Fatalf("%d callbacks after the replay", n)
	}
	got, err := e.client.GetBatch(ctx, "default", b.ID)
	if err != nil || got.Counts[job.Failed] != 1 || got.State != job.BatchFinished {
		t.Fatalf("batch after the replay: %+v, %v", got, err)
	}
}
