package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docBlock is a fenced block of a Markdown file: its language and text.
type docBlock struct{ lang, text string }

var fence = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")

// walkthrough returns the fenced blocks of docs/workers.md between its
// walkthrough markers, in order.
func walkthrough(t *testing.T) []docBlock { return walkthroughIn(t, "workers.md", "<!-- walkthrough") }

// walkthroughIn returns the fenced blocks of docs/file from the first
// line starting with marker to the next <!-- /walkthrough -->, in order.
func walkthroughIn(t *testing.T, file, marker string) []docBlock {
	b, err := os.ReadFile("../../docs/" + file)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, marker)
	end := start + strings.Index(doc[max(start, 0):], "<!-- /walkthrough -->")
	if start < 0 || end < start {
		t.Fatalf("docs/%s: no %s --> … <!-- /walkthrough --> section", file, marker)
	}
	var out []docBlock
	for _, m := range fence.FindAllStringSubmatch(doc[start:end], -1) {
		out = append(out, docBlock{m[1], m[2]})
	}
	return out
}

// TestDocWorkersWalkthrough runs the curl walk-through of docs/workers.md
// against a real `gaffer server`: every sh block in order, in one bash
// (so the shell variables one block sets reach the next), and checks
// each block's output against the json or text block that follows it.
// Every field the doc shows must be in the output with the value shown;
// worker ids, lease tokens and times may differ; the output may hold
// fields the doc trimmed. So the doc's commands and answers cannot drift
// from what the server does.
func TestDocWorkersWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through needs %s, which is not installed", tool)
		}
	}
	blocks := walkthrough(t)
	e := newE2E(t)
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "dev", "--tenant", "*", "--scopes", "admin"))
	worker := strings.TrimSpace(e.ok("tokens", "create", "--name", "resizers", "--scopes", "worker"))
	_, url := e.server("node-1", "--queues", "default=2")

	// One script: each sh block prints a marker first, so that its output
	// can be cut out of the whole.
	var script strings.Builder
	script.WriteString("set -e\n")
	var checks []docBlock // per sh block: the block that shows its output (lang "" when none)
	for i, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		fmt.Fprintf(&script, "echo '@@block %d@@'\n%s", len(checks), b.text)
		var shown docBlock
		if i+1 < len(blocks) && blocks[i+1].lang != "sh" {
			shown = blocks[i+1]
		}
		checks = append(checks, shown)
	}
	if len(checks) < 10 {
		t.Fatalf("found %d sh blocks in the walk-through; the pattern no longer finds them", len(checks))
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GAFFER_URL="+url, "GAFFER_TOKEN="+admin, "WORKER_TOKEN="+worker)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the walk-through failed: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	parts := regexp.MustCompile(`(?m)^@@block \d+@@\n`).Split(string(out), -1)[1:]
	if len(parts) != len(checks) {
		t.Fatalf("%d blocks ran, want %d:\n%s", len(parts), len(checks), out)
	}
	for i, shown := range checks {
		if shown.lang == "" {
			continue
		}
		if err := sameOutput(shown, parts[i]); err != nil {
			t.Errorf("walk-through block %d: %v\ndoc shows:\n%s\nserver said:\n%s", i, err, shown.text, parts[i])
		}
	}
}

// volatile are the values that differ from run to run: worker ids and
// times, as the API and as the CLI print them (lease tokens are compared
// by key, below).
var volatile = regexp.MustCompile(`rw_[0-9a-f]{16}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+`)

func normalize(s string) string { return volatile.ReplaceAllString(s, "<volatile>") }

// sameOutput checks got against the block the doc shows: a json block
// as a sequence of JSON values, a text block line by line (JSON lines as
// JSON).
func sameOutput(shown docBlock, got string) error {
	if shown.lang == "json" {
		want, err := jsonValues(shown.text)
		if err != nil {
			return fmt.Errorf("the doc's json block: %w", err)
		}
		have, err := jsonValues(got)
		if err != nil {
			return fmt.Errorf("the output: %w", err)
		}
		if len(want) != len(have) {
			return fmt.Errorf("%d JSON values, the doc shows %d", len(have), len(want))
		}
		for i := range want {
			if err := shownIn(want[i], have[i], ""); err != nil {
				return err
			}
		}
		return nil
	}
	want := strings.Split(strings.TrimSpace(shown.text), "\n")
	have := strings.Split(strings.TrimSpace(got), "\n")
	if len(want) != len(have) {
		return fmt.Errorf("%d lines, the doc shows %d", len(have), len(want))
	}
	for i := range want {
		w, h := strings.TrimSpace(want[i]), strings.TrimSpace(have[i])
		if strings.HasPrefix(w, "{") {
			wv, err1 := jsonValues(w)
			hv, err2 := jsonValues(h)
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
			if err := shownIn(wv[0], hv[0], ""); err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
		} else if strings.Contains(w, "<volatile>") {
			// A table row with a time: the same cells, whatever the padding
			// the time's width gave the columns.
			if fw, fh := strings.Fields(w), strings.Fields(normalize(h)); !slices.Equal(fw, fh) {
				return fmt.Errorf("line %d: %q, the doc shows %q", i+1, h, w)
			}
		} else if w != h {
			return fmt.Errorf("line %d: %q, the doc shows %q", i+1, h, w)
		}
	}
	return nil
}

func jsonValues(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(normalize(s)))
	var out []any
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// shownIn checks that what the doc shows is in got: every key of an
// object with the same value (a lease token only present), arrays of the
// same length element by element, other values equal.
func shownIn(want, got any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v, the doc shows an object", path, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if k == "lease_token" {
				if s, ok := gv.(string); !ok || s == "" {
					return fmt.Errorf("%s.%s: got %v, want a decimal string", path, k, gv)
				}
				continue
			}
			if err := shownIn(wv, gv, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %v, the doc shows %d elements", path, got, len(w))
		}
		for i := range w {
			if err := shownIn(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: got %v, the doc shows %v", path, got, want)
	}
	return nil
}
