package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// runMain runs gaffer like run, with setup applied to the Main first.
func runMain(t *testing.T, env map[string]string, setup func(*Main), args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}
	if setup != nil {
		setup(m)
	}
	if err = m.Run(context.Background(), args); err != nil {
		m.printError(err)
	}
	return out.String(), errOut.String(), err
}

// Help is asked for: it goes to stdout, exit 0, and is the help of the
// command named (gaffer help jobs is the jobs group's). A group run
// without its command prints its help and says what is missing.
func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"jobs", "list", "--help"}, {"jobs", "list", "-h"}, {"help", "jobs", "list"}, {"jobs", "list", "--url", "http://x", "--help"}} {
		out, _, err := run(t, nil, args...)
		if err != nil || !strings.Contains(out, "gaffer jobs list [flags]") || !strings.Contains(out, "--workflow-run") {
			t.Errorf("gaffer %v: %v\n%s", args, err, out)
		}
	}
	out, _, err := run(t, nil, "help", "jobs")
	if again, _, _ := run(t, nil, "jobs", "help"); again != out {
		t.Errorf("gaffer jobs help:\n%s\nwant gaffer help jobs:\n%s", again, out)
	}
	if err != nil || !strings.Contains(out, "enqueue") || !strings.Contains(out, "gaffer jobs <command>") || strings.Contains(out, "webhook-secrets") {
		t.Errorf("gaffer help jobs: %v\n%s", err, out)
	}
	out, stderr, err := run(t, nil, "jobs")
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "jobs needs a command: cancel, delete, enqueue, get, list, retry") || !strings.Contains(stderr, "Available Commands") || out != "" {
		t.Errorf("gaffer jobs: %v\nstdout %q\nstderr %s", err, out, stderr)
	}
}

func TestVersionFlag(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, nil, "--version")
	if err != nil || !strings.HasPrefix(out, "gaffer "+version()+"\ntime zone rules: tzdata ") {
		t.Errorf("gaffer --version: %v\n%s", err, out)
	}
	out, _, err = run(t, nil, "version", "-o", "json")
	var v struct{ Version, Tzdata string }
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.Version != version() || v.Tzdata == "" {
		t.Errorf("gaffer version -o json: %v\n%s", err, out)
	}
}

// A mistyped command gets the nearest one suggested; an unknown flag is
// one error, spelled as typed, and a usage error (exit 2).
func TestSuggestionsAndFlagErrors(t *testing.T) {
	t.Parallel()
	_, stderr, err := runMain(t, nil, nil, "jobs", "lst")
	if err == nil || exitCode(err) != 2 || !strings.Contains(stderr, `gaffer: unknown command "lst" for "gaffer jobs"`) || !strings.Contains(stderr, "Did you mean this?\n\tlist\n") {
		t.Errorf("gaffer jobs lst: %v\n%s", err, stderr)
	}
	if _, stderr, err = runMain(t, nil, nil, "jbos"); err == nil || exitCode(err) != 2 || !strings.Contains(stderr, "Did you mean this?\n\tjobs\n") {
		t.Errorf("gaffer jbos: %v\n%s", err, stderr)
	}
	_, stderr, err = runMain(t, nil, nil, "jobs", "list", "--bogus")
	if err == nil || exitCode(err) != 2 || strings.Count(stderr, "bogus") != 1 || !strings.Contains(stderr, "unknown flag: --bogus") {
		t.Errorf("gaffer jobs list --bogus: %v\n%s", err, stderr)
	}
}

// Global flags stand anywhere, before the command too; a long flag
// given with one dash (as Go's flag package took it) still works.
func TestGlobalFlagsAnywhere(t *testing.T) {
	t.Parallel()
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Write([]byte(`{"data":[{"id":7,"kind":"mail","queue":"default","state":"pending"}]}`))
	}))
	t.Cleanup(srv.Close)
	for _, args := range [][]string{
		{"--json", "--url", srv.URL, "--token", "tok-1", "jobs", "list"},
		{"jobs", "--url", srv.URL, "list", "--token", "tok-1", "--json"},
		{"jobs", "list", "-url", srv.URL, "-token=tok-1", "-json"},
		{"-o", "json", "--url=" + srv.URL, "--token", "tok-1", "jobs", "list"},
	} {
		auth.Store("")
		out, _, err := run(t, nil, args...)
		if err != nil || !strings.HasPrefix(out, "{\n  \"data\"") || auth.Load() != "Bearer tok-1" {
			t.Errorf("gaffer %v: %v (token %v)\n%s", args, err, auth.Load(), out)
		}
	}
}

