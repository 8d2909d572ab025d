package main

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// --tag and --arg: jobs enqueue sends the tags, jobs list searches by
// tags (all, or any with --any-tag) and args fields, a bulk action sends
// the same search as its filter, and jobs get and list show the tags.
// Red with the flags not read (the requests come without them).
func TestTagsFlags(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	env := fakeAPI(t, func(r *http.Request) string {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		mu.Unlock()
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/jobs":
			return `{"job":{"id":5,"kind":"report","state":"pending","tags":["billing","env:prod"]}}`
		case r.URL.Path == "/v1/jobs/5":
			return `{"id":5,"kind":"report","state":"pending","args":{},"tags":["billing","env:prod"]}`
		case r.URL.Path == "/v1/jobs":
			return `{"data":[{"id":5,"kind":"report","state":"pending","tags":["billing","env:prod"]},{"id":4,"kind":"report","state":"pending"}]}`
		default:
			return `{"action":"cancel","matched":1,"acted":1,"more":false}`
		}
	})
	take := func() string {
		mu.Lock()
		defer mu.Unlock()
		out := strings.Join(got, "\n")
		got = nil
		return out
	}
	if _, _, err := run(t, env, "jobs", "enqueue", "--kind", "report", "--tag", "billing", "--tag", "env:prod"); err != nil {
		t.Fatal(err)
	}
	if req := take(); !strings.Contains(req, `"tags":["billing","env:prod"]`) {
		t.Fatalf("enqueue sent %s", req)
	}
	out, _, err := run(t, env, "jobs", "list", "--tag", "billing", "--tag", "env:prod", "--any-tag", "--arg", "customer=42", "--arg", "order.region=eu")
	if err != nil {
		t.Fatal(err)
	}
	if req := take(); !strings.Contains(req, "args.customer=42") || !strings.Contains(req, "args.order.region=eu") ||
		!strings.Contains(req, "tag=billing&tag=env%3Aprod") || !strings.Contains(req, "tags_match=any") {
		t.Fatalf("list sent %s", req)
	}
	if !strings.Contains(out, "TAGS") || !strings.Contains(out, "billing,env:prod") {
		t.Fatalf("list printed %q", out)
	}
	out, _, err = run(t, env, "jobs", "get", "5")
	if err != nil || !strings.Contains(out, "billing,env:prod") {
		t.Fatalf("get printed %q, %v", out, err)
	}
	if _, _, err := run(t, env, "jobs", "cancel", "--tag", "billing", "--arg", "customer=42", "--arg", "region=eu"); err != nil {
		t.Fatal(err)
	}
	if req := take(); !strings.Contains(req, `"filter":{"args":{"customer":42,"region":"eu"},"tags":["billing"]}`) {
		t.Fatalf("bulk cancel sent %s", req)
	}
	if _, _, err := run(t, env, "jobs", "list", "--arg", "customer"); err == nil || !strings.Contains(err.Error(), "PATH=VALUE") {
		t.Fatalf("--arg without =: %v", err)
	}
	take()
}
