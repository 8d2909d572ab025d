package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/job"
)

// seqArgs are the args of the sequence tests' jobs: sequence S's job N,
// whose first Fail attempts fail (Perm: it fails for good at once), and
// which sleeps SleepMS in each attempt.
type seqArgs struct {
	S       int  `json:"s"`
	N       int  `json:"n"`
	Fail    int  `json:"fail"`
	Perm    bool `json:"perm"`
	SleepMS int  `json:"sleep_ms"`
}

// seqLedger is what the handlers saw, checked against the model: which
// job of each sequence is in an attempt, which jobs have ended for good,
// and the order of each sequence's first starts.
type seqLedger struct {
	mu         sync.Mutex
	busy       map[int]int64     // sequence → job in an attempt
	ended      map[int64]bool    // jobs that reached a final state
	before     map[int64][]int64 // job → the jobs enqueued into its sequence before it
	started    map[int][]int64   // sequence → jobs in the order of their first attempt
	violations []string
}

func newSeqLedger() *seqLedger {
	return &seqLedger{busy: map[int]int64{}, ended: map[int64]bool{}, before: map[int64][]int64{}, started: map[int][]int64{}}
}

func (l *seqLedger) violate(format string, args ...any) {
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

// handler runs a seqArgs job: it records its start, checks that no other
// job of its sequence is in an attempt and that every job enqueued into
// the sequence before it has ended, and records its end when the
// outcome it returns is final.
func (l *seqLedger) handler(ctx context.Context, j *job.Job) error {
	var a seqArgs
	if err := json.Unmarshal(j.Args, &a); err != nil {
		return job.Permanent(err)
	}
	l.mu.Lock()
	if other, ok := l.busy[a.S]; ok {
		l.violate("sequence %d: job %d started while job %d was in an attempt", a.S, j.ID, other)
	}
	l.busy[a.S] = j.ID
	if j.Attempt == 1 {
		for _, b := range l.before[j.ID] {
			if !l.ended[b] {
				l.violate("sequence %d: job %d started before job %d, enqueued before it, ended", a.S, j.ID, b)
			}
		}
		l.started[a.S] = append(l.started[a.S], j.ID)
	}
	l.mu.Unlock()
	time.Sleep(time.Duration(a.SleepMS) * time.Millisecond)
	var err error
	final := true
	switch {
	case a.Perm:
		err = job.Permanent(errors.New("fails for good"))
	case j.Attempt <= a.Fail:
		err = fmt.Errorf("attempt %d fails", j.Attempt)
		final = j.Attempt >= j.MaxAttempts
	}
	l.mu.Lock()
	delete(l.busy, a.S)
	if final {
		l.ended[j.ID] = true
	}
	l.mu.Unlock()
	return err
}

func seqSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SEQ_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = n
	}
	t.Logf("SEQ_SEED=%d", seed)
	return seed
}

