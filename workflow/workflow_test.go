package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type env struct {
	t   *testing.T
	st  *store.Store
	reg *job.Registry
	wf  *workflow.Client
}

func newEnv(t *testing.T) *env {
	st := pgtest.NewStore(t)
	reg := job.NewRegistry()
	workflow.RegisterBuiltins(reg)
	return &env{t: t, st: st, reg: reg, wf: workflow.NewClient(st.Pool())}
}

func (e *env) start() *job.Worker {
	w, err := job.NewWorker(job.WorkerConfig{Pool: e.st.Pool(), Registry: e.reg, NodeID: "n", Queues: map[string]int{"default": 20},
		PollInterval: 50 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	l := e.st.NewListener(store.ListenerConfig{Channels: []string{store.ChannelJobs, store.ChannelControl}, OnNotify: w.HandleNotification, OnConnect: w.WakeAll})
	l.Start(context.Background())
	w.Start(context.Background())
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Stop(ctx)
		l.Stop()
	})
	return w
}

func (e *env) submit(b *workflow.Builder) workflow.Run {
	e.t.Helper()
	def, err := b.Definition()
	if err != nil {
		e.t.Fatal(err)
	}
	run, err := e.wf.Submit(context.Background(), def)
	if err != nil {
		e.t.Fatal(err)
	}
	return run
}