// -o picks table or json; under -o json (or --json) an error is one JSON
// object on stderr with the API's problem code, and the exit codes stay.
func TestOutputFormatAndJSONErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/jobs/404" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status":404,"code":"not_found","detail":"no job 404"}`))
			return
		}
		w.Write([]byte(`{"id":7,"kind":"mail","queue":"default","state":"pending","max_attempts":25}`))
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"GAFFER_URL": srv.URL, "GAFFER_TOKEN": "a-token"}
	if out, _, err := run(t, env, "jobs", "get", "7", "-o", "table"); err != nil || !strings.Contains(out, "kind      mail") {
		t.Errorf("-o table: %v\n%s", err, out)
	}
	if out, _, err := run(t, env, "jobs", "get", "7", "-o", "json"); err != nil || !json.Valid([]byte(out)) {
		t.Errorf("-o json: %v\n%s", err, out)
	}
	if _, _, err := run(t, env, "jobs", "get", "7", "-o", "yaml"); err == nil || exitCode(err) != 2 {
		t.Errorf("-o yaml: %v, want a usage error", err)
	}
	for _, args := range [][]string{{"-o", "json", "jobs", "get", "404"}, {"jobs", "get", "404", "--json"}} {
		out, stderr, err := runMain(t, env, nil, args...)
		var got struct {
			Error struct{ Message, Code string }
		}
		if err == nil || exitCode(err) != 1 || out != "" || json.Unmarshal([]byte(stderr), &got) != nil || got.Error.Code != "not_found" || !strings.Contains(got.Error.Message, "no job 404") {
			t.Errorf("gaffer %v: %v\nstdout %q\nstderr %q", args, err, out, stderr)
		}
	}
	_, stderr, err := runMain(t, env, nil, "-o", "json", "jobs", "get")
	var got struct {
		Error struct{ Message, Code string }
	}
	if err == nil || exitCode(err) != 2 || json.Unmarshal([]byte(stderr), &got) != nil || got.Error.Code != "usage" {
		t.Errorf("a usage error under -o json: %v\n%s", err, stderr)
	}
}

// Times show their zone: the local one, or UTC with --utc.
func TestTimesShowTheirZone(t *testing.T) {
	t.Parallel()
	env := fakeAPI(t, func(*http.Request) string {
		return `{"id":7,"kind":"mail","queue":"default","state":"pending","run_at":"2026-11-27T07:30:00Z"}`
	})
	est := func(m *Main) { m.Location = time.FixedZone("EST", -5*3600) }
	if out, _, err := runMain(t, env, est, "jobs", "get", "7"); err != nil || !strings.Contains(out, "run at    2026-11-27 02:30:00 EST\n") {
		t.Errorf("jobs get: %v\n%s", err, out)
	}
	if out, _, err := runMain(t, env, est, "--utc", "jobs", "get", "7"); err != nil || !strings.Contains(out, "run at    2026-11-27 07:30:00 UTC\n") {
		t.Errorf("jobs get --utc: %v\n%s", err, out)
	}
}

// jobs list shows a TENANT column when its rows hold several tenants,
// and --tenant asks the API for one.
func TestJobsListTenants(t *testing.T) {
	t.Parallel()
	var query atomic.Value
	env := fakeAPI(t, func(r *http.Request) string {
		query.Store(r.URL.RawQuery)
		if r.URL.Query().Get("tenant") == "acme" {
			return `{"data":[{"id":1,"tenant":"acme","kind":"k","queue":"q","state":"pending"}]}`
		}
		return `{"data":[{"id":1,"tenant":"acme","kind":"k","queue":"q","state":"pending"},{"id":2,"tenant":"globex","kind":"k","queue":"q","state":"pending"}]}`
	})
	out, _, err := run(t, env, "jobs", "list")
	if err != nil || !strings.HasPrefix(out, "ID  TENANT  KIND") || !strings.Contains(out, "globex") {
		t.Errorf("jobs list over two tenants: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"jobs", "list", "--tenant", "acme"}, {"--tenant", "acme", "jobs", "list"}} {
		out, _, err = run(t, env, args...)
		if err != nil || strings.Contains(out, "TENANT") || !strings.Contains(query.Load().(string), "tenant=acme") {
			t.Errorf("gaffer %v: %v (query %v)\n%s", args, err, query.Load(), out)
		}
	}
}

// jobFake answers a job's GET with its states in turn, the last one for
// good, and POST /v1/jobs with the job pending.
func jobFake(t *testing.T, states ...string) map[string]string {
	var n atomic.Int32
	return fakeAPI(t, func(r *http.Request) string {
		if r.Method == "POST" {
			return `{"job":{"id":9,"kind":"k","queue":"default","state":"pending"}}`
		}
		i := min(int(n.Add(1))-1, len(states)-1)
		extra := ""
		switch states[i] {
		case "completed":
			extra = `,"result":{"ok":true}`
		case "failed":
			extra = `,"errors":[{"attempt":1,"kind":"error","error":"boom"}]`
		}
		return `{"id":9,"kind":"k","queue":"default","state":"` + states[i] + `"` + extra + `}`
	})
}

// --wait and --watch poll until the job or run is final; one that did
// not complete exits 1.
func TestWaitAndWatch(t *testing.T) {
	t.Parallel()
	fast := func(m *Main) { m.pollEvery = time.Millisecond }
	out, _, err := runMain(t, jobFake(t, "pending", "running", "completed"), fast, "jobs", "enqueue", "--kind", "k", "--wait")
	if err != nil || !strings.Contains(out, "enqueued job 9") || !strings.HasSuffix(out, "job 9 completed: {\"ok\":true}\n") {
		t.Errorf("enqueue --wait: %v\n%s", err, out)
	}
	out, _, err = runMain(t, jobFake(t, "running", "failed"), fast, "jobs", "enqueue", "--kind", "k", "--wait", "-o", "json")
	if err == nil || exitCode(err) != 1 || !strings.Contains(out, `"state": "failed"`) || strings.Contains(out, "enqueued") {
		t.Errorf("enqueue --wait of a failing job: %v\n%s", err, out)
	}
	out, _, err = runMain(t, jobFake(t, "pending", "pending", "running", "completed"), fast, "jobs", "get", "9", "--watch")
	if err != nil || strings.Count(out, "id        9") != 3 {
		t.Errorf("jobs get --watch: %v\n%s", err, out)
	}
	var n atomic.Int32
	env := fakeAPI(t, func(*http.Request) string {
		if n.Add(1) < 3 {
			return `{"id":4,"name":"w","state":"running"}`
		}
		return `{"id":4,"name":"w","state":"cancelled"}`
	})
	out, _, err = runMain(t, env, fast, "workflows", "get", "4", "--watch")
	if err == nil || exitCode(err) != 1 || strings.Count(out, "run 4 (w)") != 2 {
		t.Errorf("workflows get --watch: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := &Main{Stdin: strings.NewReader(""), Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer), Getenv: func(k string) string { return jobFake(t, "running")[k] }}
	if err := m.Run(ctx, []string{"jobs", "get", "9", "--watch"}); err == nil {
		t.Error("jobs get --watch went on after its context ended")
	}
}

// Completion asks gaffer (cobra's __complete) and gets values: job
// states, and queues, cron entries and nodes from the API; an API it
// cannot reach gives no suggestions, quietly.
func TestCompletionValuesFromTheAPI(t *testing.T) {
	t.Parallel()
	env := fakeAPI(t, func(r *http.Request) string {
		if r.Header.Get("Authorization") != "Bearer a-token-for-the-fake-api" {
			return `{}`
		}
		switch r.URL.Path {
		case "/v1/queues":
			return `{"data":[{"name":"default"},{"name":"mail"}]}`
		case "/v1/cron":
			return `{"data":[{"name":"nightly"},{"name":"hourly"}]}`
		case "/v1/nodes":
			return `{"data":[{"id":"node-a"},{"id":"node-b"}]}`
		}
		return `{}`
	})
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"jobs", "list", "--state", ""}, []string{"pending", "held", "running", "retrying", "completed", "failed", "cancelled"}},
		{[]string{"jobs", "list", "--state", "failed,"}, []string{"failed,pending", "failed,held", "failed,running", "failed,retrying", "failed,completed", "failed,cancelled"}},
		{[]string{"jobs", "list", "--queue", ""}, []string{"default", "mail"}},
		{[]string{"jobs", "enqueue", "--queue", "m"}, []string{"mail"}},
		{[]string{"cron", "pause", ""}, []string{"nightly", "hourly"}},
		{[]string{"cron", "history", "n"}, []string{"nightly"}},
		{[]string{"nodes", "drain", ""}, []string{"node-a", "node-b"}},
		{[]string{"nodes", "undrain", "node-"}, []string{"node-a", "node-b"}},
	} {
		out, _, err := run(t, env, append([]string{"__complete"}, c.args...)...)
		got := strings.Split(strings.TrimSpace(out), "\n")
		if err != nil || len(got) != len(c.want)+1 {
			t.Errorf("completing %q: %v\n%s", c.args, err, out)
			continue
		}
		for i, w := range c.want {
			if got[i] != w {
				t.Errorf("completing %q: %q, want %q", c.args, got[:len(got)-1], c.want)
				break
			}
		}
	}
	down := map[string]string{"GAFFER_URL": "http://127.0.0.1:1", "GAFFER_TOKEN": "x"}
	if out, _, err := run(t, down, "__complete", "cron", "get", ""); err != nil || strings.TrimSpace(out) != ":4" {
		t.Errorf("completing with the API down: %v\n%q", err, out)
	}
}
