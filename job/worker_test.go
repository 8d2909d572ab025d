package job_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func TestEnqueueInTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ran := make(chan int64, 10)
	e.reg.HandleFunc("tx", func(ctx context.Context, j *job.Job) error {
		ran <- j.ID
		return nil
	})
	ctx := context.Background()

	// Rolled back: the job never exists, and nothing runs it.
	tx, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rolled, err := e.client.EnqueueTx(ctx, tx, job.Request{Kind: "tx"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Get(ctx, "", rolled.Job.ID); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("rolled-back job: Get = %v, want ErrNotFound", err)
	}

	// Committed: it exists and runs.
	tx, _ = e.st.Pool().Begin(ctx)
	committed, err := e.client.EnqueueTx(ctx, tx, job.Request{Kind: "tx"})
	if err != nil {
		t.Fatal(err)
	}
	// Not visible to others before commit.
	if _, err := e.client.Get(ctx, "", committed.Job.ID); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("uncommitted job visible: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.startWorker(job.WorkerConfig{})
	e.waitState(committed.Job.ID, job.Completed)
	if got := <-ran; got != committed.Job.ID {
		t.Fatalf("ran job %d, want %d", got, committed.Job.ID)
	}
	select {
	case id := <-ran:
		t.Fatalf("job %d ran too", id)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestResultAndArgs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type add struct{ A, B int }
	job.HandleArgs(e.reg, "add", func(ctx context.Context, j *job.Job, args add) error {
		return j.SetResult(map[string]int{"sum": args.A + args.B, "attempt": j.Attempt})
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "add", Args: add{2, 3}})
	done := e.waitState(j.ID, job.Completed)
	if string(done.Result) != `{"attempt":1,"sum":5}` {
		t.Fatalf("result %s", done.Result)
	}
	if done.Node != "node-a" || done.Attempt != 1 {
		t.Fatalf("node %q attempt %d", done.Node, done.Attempt)
	}
	// Args that do not decode into the handler's type fail permanently.
	bad := e.enqueue(job.Request{Kind: "add", Args: []int{1}})
	failed := e.waitState(bad.ID, job.Failed)
	if failed.Attempt != 1 {
		t.Fatalf("undecodable args retried: attempt %d", failed.Attempt)
	}
}

func TestRetryWithBackoffThenDLQ(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var calls atomic.Int32
	e.reg.HandleFunc("flaky", func(ctx context.Context, j *job.Job) error {
		calls.Add(1)
		return fmt.Errorf("boom %d", j.Attempt)
	}, job.KindOptions{Backoff: job.ConstantBackoff(time.Hour)})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "flaky", MaxAttempts: 3})

	// Attempt 1 fails and the job waits out a one-hour backoff, by the
	// database clock.
	r := e.waitState(j.ID, job.Retrying)
	wait := r.RunAt.Sub(*r.AttemptedAt)
	if wait < 59*time.Minute || wait > 61*time.Minute {
		t.Fatalf("retry due %s after the attempt, want ~1h", wait)
	}
	if len(r.Errors) != 1 || r.Errors[0].Error != "boom 1" || r.Errors[0].Kind != "error" || r.Errors[0].Attempt != 1 {
		t.Fatalf("errors %+v", r.Errors)
	}
	// Instead of sleeping an hour, move the retry's due time to now.
	for attempt := 2; attempt <= 3; attempt++ {
		e.exec(`UPDATE gaffer.jobs SET run_at = now() WHERE id = $1`, j.ID)
		e.client.Enqueue(context.Background(), job.Request{Kind: "nudge", Queue: "other"}) // no-op; retries are found by the poll
		want := job.Retrying
		if attempt == 3 {
			want = job.Failed
		}
		e.waitFor(j.ID, fmt.Sprintf("attempt %d %s", attempt, want), func(x *job.Job) bool {
			return x.Attempt == attempt && x.State == want
		})
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
	entries, err := e.dlqEntries()
	if err != nil || len(entries) != 1 || entries[0] != j.ID {
		t.Fatalf("DLQ jobs %v, %v", entries, err)
	}
	if got := e.settledCounter(2, "gaffer_job_retried_total", "kind", "flaky"); got != 2 {
		t.Fatalf("retried_total = %v, want 2", got)
	}
	if got := e.settledCounter(1, "gaffer_job_failed_total", "kind", "flaky"); got != 1 {
		t.Fatalf("failed_total = %v, want 1", got)
	}
}

func (e *env) dlqEntries() ([]int64, error) {
	rows, err := e.st.Pool().Query(context.Background(), `SELECT job_id FROM gaffer.dlq ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	b := job.ExponentialBackoff{Base: time.Second, Max: time.Minute, Jitter: -1}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := b.Delay(500); got != time.Minute {
		t.Errorf("Delay(500) = %s, want the cap", got)
	}
	jittered := job.ExponentialBackoff{Base: 10 * time.Second, Jitter: 0.2}
	seen := map[time.Duration]bool{}
	for range 50 {
		d := jittered.Delay(1)
		if d < 8*time.Second || d > 12*time.Second {
			t.Fatalf("jittered delay %s outside ±20%% of 10s", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("jitter produced only %d distinct delays", len(seen))
	}
}

func TestPermanentErrorGoesStraightToDLQ(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("perm", func(ctx context.Context, j *job.Job) error {
		return job.Permanent(errors.New("bad input"))
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "perm", MaxAttempts: 10})
	f := e.waitState(j.ID, job.Failed)
	if f.Attempt != 1 {
		t.Fatalf("attempts %d, want 1", f.Attempt)
	}
	var reason string
	e.st.Pool().QueryRow(context.Background(), `SELECT reason FROM gaffer.dlq WHERE job_id = $1`, j.ID).Scan(&reason)
	if reason != "permanent" {
		t.Fatalf("DLQ reason %q", reason)
	}
}

// A handler that refused to call a destination the operator has not
// allowed fails for good, marked destination_blocked: retrying cannot help.
func TestDestinationBlockedFailsForGoodWithItsKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("blocked", func(ctx context.Context, j *job.Job) error {
		return job.DestinationBlocked(errors.New("POST http://127.0.0.1/: destination not allowed"))
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "blocked", MaxAttempts: 10})
	f := e.waitState(j.ID, job.Failed)
	if f.Attempt != 1 || len(f.Errors) != 1 {
		t.Fatalf("attempt %d, errors %+v; want one attempt", f.Attempt, f.Errors)
	}
	if got := f.Errors[0]; got.Kind != "destination_blocked" || got.Error != "permanent: POST http://127.0.0.1/: destination not allowed" {
		t.Fatalf("error %+v, want kind destination_blocked", got)
	}
	var reason string
	e.st.Pool().QueryRow(context.Background(), `SELECT reason FROM gaffer.dlq WHERE job_id = $1`, j.ID).Scan(&reason)
	if reason != "permanent" {
		t.Fatalf("DLQ reason %q", reason)
	}
}

func TestPanicIsAFailedAttemptWithStack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("panics", func(ctx context.Context, j *job.Job) error {
		var m map[string]int
		m["x"] = 1 // nil map write
		return nil
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "panics", MaxAttempts: 1})
	f := e.waitState(j.ID, job.Failed)
	if len(f.Errors) != 1 || f.Errors[0].Kind != "panic" || !strings.Contains(f.Errors[0].Error, "nil map") ||
		!strings.Contains(f.Errors[0].Stack, "worker_test.go") {
		t.Fatalf("errors %+v", f.Errors)
	}
}

func TestTimeoutCancelsHandlerContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	causes := make(chan error, 1)
	e.reg.HandleFunc("slow", func(ctx context.Context, j *job.Job) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "slow", Timeout: 100 * time.Millisecond, MaxAttempts: 1})
	f := e.waitState(j.ID, job.Failed)
	if cause := <-causes; !errors.Is(cause, job.ErrTimeout) {
		t.Fatalf("cause %v", cause)
	}
	if f.Errors[0].Kind != "timeout" {
		t.Fatalf("error kind %q", f.Errors[0].Kind)
	}
	// A kind's default timeout applies to jobs enqueued without one.
	e.reg.HandleFunc("slow-default", func(ctx context.Context, j *job.Job) error {
		<-ctx.Done()
		return ctx.Err()
	}, job.KindOptions{Timeout: 50 * time.Millisecond})
	j2 := e.enqueue(job.Request{Kind: "slow-default", MaxAttempts: 1})
	if f := e.waitState(j2.ID, job.Failed); f.Errors[0].Kind != "timeout" {
		t.Fatalf("kind default timeout: %+v", f.Errors)
	}
}

func TestCancelPendingAndRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	started := make(chan int64, 1)
	causes := make(chan error, 1)
	e.reg.HandleFunc("long", func(ctx context.Context, j *job.Job) error {
		started <- j.ID
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	// Pending: cancelled at once, never runs.
	pending := e.enqueue(job.Request{Kind: "long", Delay: time.Hour})
	st, err := e.client.Cancel(ctx, "", pending.ID)
	if err != nil || st != job.Cancelled {
		t.Fatalf("cancel pending = %s, %v", st, err)
	}
	if _, err := e.client.Cancel(ctx, "", pending.ID); !errors.Is(err, job.ErrFinished) {
		t.Fatalf("second cancel = %v, want ErrFinished", err)
	}
	if _, err := e.client.Cancel(ctx, "", 999999); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("cancel unknown = %v", err)
	}

	// Running: the handler's context is cancelled within a second and the
	// job ends cancelled.
	e.startWorker(job.WorkerConfig{})
	running := e.enqueue(job.Request{Kind: "long"})
	<-started
	asked := time.Now()
	st, err = e.client.Cancel(ctx, "", running.ID)
	if err != nil || st != job.Running {
		t.Fatalf("cancel running = %s, %v", st, err)
	}
	select {
	case cause := <-causes:
		if !errors.Is(cause, job.ErrCancelled) {
			t.Fatalf("cause %v", cause)
		}
		if d := time.Since(asked); d > time.Second {
			t.Fatalf("handler cancelled after %s", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("running handler not cancelled")
	}
	e.waitState(running.ID, job.Cancelled)
}

func TestCancelRunningWithoutNotification(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{}, 1)
	e.reg.HandleFunc("long", func(ctx context.Context, j *job.Job) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "long"})
	<-started
	// Mark it as an API cancel would, but send no NOTIFY: the worker's
	// periodic check must find it.
	e.exec(`UPDATE gaffer.jobs SET cancel_requested = true WHERE id = $1`, j.ID)
	e.waitState(j.ID, job.Cancelled)
}

func TestHandlerCancelAndSnooze(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("self-cancel", func(ctx context.Context, j *job.Job) error {
		return job.Cancel(errors.New("not needed any more"))
	})
	var snoozes atomic.Int32
	e.reg.HandleFunc("snoozer", func(ctx context.Context, j *job.Job) error {
		if snoozes.Add(1) <= 3 {
			return job.Snooze(0)
		}
		return nil
	})
	e.startWorker(job.WorkerConfig{})
	c := e.enqueue(job.Request{Kind: "self-cancel", MaxAttempts: 5})
	if got := e.waitState(c.ID, job.Cancelled); got.Attempt != 1 {
		t.Fatalf("cancelled after %d attempts", got.Attempt)
	}
	// Snoozing three times with max_attempts 2 still completes: a snooze
	// is not a failed attempt.
	s := e.enqueue(job.Request{Kind: "snoozer", MaxAttempts: 2})
	done := e.waitState(s.ID, job.Completed)
	if done.Attempt != 4 || done.MaxAttempts != 5 || len(done.Errors) != 0 {
		t.Fatalf("attempt %d max %d errors %v", done.Attempt, done.MaxAttempts, done.Errors)
	}
}

func TestSnoozeDelaysByDatabaseClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("later", func(ctx context.Context, j *job.Job) error { return job.Snooze(time.Hour) })
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "later"})
	p := e.waitFor(j.ID, "snoozed", func(x *job.Job) bool { return x.State == job.Pending && x.Attempt == 1 })
	if d := p.RunAt.Sub(*p.AttemptedAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("snoozed until %s after the attempt", d)
	}
}

func TestUniqueKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	first, err := e.client.Enqueue(ctx, job.Request{Kind: "u", UniqueKey: "report-42", Delay: time.Hour})
	if err != nil || first.Existing {
		t.Fatalf("first = %+v, %v", first, err)
	}
	second, err := e.client.Enqueue(ctx, job.Request{Kind: "u", UniqueKey: "report-42"})
	if err != nil || !second.Existing || second.Job.ID != first.Job.ID {
		t.Fatalf("second = %+v, %v", second, err)
	}
	// Another tenant has its own key space.
	other, err := e.client.Enqueue(ctx, job.Request{Kind: "u", UniqueKey: "report-42", Tenant: "acme"})
	if err != nil || other.Existing {
		t.Fatalf("other tenant = %+v, %v", other, err)
	}
	// Concurrent enqueues of one key make exactly one job.
	var wg sync.WaitGroup
	ids := make(chan int64, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.client.Enqueue(ctx, job.Request{Kind: "u", UniqueKey: "race"})
			if err != nil {
				t.Error(err)
				return
			}
			ids <- r.Job.ID
		}()
	}
	wg.Wait()
	close(ids)
	distinct := map[int64]bool{}
	for id := range ids {
		distinct[id] = true
	}
	if len(distinct) != 1 {
		t.Fatalf("concurrent unique enqueues made %d jobs", len(distinct))
	}
	// Once the holder finishes, the key is free again.
	if _, err := e.client.Cancel(ctx, "", first.Job.ID); err != nil {
		t.Fatal(err)
	}
	third, err := e.client.Enqueue(ctx, job.Request{Kind: "u", UniqueKey: "report-42"})
	if err != nil || third.Existing || third.Job.ID == first.Job.ID {
		t.Fatalf("after finish = %+v, %v", third, err)
	}
}

func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	var order []int
	e.reg.HandleFunc("p", func(ctx context.Context, j *job.Job) error {
		mu.Lock()
		order = append(order, j.Priority)
		mu.Unlock()
		return nil
	})
	var last *job.Job
	for _, p := range []int{5, 9, 0, 3, 0, 7} {
		last = e.enqueue(job.Request{Kind: "p", Priority: p})
	}
	// One slot: jobs run one at a time, in priority order.
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"default": 1}})
	e.waitState(last.ID, job.Completed)
	e.waitFor(last.ID, "all done", func(*job.Job) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 6
	})
	if fmt.Sprint(order) != "[0 0 3 5 7 9]" {
		t.Fatalf("ran in priority order %v", order)
	}
}

func TestQueuePauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.reg.HandleFunc("q", func(ctx context.Context, j *job.Job) error { return nil })
	if err := e.client.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	e.clock = clock.NewFake(time.Now())
	const poll = 50 * time.Millisecond
	e.startWorker(job.WorkerConfig{PollInterval: poll})
	j := e.enqueue(job.Request{Kind: "q"})
	e.polls(poll, 3) // several polls (and the insert notification)
	if got, _ := e.client.Get(ctx, "", j.ID); got.State != job.Pending {
		t.Fatalf("paused queue ran a job: %s", got.State)
	}
	qs, _ := e.client.Queues(ctx, "")
	if len(qs) != 1 || !qs[0].Paused || qs[0].Pending != 1 {
		t.Fatalf("queues %+v", qs)
	}
	if err := e.client.ResumeQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	// The resume notification wakes the claim loop (its claim may wait
	// out FetchCooldown on the clock), or the next poll finds the job.
	e.clock.Advance(time.Second)
	e.waitState(j.ID, job.Completed)
	if err := e.client.PauseQueue(ctx, "Bad Name"); err == nil {
		t.Fatal("pausing an invalid queue name succeeded")
	}
}

func TestUnknownKindRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "nobody-handles-this", MaxAttempts: 2})
	r := e.waitState(j.ID, job.Retrying)
	if r.Errors[0].Kind != "unknown_kind" {
		t.Fatalf("error %+v", r.Errors[0])
	}
}

func TestLowLatencyPickupThroughNotify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan time.Time, 1)
	e.reg.HandleFunc("fast", func(ctx context.Context, j *job.Job) error {
		started <- time.Now()
		return nil
	})
	// A poll interval of an hour: only the notification can wake the worker.
	e.startWorker(job.WorkerConfig{PollInterval: time.Hour})
	time.Sleep(200 * time.Millisecond) // the first, immediate poll has happened
	at := time.Now()
	e.enqueue(job.Request{Kind: "fast"})
	select {
	case s := <-started:
		if d := s.Sub(at); d > 500*time.Millisecond {
			t.Fatalf("picked up after %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("insert notification did not wake the worker")
	}
}

func TestPollFindsJobsWithoutNotification(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("k", func(ctx context.Context, j *job.Job) error { return nil })
	e.startWorker(job.WorkerConfig{PollInterval: 100 * time.Millisecond})
	// Inserted behind Gaffer's back: no NOTIFY.
	var id int64
	e.st.Pool().QueryRow(context.Background(), `INSERT INTO gaffer.jobs (kind) VALUES ('k') RETURNING id`).Scan(&id)
	e.waitState(id, job.Completed)
}

func TestConcurrencyLimitPerQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var running, peak atomic.Int32
	e.reg.HandleFunc("c", func(ctx context.Context, j *job.Job) error {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		return nil
	})
	var ids []int64
	for range 30 {
		ids = append(ids, e.enqueue(job.Request{Kind: "c"}).ID)
	}
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"default": 3}})
	for _, id := range ids {
		e.waitState(id, job.Completed)
	}
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak concurrency %d, want 3", p)
	}
}

// A claim cursor skips jobs queued before it, but only for CursorReset:
// an urgent job queued behind a deep backlog still runs soon.
func TestUrgentJobBehindCursorRunsWithinReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	release := make(chan struct{})
	var urgentAt atomic.Int64
	var ran atomic.Int32
	e.reg.HandleFunc("slow", func(ctx context.Context, j *job.Job) error {
		ran.Add(1)
		select {
		case <-release:
		case <-time.After(50 * time.Millisecond):
		}
		return nil
	})
	e.reg.HandleFunc("urgent", func(ctx context.Context, j *job.Job) error {
		urgentAt.Store(time.Now().UnixNano())
		return nil
	})
	reqs := make([]job.Request, 200)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "slow", Priority: 5}
	}
	e.client.EnqueueMany(ctx, reqs)
	// Two slots, full claims of two: the cursor moves through the backlog.
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"default": 2}, CursorReset: 300 * time.Millisecond})
	time.Sleep(200 * time.Millisecond)
	asked := time.Now()
	e.enqueue(job.Request{Kind: "urgent", Priority: 0})
	deadline := time.Now().Add(5 * time.Second)
	for urgentAt.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("urgent job did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waited := time.Unix(0, urgentAt.Load()).Sub(asked)
	t.Logf("urgent job ran %s after enqueue, behind %d of 200 backlog jobs", waited, 200-ran.Load())
	if waited > time.Second {
		t.Fatalf("urgent job waited %s; the cursor should reset within 300ms", waited)
	}
	if ran.Load() >= 190 {
		t.Fatal("the backlog was nearly done: the test proved nothing about the cursor")
	}
}

// Effects written with CompleteTx commit with the completion: exactly
// once, even when the job runs twice.
func TestCompleteTxEffectsExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.exec(`CREATE TABLE ledger (job_id bigint, attempt int)`)
	var runs atomic.Int32
	e.reg.HandleFunc("pay", func(ctx context.Context, j *job.Job) error {
		runs.Add(1)
		tx, err := e.st.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO ledger VALUES ($1, $2)`, j.ID, j.Attempt); err != nil {
			return err
		}
		j.SetResult("paid")
		if err := job.CompleteTx(ctx, tx, j); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	e.startWorker(job.WorkerConfig{})
	j := e.enqueue(job.Request{Kind: "pay"})
	done := e.waitState(j.ID, job.Completed)
	if string(done.Result) != `"paid"` {
		t.Fatalf("result %s", done.Result)
	}
	var n int
	e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM ledger WHERE job_id = $1`, j.ID).Scan(&n)
	if n != 1 || e.settledCounter(1, "gaffer_job_completed_total", "kind", "pay") != 1 || e.counter("gaffer_job_stale_rejected_total") != 0 {
		t.Fatalf("ledger rows %d, completed %v, stale %v", n, e.counter("gaffer_job_completed_total", "kind", "pay"), e.counter("gaffer_job_stale_rejected_total"))
	}
	// A stale attempt's CompleteTx is refused, and its effect rolls back.
	k := e.enqueue(job.Request{Kind: "other", Queue: "q2"})
	claimed, _ := e.st.ClaimJobs(ctx, store.ClaimParams{Queue: "q2", Limit: 1, Token: 7, LeaseTTL: time.Minute, Node: "x"})
	if len(claimed) != 1 {
		t.Fatal("claim")
	}
	stale := job.FromRow(claimed[0])
	e.st.ReleaseJobs(ctx, []store.Lease{{ID: k.ID, Attempt: claimed[0].Attempt, Token: 7}}, "test")
	tx, _ := e.st.Pool().Begin(ctx)
	tx.Exec(ctx, `INSERT INTO ledger VALUES ($1, 99)`, k.ID)
	if err := job.CompleteTx(ctx, tx, stale); !errors.Is(err, job.ErrLeaseLost) {
		t.Fatalf("stale CompleteTx: %v", err)
	}
	tx.Rollback(ctx)
	e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM ledger WHERE job_id = $1`, k.ID).Scan(&n)
	if n != 0 {
		t.Fatal("a stale attempt's effect landed")
	}
}