func (e *env) wait(id int64, state string) workflow.Run {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := e.wf.Get(context.Background(), "", id)
		if err != nil {
			e.t.Fatal(err)
		}
		if r.State == state {
			return r
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(r, "", " ")
			e.t.Fatalf("run %d is %s, want %s:\n%s", id, r.State, state, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func step(r workflow.Run, name string) workflow.StepState {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return workflow.StepState{}
}

// echo returns its step name and its inputs, so that tests see what each
// step received.
func echo(order *[]string, mu *sync.Mutex) func(ctx context.Context, j *job.Job) error {
	return func(ctx context.Context, j *job.Job) error {
		mu.Lock()
		*order = append(*order, j.Step)
		mu.Unlock()
		var inputs map[string]any
		json.Unmarshal(j.Inputs, &inputs)
		return j.SetResult(map[string]any{"step": j.Step, "saw": len(inputs)})
	}
}

func TestDiamond(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	var order []string
	e.reg.HandleFunc("echo", echo(&order, &mu))
	e.reg.HandleFunc("sum", func(ctx context.Context, j *job.Job) error {
		var b, c struct{ Step string }
		if err := j.Input("b", &b); err != nil {
			return err
		}
		if err := j.Input("c", &c); err != nil {
			return err
		}
		return j.SetResult(b.Step + "+" + c.Step)
	})
	e.start()
	run := e.submit(workflow.New("diamond").
		Job("a", "echo", nil).
		Job("b", "echo", nil, workflow.After("a")).
		Job("c", "echo", nil, workflow.After("a")).
		Job("d", "sum", nil, workflow.After("b", "c")))
	done := e.wait(run.ID, workflow.Completed)
	if string(done.Output) != `{"d":"b+c"}` {
		t.Fatalf("output %s", done.Output)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 3 || order[0] != "a" {
		t.Fatalf("order %v", order)
	}
	for _, s := range done.Steps {
		if s.State != "completed" || s.Attempt != 1 || s.StartedAt == nil || s.FinishedAt == nil {
			t.Fatalf("step %+v", s)
		}
	}
	if a, d := step(done, "a"), step(done, "d"); !a.FinishedAt.Before(*d.StartedAt) && !a.FinishedAt.Equal(*d.StartedAt) {
		t.Fatal("d started before a finished")
	}
}

func TestFanOutFanIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	var order []string
	e.reg.HandleFunc("echo", echo(&order, &mu))
	e.reg.HandleFunc("join", func(ctx context.Context, j *job.Job) error {
		var inputs map[string]struct{ Step string }
		if err := json.Unmarshal(j.Inputs, &inputs); err != nil {
			return err
		}
		return j.SetResult(len(inputs))
	})
	e.start()
	b := workflow.New("fan").Job("start", "echo", nil)
	var all []string
	// As wide as a join may be: workflow.MaxStepInputBytes of results.
	for i := range workflow.MaxStepInputBytes / job.MaxResultBytes {
		name := fmt.Sprintf("part-%03d", i)
		all = append(all, name)
		b.Job(name, "echo", nil, workflow.After("start"))
	}
	b.Job("join", "join", nil, workflow.After(all...))
	run := e.submit(b)
	done := e.wait(run.ID, workflow.Completed)
	if string(done.Output) != `{"join":32}` || len(done.Steps) != 34 {
		t.Fatalf("output %s, %d steps", done.Output, len(done.Steps))
	}
	var n int
	e.st.Pool().QueryRow(context.Background(), `SELECT count(*) FROM gaffer.jobs WHERE workflow_run = $1`, run.ID).Scan(&n)
	if n != 34 {
		t.Fatalf("%d jobs for 34 steps", n)
	}
}

func TestFailureCancelsTheRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var ran atomic.Int32
	e.reg.HandleFunc("ok", func(ctx context.Context, j *job.Job) error { ran.Add(1); return nil })
	e.reg.HandleFunc("boom", func(ctx context.Context, j *job.Job) error { return job.Permanent(errors.New("boom")) })
	e.start()
	run := e.submit(workflow.New("fails").
		Job("a", "ok", nil).
		Job("b", "boom", nil, workflow.After("a")).
		Job("c", "ok", nil, workflow.After("b")).
		Job("d", "ok", nil, workflow.After("c")))
	done := e.wait(run.ID, workflow.Failed)
	if s := step(done, "b"); s.State != "failed" || s.Error != "permanent: boom" {
		t.Fatalf("b %+v", s)
	}
	for _, n := range []string{"c", "d"} {
		if s := step(done, n); s.State != "cancelled" || s.CancelReason != "run_failed" || s.JobID != 0 {
			t.Fatalf("%s %+v", n, s)
		}
	}
	if done.Error != "step b failed" || ran.Load() != 1 {
		t.Fatalf("error %q, ran %d", done.Error, ran.Load())
	}
}

func TestAllowFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("boom", func(ctx context.Context, j *job.Job) error { return job.Permanent(errors.New("boom")) })
	e.reg.HandleFunc("after", func(ctx context.Context, j *job.Job) error {
		var got any = "unset"
		if err := j.Input("optional", &got); err != nil {
			return err
		}
		return j.SetResult(map[string]any{"optional": got})
	})
	e.start()
	run := e.submit(workflow.New("tolerant").
		Job("optional", "boom", nil, workflow.AllowFailure()).
		Job("after", "after", nil, workflow.After("optional")))
	done := e.wait(run.ID, workflow.Completed)
	if step(done, "optional").State != "failed" || string(done.Output) != `{"after":{"optional":null}}` {
		t.Fatalf("run %+v output %s", done.Steps, done.Output)
	}
}

func TestCancelRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	causes := make(chan error, 1)
	e.reg.HandleFunc("long", func(ctx context.Context, j *job.Job) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	e.reg.HandleFunc("ok", func(ctx context.Context, j *job.Job) error { return nil })
	e.start()
	run := e.submit(workflow.New("cancelled").
		Job("slow", "long", nil).
		Job("queued", "ok", nil, workflow.Queue("elsewhere")).
		Job("next", "ok", nil, workflow.After("slow")))
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, _ := e.wf.Get(context.Background(), "", run.ID)
		var state string
		e.st.Pool().QueryRow(context.Background(), `SELECT state FROM gaffer.jobs WHERE id = $1`, step(r, "slow").JobID).Scan(&state)
		if state == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("slow step never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := e.wf.Cancel(context.Background(), "", run.ID)
	if err != nil || got.State != workflow.Cancelled {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	select {
	case c := <-causes:
		if !errors.Is(c, job.ErrCancelled) {
			t.Fatalf("cause %v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("running step not cancelled")
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		r, _ := e.wf.Get(context.Background(), "", run.ID)
		if step(r, "slow").State == "cancelled" && step(r, "queued").State == "cancelled" && step(r, "next").State == "cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("steps after cancel: %+v", r.Steps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.wf.Cancel(context.Background(), "", run.ID); !errors.Is(err, workflow.ErrFinished) {
		t.Fatalf("second cancel: %v", err)
	}
}

func TestDLQReplayResumesRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var fixed atomic.Bool
	e.reg.HandleFunc("flaky", func(ctx context.Context, j *job.Job) error {
		if !fixed.Load() {
			return job.Permanent(errors.New("upstream down"))
		}
		return j.SetResult("fixed")
	})
	e.reg.HandleFunc("ok", func(ctx context.Context, j *job.Job) error {
		var in string
		j.Input("b", &in)
		return j.SetResult("after " + in)
	})
	e.start()
	run := e.submit(workflow.New("resumable").
		Job("a", "ok", nil).
		Job("b", "flaky", nil, workflow.After("a")).
		Job("c", "ok", nil, workflow.After("b")))
	failed := e.wait(run.ID, workflow.Failed)
	if step(failed, "c").State != "cancelled" {
		t.Fatalf("c %+v", step(failed, "c"))
	}
	entries, err := dlq.NewClient(e.st.Pool()).List(context.Background(), dlq.Filter{Kind: "flaky"})
	if err != nil || len(entries) != 1 || entries[0].WorkflowRun != run.ID || entries[0].Step != "b" {
		t.Fatalf("DLQ %+v %v", entries, err)
	}
	fixed.Store(true)
	if _, err := dlq.NewClient(e.st.Pool()).Replay(context.Background(), "", entries[0].ID); err != nil {
		t.Fatal(err)
	}
	done := e.wait(run.ID, workflow.Completed)
	if string(done.Output) != `{"c":"after fixed"}` || step(done, "b").Attempt != 1 || step(done, "b").JobID == entries[0].JobID {
		t.Fatalf("resumed run: %s %+v", done.Output, done.Steps)
	}
}

func TestSleepAndSignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reg.HandleFunc("after", func(ctx context.Context, j *job.Job) error {
		var approval map[string]any
		if err := j.Input("approval", &approval); err != nil {
			return err
		}
		return j.SetResult(approval["by"])
	})
	e.start()
	ctx := context.Background()
	run := e.submit(workflow.New("approve").
		WaitSignal("approval", time.Hour).
		Sleep("cool-off", time.Second, workflow.After("approval")).
		Job("after", "after", nil, workflow.After("cool-off", "approval")))
	if err := e.wf.Signal(ctx, "", run.ID, "cool-off", nil); !errors.Is(err, workflow.ErrNotSignalStep) {
		t.Fatalf("signal a sleep step: %v", err)
	}
	if err := e.wf.Signal(ctx, "", run.ID, "nope", nil); !errors.Is(err, workflow.ErrNotFound) {
		t.Fatalf("signal an unknown step: %v", err)
	}
	if err := e.wf.Signal(ctx, "", run.ID, "approval", json.RawMessage(`{"by":"ada"}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.wf.Signal(ctx, "", run.ID, "approval", json.RawMessage(`{"by":"bob"}`)); !errors.Is(err, workflow.ErrNotWaiting) {
		t.Fatalf("second signal: %v", err)
	}
	start := time.Now()
	done := e.wait(run.ID, workflow.Completed)
	if string(done.Output) != `{"after":"ada"}` {
		t.Fatalf("output %s", done.Output)
	}
	if s := step(done, "cool-off"); s.FinishedAt.Sub(*s.StartedAt) < time.Second {
		t.Fatalf("sleep lasted %s", s.FinishedAt.Sub(*s.StartedAt))
	}
	t.Logf("completed %s after the signal", time.Since(start))

	// A signal that never comes fails the step when its timeout passes.
	timed := e.submit(workflow.New("timeout").WaitSignal("approval", time.Second))
	failed := e.wait(timed.ID, workflow.Failed)
	if s := step(failed, "approval"); !strings.Contains(s.Error, "no signal arrived") {
		t.Fatalf("timed out step %+v", s)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		b     *workflow.Builder
		field string
		msg   string
	}{
		{workflow.New(""), "name", "valid workflow name"},
		{workflow.New("w"), "steps", "at least one step"},
		{workflow.New("w").Job("a", "k", nil).Job("a", "k", nil), "steps[1].name", "duplicate step"},
		{workflow.New("w").Job("bad name", "k", nil), "steps[0].name", "valid step name"},
		{workflow.New("w").Job("a", "k", nil, workflow.After("ghost")), "steps[0].depends_on", `unknown step "ghost"`},
		{workflow.New("w").Job("a", "k", nil, workflow.After("a")), "steps[0].depends_on", "depends on itself"},
		{workflow.New("w").Job("a", "k", nil, workflow.After("c")).Job("b", "k", nil, workflow.After("a")).Job("c", "k", nil, workflow.After("b")),
			"steps", "dependency cycle: a → c → b → a"},
		{workflow.New("w").Job("a", "", nil), "steps[0].kind", "is required"},
		{workflow.New("w").Job("a", "gaffer.sleep", nil), "steps[0].kind", "reserved"},
		{workflow.New("w").Job("a", "k", nil, workflow.Priority(42)), "steps[0].priority", "between 0 and 9"},
		{workflow.New("w").Job("a", "k", nil, workflow.Queue("No Good")), "steps[0].queue", "valid name"},
		{workflow.New("w").Sleep("s", 10*time.Millisecond), "steps[0].sleep", "between 1s"},
		{workflow.New("w").WaitSignal("s", 0).Sleep("t", -time.Second), "steps[0].kind", "is required"},
	}
	for _, c := range cases {
		_, err := c.b.Definition()
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(ve.Error(), c.msg) {
			t.Errorf("error %v; want field %q containing %q", err, c.field, c.msg)
		}
	}
	many := workflow.New("w")
	for i := range workflow.MaxSteps + 1 {
		many.Job(fmt.Sprintf("s%d", i), "k", nil)
	}
	if _, err := many.Definition(); err == nil {
		t.Error("accepted too many steps")
	}
	// Submit validates too, and writes nothing on a bad definition.
	_, err := e.wf.Submit(context.Background(), workflow.Definition{Name: "w", Steps: []workflow.Step{{Name: "a", Kind: "k", DependsOn: []string{"a"}}}})
	if err == nil {
		t.Fatal("submitted a bad definition")
	}
	var n int
	e.st.Pool().QueryRow(context.Background(), `SELECT (SELECT count(*) FROM gaffer.workflow_runs) + (SELECT count(*) FROM gaffer.jobs)`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d rows written by a rejected definition", n)
	}
}
