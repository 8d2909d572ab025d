package job_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/job"
)

// The library keeps JSON text as it was given: args reach the handler byte
// for byte, a raw result is stored byte for byte, and values it encodes
// itself keep <, > and & (they are not HTML).
func TestLibraryPayloadsKeptAsGiven(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const args = `{"b": 1.50, "a":[1e3 ,2E-2], "s":"\u00e9<&>"}`
	got := make(chan string, 1)
	e.reg.HandleFunc("raw", func(ctx context.Context, j *job.Job) error {
		got <- string(j.Args)
		return j.SetResult(json.RawMessage(` {"z":0.10, "y" : true} `))
	})
	e.reg.HandleFunc("typed", func(ctx context.Context, j *job.Job) error {
		return j.SetResult(map[string]string{"html": "<p>&amp;</p>"})
	})
	e.startWorker(job.WorkerConfig{})
	raw := e.enqueue(job.Request{Kind: "raw", Args: json.RawMessage(args)})
	if string(raw.Args) != args {
		t.Fatalf("enqueued args %s, want %s", raw.Args, args)
	}
	if a := <-got; a != args {
		t.Fatalf("handler got %s, want %s", a, args)
	}
	if done := e.waitState(raw.ID, job.Completed); string(done.Result) != `{"z":0.10, "y" : true}` {
		t.Fatalf("result %q", done.Result)
	}
	typed := e.enqueue(job.Request{Kind: "typed", Args: map[string]string{"q": "a<b"}})
	if string(typed.Args) != `{"q":"a<b"}` {
		t.Fatalf("encoded args %s", typed.Args)
	}
	if done := e.waitState(typed.ID, job.Completed); string(done.Result) != `{"html":"<p>&amp;</p>"}` {
		t.Fatalf("result %s", done.Result)
	}
}

func TestSetResultChecksJSONText(t *testing.T) {
	t.Parallel()
	var j job.Job
	for raw, want := range map[string]string{
		`{"a":1,"a":2}`:                        "twice",
		`{"a":`:                                "not valid JSON",
		`"\u0000"`:                             "NUL",
		`"` + strings.Repeat("x", 1<<20) + `"`: "at most",
	} {
		if err := j.SetResult(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("SetResult(%.20s…) = %v, want an error saying %q", raw, err, want)
		}
	}
	if err := j.SetResult(json.RawMessage(`[1, 2]`)); err != nil {
		t.Fatal(err)
	}
}