// At a steady trickle — a job enqueued every 10 ms, slots to spare — a
// claim that found fewer jobs than it had slots for holds the next claim
// of its queue back TrickleCooldown, so that the jobs enqueued meanwhile
// share one claim. Every job of a claim starts at the claim's instant
// (attempted_at), so the distinct instants count the claims: at most one
// a cooldown. Red with the cooldown off: a claim a job.
//
// The queue has four times the slots a cooldown's jobs need: with only as
// many (the default 10), enqueues a busy machine bunches fill a claim,
// and a full claim rightly claims again at once. And the trickle starts
// once the queue's claim has served the unit (the worker's first claim
// takes a job enqueued before it starts): until then, a job inserted
// while that claim is in flight is of a unit it did not serve, which a
// side claim takes at once (side_claim.go), as it should.
func TestTrickleCooldownLetsJobsShareAClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("trickle", func(ctx context.Context, j *job.Job) error { return nil })
	const cooldown = 100 * time.Millisecond
	first := e.enqueue(job.Request{Kind: "trickle"})
	e.startWorker(job.WorkerConfig{PollInterval: time.Hour, TrickleCooldown: cooldown, Queues: map[string]int{job.DefaultQueue: 40}})
	e.waitState(first.ID, job.Completed)
	time.Sleep(cooldown)
	var ids []int64
	start := time.Now()
	for range 40 {
		ids = append(ids, e.enqueue(job.Request{Kind: "trickle"}).ID)
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	claims := map[time.Time][]int{} // a claim's instant: the jobs it took
	for i, id := range ids {
		j := e.waitState(id, job.Completed)
		claims[*j.AttemptedAt] = append(claims[*j.AttemptedAt], i)
	}
	if most := int(took/cooldown) + 2; len(claims) > most {
		for at, jobs := range claims {
			t.Logf("claim at %s took jobs %v", at.Sub(start), jobs)
		}
		t.Fatalf("%d jobs over %s started in %d claims, want at most %d (one a %s cooldown)", len(ids), took, len(claims), most, cooldown)
	}
	t.Logf("%d jobs over %s in %d claims", len(ids), took, len(claims))
}

