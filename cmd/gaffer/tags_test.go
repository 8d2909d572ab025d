package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
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
	cut := fakeAPI(t, func(r *http.Request) string { return `{"data":[],"next_cursor":"OTkwMw","search_window_cut":true}` })
	if out, _, err := run(t, cut, "jobs", "list", "--arg", "customer=42"); err != nil || !strings.Contains(out, "newest 10,000 jobs") ||
		!strings.Contains(out, "--cursor OTkwMw") {
		t.Fatalf("a cut search printed %q, %v", out, err)
	}
	if _, _, err := run(t, env, "jobs", "list", "--arg", "customer"); err == nil || !strings.Contains(err.Error(), "PATH=VALUE") {
		t.Fatalf("--arg without =: %v", err)
	}
	take()
}

// The CLI examples of docs/shaping.md's "Tags and search" run as written
// (against a fake API): every flag exists and each command sends its
// request.
func TestShapingTagCLIExamplesRun(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/shaping.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Tags and search")
	if !ok {
		t.Fatal("docs/shaping.md has no section Tags and search")
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 {
		t.Fatal("no CLI block in the section")
	}
	var mu sync.Mutex
	requests := 0
	env := fakeAPI(t, func(r *http.Request) string {
		mu.Lock()
		requests++
		mu.Unlock()
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/jobs":
			return `{"job":{"id":5,"kind":"report.build","state":"pending","tags":["billing","env:prod"]}}`
		case r.URL.Path == "/v1/jobs":
			return `{"data":[{"id":5,"kind":"report.build","state":"pending","tags":["billing","env:prod"]}]}`
		default:
			return `{"action":"cancel","dry_run":true,"matched":1,"acted":0,"more":false}`
		}
	})
	commands := 0
	for _, line := range strings.Split(strings.ReplaceAll(blocks[1][1], "\\\n", ""), "\n") {
		if !strings.HasPrefix(line, "gaffer ") {
			continue
		}
		commands++
		words := shellWords(t, strings.TrimPrefix(line, "gaffer "))
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return requests
		}
		before := count()
		if _, _, err := run(t, env, words...); err != nil {
			t.Errorf("gaffer %s: %v", strings.Join(words, " "), err)
		}
		if count() == before {
			t.Errorf("gaffer %s sent no request", strings.Join(words, " "))
		}
	}
	if commands != 4 {
		t.Fatalf("%d gaffer commands in the section's CLI block, want 4", commands)
	}
}

// shellWords splits a command line as sh would, for the docs' examples:
// words separated by spaces, '...' quoting.
func shellWords(t *testing.T, s string) []string {
	var out []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}
