package main

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// gaffer jobs cancel/retry/delete with several ids or filter flags call
// the bulk endpoints; by filter they repeat while jobs are left; one id
// keeps the single-job endpoint; bad input is refused before any request.
func TestJobsBulkCommands(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	env := fakeAPI(t, func(r *http.Request) string {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body))
		switch {
		case r.URL.Path == "/v1/jobs/7/cancel":
			return `{"id":7,"state":"cancelled"}`
		case strings.Contains(string(body), `"dry_run":true`):
			return `{"action":"delete","dry_run":true,"matched":12,"acted":0,"more":false}`
		case strings.Contains(string(body), `"ids"`):
			return `{"action":"cancel","matched":2,"acted":2,"cancelling":1,"more":false,"skipped":[{"id":9,"reason":"not found"}]}`
		case len(got) == 1:
			return `{"action":"retry","matched":2,"acted":2,"retried":[{"id":1,"run_id":1},{"id":2,"run_id":50}],"more":true}`
		default:
			return `{"action":"retry","matched":1,"acted":1,"retried":[{"id":3,"run_id":3}],"more":false}`
		}
	})
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}

	out, _, err := run(t, env, "jobs", "cancel", "7")
	if reqs := take(); err != nil || len(reqs) != 1 || reqs[0] != "POST /v1/jobs/7/cancel " || !strings.Contains(out, "job 7 cancelled") {
		t.Fatalf("one id: %v %q %q", err, reqs, out)
	}
	out, _, err = run(t, env, "jobs", "cancel", "7", "8", "9")
	if reqs := take(); err != nil || len(reqs) != 1 || reqs[0] != `POST /v1/jobs/cancel {"ids":[7,8,9]}` ||
		!strings.Contains(out, "cancel: 2 jobs") || !strings.Contains(out, "1 of them running") || !strings.Contains(out, "skipped job 9: not found") {
		t.Fatalf("several ids: %v %q %q", err, reqs, out)
	}
	out, _, err = run(t, env, "jobs", "retry", "--state", "failed,retrying", "--queue", "mail", "--limit", "2")
	reqs := take()
	if err != nil || len(reqs) != 2 || reqs[0] != `POST /v1/jobs/retry {"filter":{"queue":"mail","state":["failed","retrying"]},"limit":2}` ||
		!strings.Contains(out, "retry: 3 jobs") || !strings.Contains(out, "job 2 was replayed as job 50") {
		t.Fatalf("by filter: %v %q %q", err, reqs, out)
	}
	out, _, err = run(t, env, "jobs", "delete", "--all", "--dry-run", "--tenant", "acme")
	if reqs := take(); err != nil || len(reqs) != 1 || reqs[0] != `POST /v1/jobs/delete {"dry_run":true,"filter":{},"tenant":"acme"}` ||
		!strings.Contains(out, "delete would act on 12 jobs") {
		t.Fatalf("dry run: %v %q %q", err, reqs, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "delete"}, "expected job ids, or filter flags"},
		{[]string{"jobs", "cancel", "7", "--queue", "q"}, "not both"},
		{[]string{"jobs", "retry", "1", "x"}, `job ids are positive integers, got "x"`},
	} {
		_, _, err := run(t, env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gaffer %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if reqs := take(); len(reqs) != 0 {
		t.Fatalf("refused commands sent %q", reqs)
	}
}