// A backlog is claimed as fast as slots free: a full claim holds nothing
// back, whatever TrickleCooldown says.
func TestTrickleCooldownHoldsNoBacklogBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("backlog", func(ctx context.Context, j *job.Job) error { return nil })
	reqs := make([]job.Request, 40)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "backlog"}
	}
	ids, err := e.client.EnqueueMany(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	e.startWorker(job.WorkerConfig{PollInterval: time.Hour, TrickleCooldown: time.Hour, Queues: map[string]int{job.DefaultQueue: 4}})
	for _, id := range ids {
		e.waitState(id, job.Completed) // 10 s at most: an hour's cooldown would fail it
	}
}

// A queue a limit binds is worked as fast as the limit lets it: a claim
// the limit cut short (one job of the many due) holds nothing back, and
// the slot the job frees is claimed again at once, whatever
// TrickleCooldown says. Red when a limit-cut claim counts as a trickle's:
// the second job waits out the hour.
func TestTrickleCooldownHoldsNoLimitedQueueBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetLimit(ctx, job.Limit{Name: "one-at-a-time", Queue: "solo", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	e.reg.HandleFunc("limited", func(ctx context.Context, j *job.Job) error { return nil })
	reqs := make([]job.Request, 10)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "limited", Queue: "solo"}
	}
	ids, err := e.client.EnqueueMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	e.startWorker(job.WorkerConfig{PollInterval: time.Hour, TrickleCooldown: time.Hour, Queues: map[string]int{"solo": 4}})
	for _, id := range ids {
		e.waitState(id, job.Completed) // 10 s at most: an hour's cooldown would fail it
	}
}
