package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/job"
)

func (e *env) debounce(key string, window, maxWait time.Duration, args string) job.Result {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), job.Request{Kind: "d", Args: json.RawMessage(args),
		Debounce: &job.Debounce{Key: key, Window: window, MaxWait: maxWait}})
	if err != nil {
		e.t.Fatalf("debounce %s: %v", key, err)
	}
	return res
}

type debounceRow struct {
	args        string
	runInSecs   float64 // run_at - now()
	due         bool
	untilMinusR float64 // debounce_until - run_at
}

func (e *env) debounceRow(id int64) debounceRow {
	e.t.Helper()
	var r debounceRow
	err := e.st.Pool().QueryRow(context.Background(), `SELECT args::text, extract(epoch FROM run_at - now())::float8, due,
		coalesce(extract(epoch FROM debounce_until - run_at)::float8, -1) FROM gaffer.jobs WHERE id = $1`, id).Scan(&r.args, &r.runInSecs, &r.due, &r.untilMinusR)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// A later enqueue of a pending job's key replaces its args and moves its
// run_at to now + window (due false: it waits in the scheduled index),
// never past first enqueue + max_wait; a job that started lets the next
// enqueue make a new one.
func TestDebounce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.debounce("k", time.Hour, 3*time.Hour, `{"n":1}`)
	if first.Debounced || first.Existing {
		t.Fatalf("first: %+v", first)
	}
	if r := e.debounceRow(first.Job.ID); r.args != `{"n":1}` || r.runInSecs < 3590 || r.runInSecs > 3600 || r.due {
		t.Fatalf("first row %+v", r)
	}
	// Pretend the job became due (as a claim's promote would have made it),
	// so that the next enqueue must take it back out of the claim index.
	e.exec(`UPDATE gaffer.jobs SET run_at = now() - interval '1 second', due = true WHERE id = $1`, first.Job.ID)
	second := e.debounce("k", 2*time.Hour, 3*time.Hour, `{"n":2}`)
	if !second.Debounced || second.Job.ID != first.Job.ID {
		t.Fatalf("second: %+v", second)
	}
	if r := e.debounceRow(first.Job.ID); r.args != `{"n":2}` || r.runInSecs < 7190 || r.runInSecs > 7200 || r.due {
		t.Fatalf("after the second enqueue: %+v (want args n=2, run_at in 2h, due false)", r)
	}
	// max_wait caps the move: the first enqueue was 3h of max_wait ago
	// less a little, so a window of 2h more is cut to the cap.
	e.exec(`UPDATE gaffer.jobs SET debounce_until = now() + interval '30 minutes' WHERE id = $1`, first.Job.ID)
	capped := e.debounce("k", 2*time.Hour, 3*time.Hour, `{"n":3}`)
	if r := e.debounceRow(capped.Job.ID); !capped.Debounced || r.untilMinusR != 0 || r.runInSecs > 1801 || r.due {
		t.Fatalf("capped: %+v, %+v (want run_at = debounce_until, in 30m)", capped, r)
	}
	// A cap in the past: due now.
	e.exec(`UPDATE gaffer.jobs SET debounce_until = now() - interval '1 minute' WHERE id = $1`, first.Job.ID)
	late := e.debounce("k", 2*time.Hour, 3*time.Hour, `{"n":4}`)
	if r := e.debounceRow(late.Job.ID); !late.Debounced || r.runInSecs > 0.5 || !r.due {
		t.Fatalf("cap passed: %+v (want due now)", r)
	}
	// Keys are per tenant; no max_wait: no cap.
	other, err := e.client.Enqueue(context.Background(), job.Request{Kind: "d", Tenant: "acme", Debounce: &job.Debounce{Key: "k", Window: time.Minute}})
	if err != nil || other.Debounced || other.Job.ID == first.Job.ID {
		t.Fatalf("another tenant: %+v, %v", other, err)
	}
	if r := e.debounceRow(other.Job.ID); r.untilMinusR != -1 {
		t.Fatalf("no max_wait stored a cap: %+v", r)
	}

	// Once the job started, the next enqueue makes a new job.
	var mu sync.Mutex
	var ran []string
	e.reg.HandleFunc("d", func(ctx context.Context, j *job.Job) error {
		mu.Lock()
		ran = append(ran, string(j.Args))
		mu.Unlock()
		return nil
	})
	e.startWorker(job.WorkerConfig{})
	e.waitState(first.Job.ID, job.Completed)
	next := e.debounce("k", time.Hour, 0, `{"n":5}`)
	if next.Debounced || next.Job.ID == first.Job.ID {
		t.Fatalf("after the job ran: %+v", next)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != `{"n":4}` {
		t.Fatalf("ran %v, want the last args once", ran)
	}
}

// A debounced job runs once, window after the last of a burst of
// enqueues, with the last args: a running worker does not take it early.
func TestDebounceRunsAfterTheBurst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type run struct {
		args string
		at   time.Time
	}
	runs := make(chan run, 10)
	e.reg.HandleFunc("d", func(ctx context.Context, j *job.Job) error {
		runs <- run{string(j.Args), time.Now()}
		return nil
	})
	e.startWorker(job.WorkerConfig{})
	var last time.Time
	var id int64
	for i := range 6 {
		res := e.debounce("burst", 400*time.Millisecond, 0, `{"i":`+string(rune('0'+i))+`}`)
		if id == 0 {
			id = res.Job.ID
		} else if !res.Debounced || res.Job.ID != id {
			t.Fatalf("enqueue %d: %+v", i, res)
		}
		last = time.Now()
		time.Sleep(150 * time.Millisecond)
	}
	select {
	case r := <-runs:
		if r.args != `{"i":5}` || r.at.Before(last.Add(350*time.Millisecond)) {
			t.Fatalf("ran %s at %s after the last enqueue, want {\"i\":5} after 400ms", r.args, r.at.Sub(last))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the debounced job never ran")
	}
	select {
	case r := <-runs:
		t.Fatalf("ran twice: %+v", r)
	case <-time.After(500 * time.Millisecond):
	}
}

// Concurrent enqueues of one key from separate pools make one job; every
// other enqueue debounces into it.
func TestDebounceConcurrentEnqueues(t *testing.T) {
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
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[int64]int{}
	made := 0
	start := make(chan struct{})
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := clients[g%len(clients)].Enqueue(ctx, job.Request{Kind: "d", Debounce: &job.Debounce{Key: "race", Window: time.Hour}})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids[res.Job.ID]++
			if !res.Debounced {
				made++
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if n := e.count(`SELECT count(*) FROM gaffer.jobs WHERE debounce_key = 'race'`); n != 1 || len(ids) != 1 || made != 1 {
		t.Fatalf("32 concurrent enqueues: %d jobs, ids %v, %d said made", n, ids, made)
	}
}

func TestDebounceRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	d := func(key string, w, m time.Duration) *job.Debounce {
		return &job.Debounce{Key: key, Window: w, MaxWait: m}
	}
	for _, c := range []struct {
		name  string
		req   job.Request
		field string
	}{
		{"no key", job.Request{Kind: "d", Debounce: d("", time.Second, 0)}, "debounce.key"},
		{"key too long", job.Request{Kind: "d", Debounce: d(string(make([]byte, 256)), time.Second, 0)}, "debounce.key"},
		{"key with NUL", job.Request{Kind: "d", Debounce: d("a\x00", time.Second, 0)}, "debounce.key"},
		{"no window", job.Request{Kind: "d", Debounce: d("k", 0, 0)}, "debounce.window"},
		{"window too long", job.Request{Kind: "d", Debounce: d("k", 8*24*time.Hour, 0)}, "debounce.window"},
		{"max_wait below the window", job.Request{Kind: "d", Debounce: d("k", time.Minute, time.Second)}, "debounce.max_wait"},
		{"max_wait too long", job.Request{Kind: "d", Debounce: d("k", time.Minute, 31*24*time.Hour)}, "debounce.max_wait"},
		{"with a unique key", job.Request{Kind: "d", UniqueKey: "u", Debounce: d("k", time.Minute, 0)}, "debounce"},
		{"with a delay", job.Request{Kind: "d", Delay: time.Minute, Debounce: d("k", time.Minute, 0)}, "debounce"},
	} {
		_, err := e.client.Enqueue(ctx, c.req)
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want a validation error on %s", c.name, err, c.field)
		}
	}
	_, err := e.client.EnqueueMany(ctx, []job.Request{{Kind: "d", Debounce: d("k", time.Minute, 0)}})
	var ve *job.ValidationError
	if !errors.As(err, &ve) || ve.Field != "jobs[0].debounce" {
		t.Errorf("batch: %v", err)
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 0 {
		t.Fatalf("refusals wrote %d jobs", n)
	}
}