// waitAllEnded waits until no job is unfinished, or fails the test.
func (e *env) waitAllEnded(within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var left int
		if err := e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gaffer.jobs WHERE state NOT IN ('completed', 'failed', 'cancelled')`).Scan(&left); err != nil {
			e.t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d jobs not ended after %s", left, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A generated workload of sequences — jobs enqueued one at a time and in
// batches, some due later, some failing and retried, some failing for
// good (on_failure continue), some cancelled while they wait — worked by
// two nodes at once: no two jobs of a sequence are ever in an attempt
// together, no job starts before every job enqueued into its sequence
// before it has ended, and every job ends as the model says.
func TestSequencesRunOneAtATimeInEnqueueOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seqSeed(t), 7))
	l := newSeqLedger()
	e.reg.HandleFunc("seq.step", l.handler, job.KindOptions{Backoff: job.ConstantBackoff(20 * time.Millisecond)})
	for _, node := range []string{"node-a", "node-b"} {
		e.startWorker(job.WorkerConfig{NodeID: node, Queues: map[string]int{"default": 6}, PollInterval: 100 * time.Millisecond})
	}

	const sequences, perSequence = 16, 14
	type planned struct {
		a      seqArgs
		delay  time.Duration
		cancel bool
	}
	plans := make([][]planned, sequences)
	batchSizes := make([][]int, sequences)
	for s := range plans {
		for n := range perSequence {
			p := planned{a: seqArgs{S: s, N: n, SleepMS: rng.IntN(4)}}
			switch r := rng.IntN(20); {
			case r < 3:
				p.a.Fail = 1 + rng.IntN(2) // retried, then completes
			case r == 3:
				p.a.Fail = 5 // fails every attempt: failed after 3
			case r == 4:
				p.a.Perm = true
			case r == 5:
				p.cancel = true
			case r == 6:
				p.delay = time.Duration(50+rng.IntN(250)) * time.Millisecond
			}
			plans[s] = append(plans[s], p)
		}
		for n := 0; n < perSequence; {
			size := 1
			if rng.IntN(3) == 0 {
				size = min(1+rng.IntN(4), perSequence-n)
			}
			batchSizes[s] = append(batchSizes[s], size)
			n += size
		}
	}
	// Each sequence's jobs are enqueued by one goroutine, in order (one
	// at a time, or a few in one EnqueueMany); the sequences at once.
	type made struct {
		id        int64
		p         planned
		cancelled bool
	}
	results := make([][]made, sequences)
	var wg sync.WaitGroup
	errs := make(chan error, sequences)
	for s := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("seq-%d", s)
			req := func(p planned) job.Request {
				return job.Request{Kind: "seq.step", Args: p.a, Delay: p.delay, MaxAttempts: 3,
					Sequence: &job.Sequence{Key: key, OnFailure: job.SequenceContinue}}
			}
			n := 0
			for _, size := range batchSizes[s] {
				var ids []int64
				if size == 1 {
					res, err := e.client.Enqueue(ctx, req(plans[s][n]))
					if err != nil {
						errs <- err
						return
					}
					ids = []int64{res.Job.ID}
				} else {
					var rs []job.Request
					for _, p := range plans[s][n : n+size] {
						rs = append(rs, req(p))
					}
					var err error
					if ids, err = e.client.EnqueueMany(ctx, rs); err != nil {
						errs <- err
						return
					}
				}
				l.mu.Lock()
				for i, id := range ids {
					for _, m := range results[s] {
						l.before[id] = append(l.before[id], m.id)
					}
					results[s] = append(results[s], made{id: id, p: plans[s][n+i]})
				}
				l.mu.Unlock()
				for i, id := range ids {
					if !plans[s][n+i].cancel {
						continue
					}
					// Cancelled while it waits (or at once, if its turn
					// came): it ends, and the sequence goes on.
					st, err := e.client.Cancel(ctx, "", id)
					if errors.Is(err, job.ErrFinished) {
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("cancel %d: %w", id, err)
						return
					}
					if st == job.Cancelled {
						l.mu.Lock()
						l.ended[id] = true
						results[s][n+i].cancelled = true
						l.mu.Unlock()
					}
				}
				n += size
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	e.waitAllEnded(60 * time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.violations) > 0 {
		t.Fatalf("sequence violations:\n%v", l.violations)
	}
	for s, ms := range results {
		var want []int64
		for _, m := range ms {
			j, err := e.client.Get(ctx, "", m.id)
			if err != nil {
				t.Fatal(err)
			}
			wantState := job.Completed
			switch {
			case m.cancelled:
				wantState = job.Cancelled
			case m.p.a.Perm || m.p.a.Fail >= 3:
				wantState = job.Failed
			}
			if !m.cancelled {
				want = append(want, m.id)
			}
			// A cancel that came while the job ran may or may not stop it.
			if j.State != wantState && !(m.p.cancel && j.State == job.Cancelled) {
				t.Errorf("sequence %d job %d (%+v): %s, want %s", s, m.id, m.p, j.State, wantState)
			}
			if j.Sequence != fmt.Sprintf("seq-%d", s) || j.SequenceOnFailure != job.SequenceContinue {
				t.Errorf("job %d: sequence %q on failure %q", m.id, j.Sequence, j.SequenceOnFailure)
			}
		}
		// Every job but those cancelled while they waited was started,
		// in enqueue order.
		if got := l.started[s]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sequence %d started %v, want enqueue order %v", s, got, want)
		}
	}
	var rows int
	if err := e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.sequences`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d sequence rows left after every job ended (%v)", rows, err)
	}
}

