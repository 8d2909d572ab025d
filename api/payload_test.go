package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// sent are args as a client might write them: key order, number
// spellings, escapes and whitespace that re-encoding would all change.
const sent = `{"zeta":1.0, "a":1e3,"mm":[1.50,2E-2], "b":{"y":1,"x":2},"h":"<a&b>","u":"\u00e9", "big":12345678901234567890}`

// onTheWire is sent as API responses carry it: compact JSON, whitespace
// between tokens gone, everything else as sent.
func onTheWire(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(sent)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// seen records what handlers were handed, by job ID.
type seen struct {
	mu     sync.Mutex
	args   map[int64]string
	inputs map[int64]string
	failed map[string]bool
}

func (s *seen) get(t *testing.T, id int64) (args, inputs string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		a, ok := s.args[id]
		in := s.inputs[id]
		s.mu.Unlock()
		if ok {
			return a, in
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no handler ran job %d", id)
	return "", ""
}

// startHandlers runs a worker on e's database: "echo" records its args
// and inputs and returns its args as its result, byte for byte;
// "fail-once" fails for good the first time it sees a kind of args.
func startHandlers(t *testing.T, e *env) *seen {
	t.Helper()
	s := &seen{args: map[int64]string{}, inputs: map[int64]string{}, failed: map[string]bool{}}
	reg := job.NewRegistry()
	record := func(j *job.Job) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.args[j.ID], s.inputs[j.ID] = string(j.Args), string(j.Inputs)
	}
	reg.HandleFunc("echo", func(ctx context.Context, j *job.Job) error {
		record(j)
		return j.SetResult(j.Args)
	})
	reg.HandleFunc("fail-once", func(ctx context.Context, j *job.Job) error {
		record(j)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.failed[string(j.Args)] {
			s.failed[string(j.Args)] = true
			return job.Permanent(fmt.Errorf("first time"))
		}
		return nil
	})
	w, err := job.NewWorker(job.WorkerConfig{Pool: e.st.Pool(), Registry: reg, NodeID: "n", PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return s
}

// Args and results are kept as sent through the API, the handler, a DLQ
// replay, a workflow's step inputs and output, and a cron entry.
func TestPayloadsKeptAsSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := startHandlers(t, e)
	wire := onTheWire(t)
	type view struct {
		ID     int64           `json:"id"`
		State  string          `json:"state"`
		Args   json.RawMessage `json:"args"`
		Result json.RawMessage `json:"result"`
		Inputs json.RawMessage `json:"inputs"`
		JobID  int64           `json:"job_id"`
	}
	stored := func(t *testing.T, sql string, args ...any) string {
		t.Helper()
		var v string
		if err := e.st.Pool().QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitJob := func(t *testing.T, id int64, state string) view {
		t.Helper()
		var v view
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			e.do(e.writer, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil).decode(t, &v)
			if v.State == state {
				return v
			}
		}
		t.Fatalf("job %d is %s, want %s", id, v.State, state)
		return v
	}

	t.Run("enqueue", func(t *testing.T) {
		var res struct{ Job view }
		r := e.do(e.writer, "POST", "/v1/jobs", `{"kind":"echo","args":`+sent+`}`)
		r.decode(t, &res)
		created := res.Job
		if r.Status != 201 || string(created.Args) != wire {
			t.Fatalf("%d: args came back as %s, want %s", r.Status, created.Args, wire)
		}
		if got := stored(t, `SELECT args::text FROM gaffer.jobs WHERE id = $1`, created.ID); got != sent {
			t.Fatalf("stored %s, want %s", got, sent)
		}
		if args, _ := s.get(t, created.ID); args != sent {
			t.Fatalf("handler got %s, want %s", args, sent)
		}
		done := waitJob(t, created.ID, "completed")
		if string(done.Args) != wire || string(done.Result) != wire {
			t.Fatalf("read back args %s, result %s; want %s", done.Args, done.Result, wire)
		}
		if got := stored(t, `SELECT result::text FROM gaffer.jobs WHERE id = $1`, created.ID); got != sent {
			t.Fatalf("stored result %s, want %s", got, sent)
		}
	})

	t.Run("dlq replay", func(t *testing.T) {
		var res struct{ Job view }
		e.do(e.writer, "POST", "/v1/jobs", `{"kind":"fail-once","max_attempts":1,"args":`+sent+`}`).decode(t, &res)
		created := res.Job
		waitJob(t, created.ID, "failed")
		var entry struct {
			ID   int64           `json:"id"`
			Args json.RawMessage `json:"args"`
		}
		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		e.do(e.writer, "GET", "/v1/dlq?kind=fail-once", nil).decode(t, &list)
		if len(list.Data) != 1 {
			t.Fatalf("%d DLQ entries", len(list.Data))
		}
		json.Unmarshal(list.Data[0], &entry)
		if string(entry.Args) != wire {
			t.Fatalf("DLQ entry args %s, want %s", entry.Args, wire)
		}
		var replay struct {
			JobID int64 `json:"job_id"`
		}
		e.do(e.writer, "POST", fmt.Sprintf("/v1/dlq/%d/replay", entry.ID), nil).decode(t, &replay)
		if args, _ := s.get(t, replay.JobID); args != sent {
			t.Fatalf("replayed job's handler got %s, want %s", args, sent)
		}
	})

	t.Run("workflow", func(t *testing.T) {
		var run struct {
			ID     int64           `json:"id"`
			State  string          `json:"state"`
			Output json.RawMessage `json:"output"`
			Steps  []view          `json:"steps"`
		}
		body := `{"name":"exact","steps":[{"name":"a","kind":"echo","args":` + sent + `},{"name":"b","kind":"echo","depends_on":["a"]}]}`
		if r := e.do(e.writer, "POST", "/v1/workflows", body); r.Status != 201 {
			t.Fatalf("submit: %d %s", r.Status, r.Body)
		} else {
			r.decode(t, &run)
		}
		for deadline := time.Now().Add(10 * time.Second); run.State != "completed" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			e.do(e.writer, "GET", fmt.Sprintf("/v1/workflows/%d", run.ID), nil).decode(t, &run)
		}
		if run.State != "completed" || len(run.Steps) != 2 {
			t.Fatalf("run %+v", run)
		}
		a, b := run.Steps[0], run.Steps[1]
		if args, _ := s.get(t, a.JobID); args != sent {
			t.Fatalf("step a's handler got %s, want %s", args, sent)
		}
		if _, inputs := s.get(t, b.JobID); inputs != `{"a":`+sent+`}` {
			t.Fatalf("step b's inputs %s, want {\"a\":%s}", inputs, sent)
		}
		if string(a.Result) != wire {
			t.Fatalf("step a's result %s, want %s", a.Result, wire)
		}
		if string(run.Output) != `{"b":{}}` {
			t.Fatalf("output %s", run.Output)
		}
	})

	t.Run("cron", func(t *testing.T) {
		r := e.do(e.writer, "PUT", "/v1/cron/exact", `{"schedule":"@every 1h","job":{"kind":"echo","args":`+sent+`}}`)
		if r.Status != 201 {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
		var trig struct {
			JobID int64 `json:"job_id"`
		}
		e.do(e.writer, "POST", "/v1/cron/exact/trigger", nil).decode(t, &trig)
		if args, _ := s.get(t, trig.JobID); args != sent {
			t.Fatalf("the entry's job got %s, want %s", args, sent)
		}
		var got struct {
			Job struct {
				Args json.RawMessage `json:"args"`
			} `json:"job"`
		}
		e.do(e.writer, "GET", "/v1/cron/exact", nil).decode(t, &got)
		if string(got.Job.Args) != wire {
			t.Fatalf("entry args %s, want %s", got.Job.Args, wire)
		}
	})
}

// An object naming a member twice is refused where it enters, and nothing
// is written: receivers disagree about which value such an object holds.
func TestDuplicateNamesAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"kind":"echo","args":{"to":"a@example.com","to":"b@example.com"}}`},
		{"POST", "/v1/jobs", `{"kind":"echo","kind":"other"}`},
		{"POST", "/v1/jobs", `{"kind":"echo","args":{"x":{"n":1,"\u006e":2}}}`},
		{"PUT", "/v1/cron/dup", `{"schedule":"@every 1h","job":{"kind":"echo","args":{"a":1,"a":1}}}`},
		{"POST", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"echo","args":[{"k":1,"k":2}]}]}`},
	} {
		p := e.expectProblem(e.do(e.writer, c.method, c.path, c.body), 400, "invalid_json")
		if !contains(p.Detail, "twice") {
			t.Errorf("%s %s: detail %q does not say what is wrong", c.method, c.path, p.Detail)
		}
	}
	if n := e.count(`SELECT (SELECT count(*) FROM gaffer.jobs) + (SELECT count(*) FROM gaffer.cron_entries) + (SELECT count(*) FROM gaffer.workflow_runs)`); n != 0 {
		t.Fatalf("%d rows written from refused requests", n)
	}
}
