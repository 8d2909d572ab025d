package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// shellBlocks are the ```sh blocks of docs/shaping.md's "Batches with a
// callback" section, in order.
func shellBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/shaping.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Batches with a callback")
	if start < 0 {
		t.Fatal("docs/shaping.md has no Batches section")
	}
	doc = doc[start:]
	if end := strings.Index(doc[3:], "\n## "); end >= 0 {
		doc = doc[:end+3]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		out = append(out, m[1])
	}
	return out
}

// words splits a documented command line as the shell would (words,
// single-quoted strings).
func words(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, in := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// The examples of docs/shaping.md, "Batches with a callback", run as
// written against a real node: the curl block with curl, the CLI block
// with the gaffer command (the documented batch id 12 standing for the
// batch each opened). Each batch's callback is enqueued once, after it
// was closed.
func TestBatchDocExamples(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	e := newE2E(t)
	e.ok("migrate", "up")
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "e2e-admin", "--tenant", "*", "--scopes", "admin"))
	_, url := e.server("node-1", "--allow-unknown-kinds")
	e.env = append(e.env, "GAFFER_URL="+url, "GAFFER_TOKEN="+admin)
	blocks := shellBlocks(t)
	if len(blocks) != 2 {
		t.Fatalf("%d sh blocks in the Batches section, want 2 (curl, CLI)", len(blocks))
	}

	// curl: each command (lines joined at their backslashes), in order.
	curl := strings.ReplaceAll(blocks[0], "\\\n", " ")
	first := ""
	for _, line := range strings.Split(curl, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if first != "" {
			line = strings.NewReplacer("/v1/batches/12", "/v1/batches/"+first, `"batch":12`, `"batch":`+first, "batch=12", "batch="+first).Replace(line)
		}
		cmd := exec.Command("bash", "-c", "set -o pipefail; "+line+" --fail-with-body")
		cmd.Env = append(os.Environ(), "GAFFER="+url, "TOKEN="+admin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		if first == "" {
			var b struct{ ID int64 }
			if err := json.Unmarshal(out, &b); err != nil || b.ID == 0 {
				t.Fatalf("open: %s", out)
			}
			first = fmt.Sprint(b.ID)
		}
	}
	// The first batch was closed with its three jobs pending, then the
	// one-call batch was opened and closed with one.
	if got := e.scalar(`SELECT state || ' ' || total FROM gaffer.batches WHERE id = $1`, first); got != "closed 3" {
		t.Fatalf("first batch: %s", got)
	}
	if got := e.scalar(`SELECT count(*) FROM gaffer.batches WHERE state = 'closed' AND total = 1`); got != "1" {
		t.Fatalf("one-call batches: %s", got)
	}

	// The CLI, with the batch the first line opens.
	id := ""
	for _, line := range strings.Split(blocks[1], "\n") {
		args := words(strings.TrimSpace(line))
		if len(args) == 0 || args[0] != "gaffer" {
			continue
		}
		args = args[1:]
		for i, a := range args {
			if a == "12" {
				args[i] = id
			}
		}
		if args[0] == "jobs" && args[1] == "enqueue" {
			args = append(args, "--allow-unknown-kind")
		}
		if id == "" {
			var b struct{ ID int64 }
			e.jsonOK(&b, args...)
			id = fmt.Sprint(b.ID)
			continue
		}
		out := e.ok(args...)
		if args[0] == "batches" && args[1] == "get" && !strings.Contains(out, "closed") {
			t.Fatalf("batches get: %s", out)
		}
	}
	// Closed with one pending job, then cancelled: its callback is
	// enqueued, once.
	e.waitSQL("cancelled batch's callback", `SELECT count(*) FROM gaffer.jobs WHERE kind = 'import.done' AND (args->>'batch') = $1`, "1", id)
	if got := e.scalar(`SELECT state FROM gaffer.batches WHERE id = $1`, id); got != "finished" {
		t.Fatalf("CLI batch: %s", got)
	}
	e.fails(1, "conflict", "jobs", "enqueue", "--kind", "import.row", "--batch", id, "--allow-unknown-kind")
}