// A job that fails for good halts its sequence (on_failure halt, the
// default): the jobs after it stay held until the failed job is
// replayed — the replay runs first, then the rest in order — or the
// sequence is resumed. A cancelled job lets the next one run.
func TestSequenceHaltsUntilReplayedOrResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	var ran []string
	e.reg.HandleFunc("seq.halt", func(ctx context.Context, j *job.Job) error {
		var a struct {
			Name string `json:"name"`
			Fail bool   `json:"fail"`
		}
		_ = json.Unmarshal(j.Args, &a)
		mu.Lock()
		ran = append(ran, a.Name)
		mu.Unlock()
		if a.Fail && j.ReplayOf == 0 {
			return job.Permanent(errors.New("no"))
		}
		return nil
	})
	e.startWorker(job.WorkerConfig{Queues: map[string]int{"default": 4}, PollInterval: 50 * time.Millisecond})
	enq := func(key, name string, fail bool) *job.Job {
		return e.enqueue(job.Request{Kind: "seq.halt", Args: map[string]any{"name": name, "fail": fail}, Sequence: &job.Sequence{Key: key}})
	}

	// Replayed: the replay takes the turn back before b and c.
	a := enq("r", "a", true)
	b := enq("r", "b", false)
	c := enq("r", "c", false)
	e.waitState(a.ID, job.Failed)
	time.Sleep(300 * time.Millisecond)
	for _, id := range []int64{b.ID, c.ID} {
		if j, _ := e.client.Get(ctx, "", id); j.State != job.Held {
			t.Fatalf("job %d is %s behind a failed job of a halting sequence, want held", id, j.State)
		}
	}
	st, err := e.client.Sequence(ctx, "", "r")
	if err != nil || st.HaltedBy != a.ID || st.Head != 0 || st.Held != 2 {
		t.Fatalf("sequence r %+v, %v", st, err)
	}
	var entry int64
	if err := e.st.Pool().QueryRow(ctx, `SELECT id FROM gaffer.dlq WHERE job_id = $1`, a.ID).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	rep, err := dlq.NewClient(e.st.Pool()).Replay(ctx, "", entry)
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(c.ID, job.Completed)
	if r, _ := e.client.Get(ctx, "", rep.JobID); r.State != job.Completed || r.Sequence != "r" {
		t.Fatalf("replay %+v", r)
	}
	mu.Lock()
	if fmt.Sprint(ran) != "[a a b c]" {
		t.Fatalf("ran %v, want [a a b c]: the replay before the held jobs", ran)
	}
	ran = nil
	mu.Unlock()

	// Resumed: the failed job stays failed, the next one runs; a
	// cancelled job does not halt.
	d := enq("s", "d", true)
	f := enq("s", "f", false)
	g := enq("s", "g", false)
	e.waitState(d.ID, job.Failed)
	if _, err := e.client.Cancel(ctx, "", f.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if j, _ := e.client.Get(ctx, "", g.ID); j.State != job.Held {
		t.Fatalf("g is %s, want held", j.State)
	}
	head, err := e.client.ResumeSequence(ctx, "", "s")
	if err != nil || head != g.ID {
		t.Fatalf("resume: head %d, %v; want %d", head, err, g.ID)
	}
	e.waitState(g.ID, job.Completed)
	if _, err := e.client.ResumeSequence(ctx, "", "s"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("resume of a drained sequence: %v", err)
	}
	if _, err := e.client.Sequence(ctx, "", "s"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("drained sequence: %v", err)
	}
	h := enq("s", "h", false)
	e.waitState(h.ID, job.Completed)
	if _, err := e.client.ResumeSequence(ctx, "", "nope"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("resume of no sequence: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(ran) != "[d g h]" {
		t.Fatalf("ran %v, want [d g h]", ran)
	}
}

// The turn of a job whose node stopped (its lease expired) is kept: the
// next job stays held while the job is rescued and retried, the stale
// attempt's return changes nothing, and the next job runs only after
// the retry ended.
func TestSequenceTurnOutlivesALostLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	release := make(chan struct{})
	var mu sync.Mutex
	var events []string
	e.reg.HandleFunc("seq.lease", func(ctx context.Context, j *job.Job) error {
		var a struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(j.Args, &a)
		mu.Lock()
		events = append(events, fmt.Sprintf("%s%d", a.Name, j.Attempt))
		mu.Unlock()
		if a.Name == "a" && j.Attempt == 1 {
			<-release // a paused node: it returns after its lease is gone
		}
		return nil
	})
	e.startWorker(job.WorkerConfig{LeaseTTL: time.Second, Queues: map[string]int{"default": 4}, PollInterval: 50 * time.Millisecond})
	a := e.enqueue(job.Request{Kind: "seq.lease", Args: map[string]any{"name": "a"}, Sequence: &job.Sequence{Key: "k"}})
	b := e.enqueue(job.Request{Kind: "seq.lease", Args: map[string]any{"name": "b"}, Sequence: &job.Sequence{Key: "k"}})
	e.waitState(a.ID, job.Running)
	if err := e.client.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.exec(`UPDATE gaffer.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, a.ID)
		if n, _ := newRescuer(e).RunOnce(ctx); n == 1 {
			break
		}
	}
	e.waitState(a.ID, job.Retrying)
	close(release) // the stale attempt returns: its completion is refused
	time.Sleep(300 * time.Millisecond)
	if j, _ := e.client.Get(ctx, "", b.ID); j.State != job.Held {
		t.Fatalf("b is %s while a is retrying, want held", j.State)
	}
	if j, _ := e.client.Get(ctx, "", a.ID); j.State != job.Retrying {
		t.Fatalf("a is %s after its stale attempt returned, want retrying", j.State)
	}
	e.exec(`UPDATE gaffer.jobs SET run_at = now() WHERE id = $1`, a.ID)
	if err := e.client.ResumeQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	e.waitState(b.ID, job.Completed)
	if j, _ := e.client.Get(ctx, "", a.ID); j.State != job.Completed || j.Attempt != 2 {
		t.Fatalf("a %s attempt %d", j.State, j.Attempt)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(events) != "[a1 a2 b1]" {
		t.Fatalf("events %v, want [a1 a2 b1]", events)
	}
}

// Enqueues racing into one sequence from many goroutines: one order
// holds — an enqueue that returned before another began runs before it —
// and the jobs never overlap.
func TestSequenceConcurrentEnqueuesKeepOneOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	var starts []int64
	busy := false
	var overlap bool
	e.reg.HandleFunc("seq.race", func(ctx context.Context, j *job.Job) error {
		mu.Lock()
		overlap = overlap || busy
		busy = true
		starts = append(starts, j.ID)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		busy = false
		mu.Unlock()
		return nil
	})
	e.startWorker(job.WorkerConfig{NodeID: "node-a", Queues: map[string]int{"default": 4}, PollInterval: 50 * time.Millisecond})
	e.startWorker(job.WorkerConfig{NodeID: "node-b", Queues: map[string]int{"default": 4}, PollInterval: 50 * time.Millisecond})
	type span struct {
		id         int64
		call, done int64
	}
	var clock sync.Mutex
	var tick int64
	now := func() int64 { clock.Lock(); defer clock.Unlock(); tick++; return tick }
	var spans []span
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				call := now()
				res, err := e.client.Enqueue(ctx, job.Request{Kind: "seq.race", Args: map[string]int{"g": g}, Sequence: &job.Sequence{Key: "race"}})
				done := now()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				spans = append(spans, span{res.Job.ID, call, done})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	e.waitAllEnded(30 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if overlap || len(starts) != 80 {
		t.Fatalf("overlap %v, %d starts", overlap, len(starts))
	}
	pos := map[int64]int{}
	for i, id := range starts {
		pos[id] = i
	}
	for _, x := range spans {
		for _, y := range spans {
			if x.done < y.call && pos[x.id] > pos[y.id] {
				t.Fatalf("job %d's enqueue returned before job %d's began, but it ran after it", x.id, y.id)
			}
		}
	}
}

// The next job of a sequence starts as soon as the one before it ends —
// woken by the promotion's notification, not by the next poll: the
// sequence's jobs alternate between two queues, each served by its own
// worker, so that no worker's own completion can wake it for the next.
func TestSequenceNextStartsWithoutWaitingForAPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan time.Time, 8)
	e.reg.HandleFunc("seq.fast", func(ctx context.Context, j *job.Job) error {
		started <- time.Now()
		return nil
	})
	e.startWorker(job.WorkerConfig{NodeID: "node-a", Queues: map[string]int{"qa": 4}, PollInterval: 10 * time.Second})
	e.startWorker(job.WorkerConfig{NodeID: "node-b", Queues: map[string]int{"qb": 4}, PollInterval: 10 * time.Second})
	for i := range 4 {
		e.enqueue(job.Request{Kind: "seq.fast", Queue: []string{"qa", "qb"}[i%2], Sequence: &job.Sequence{Key: "fast"}})
	}
	var first time.Time
	for i := range 4 {
		select {
		case at := <-started:
			if i == 0 {
				first = at
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("job %d of the sequence did not start within 5 s of the one before it (poll interval 10 s)", i+1)
		}
	}
	t.Logf("4 jobs in %s", time.Since(first))
}

// A batch of a sequence's jobs: the callback waits for the held ones
// too, and a batch cancelled while some of its jobs are held counts them
// cancelled, so it still finishes with one callback.
func TestSequenceInABatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, cancel := range []bool{false, true} {
		b, err := e.client.OpenBatch(ctx, job.BatchRequest{Kind: "seq.batch.done", Queue: "idle"})
		if err != nil {
			t.Fatal(err)
		}
		var rs []job.Request
		for range 3 {
			rs = append(rs, job.Request{Kind: "seq.batch", Queue: "idle", Batch: b.ID, Sequence: &job.Sequence{Key: fmt.Sprintf("batch-%d", b.ID)}})
		}
		ids, err := e.client.EnqueueMany(ctx, rs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.CloseBatch(ctx, "", b.ID); err != nil {
			t.Fatal(err)
		}
		if cancel {
			if _, err := e.client.CancelBatch(ctx, "", b.ID); err != nil {
				t.Fatal(err)
			}
		} else {
			// Nothing works queue "idle": end the jobs as a worker would,
			// the head first; each end gives the next its turn.
			for _, id := range ids {
				if j, _ := e.client.Get(ctx, "", id); j.State != job.Pending {
					t.Fatalf("job %d is %s when its turn came, want pending", id, j.State)
				}
				if mid, _ := e.client.GetBatch(ctx, "", b.ID); mid.CallbackJobID != 0 {
					t.Fatalf("callback enqueued while job %d had not ended", id)
				}
				e.exec(`UPDATE gaffer.jobs SET state = 'completed', finalized_at = now() WHERE id = $1`, id)
			}
		}
		got, err := e.client.GetBatch(ctx, "", b.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := job.Completed
		if cancel {
			want = job.Cancelled
		}
		if got.CallbackJobID == 0 || got.Counts[want] != 3 {
			t.Fatalf("cancel %v: batch %+v, want 3 %s and a callback", cancel, got, want)
		}
	}
}
