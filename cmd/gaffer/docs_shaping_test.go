package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestDocSequencesWalkthrough runs the sequences walk-through of
// docs/shaping.md against a real `gaffer server` (curl and the gaffer
// CLI, in one bash) and checks each block's output against the block the
// doc shows after it, as TestDocWorkersWalkthrough does.
func TestDocSequencesWalkthrough(t *testing.T) {
	t.Parallel()
	e, url, admin := runShapingWalkthrough(t, "sequences")
	// The CLI's refusals: a sequence that is not halted, one that does
	// not exist, and a sequence with a unique key.
	e.env = append(e.env, "GAFFER_URL="+url, "GAFFER_TOKEN="+admin)
	e.fails(1, "is not halted", "sequences", "resume", "account-42")
	e.fails(1, "no sequence", "sequences", "get", "account-43")
	e.fails(1, "sequence", "jobs", "enqueue", "--kind", "k", "--allow-unknown-kind", "--sequence", "s", "--unique-key", "u")
	e.fails(1, "on_failure", "jobs", "enqueue", "--kind", "k", "--allow-unknown-kind", "--sequence", "s", "--sequence-on-failure", "stop")
}

// runShapingWalkthrough runs the walk-through of docs/shaping.md marked
// <!-- walkthrough NAME --> against a real `gaffer server` that runs no
// kind the doc enqueues (its jobs wait, as the doc shows): each sh block
// in one bash, each block's output checked against the block the doc
// shows after it. It returns the server's harness, URL and an admin
// token, for the test's own checks after.
func runShapingWalkthrough(t *testing.T, name string) (*e2e, string, string) {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through needs %s, which is not installed", tool)
		}
	}
	blocks := walkthroughIn(t, "shaping.md", "<!-- walkthrough "+name)
	e := newE2E(t)
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "dev", "--tenant", "*", "--scopes", "admin"))
	_, url := e.server("node-1", "--queues", "default=2")

	var script strings.Builder
	// The doc's `gaffer` is this test binary run as the command.
	script.WriteString("set -e\ngaffer() { GAFFER_E2E_MAIN=1 \"$GAFFER_BIN\" \"$@\"; }\n")
	var checks []docBlock
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
	if len(checks) < 2 {
		t.Fatalf("found %d sh blocks in the %s walk-through; the pattern no longer finds them", len(checks), name)
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(append(os.Environ(), e.env...), "GAFFER_URL="+url, "GAFFER_TOKEN="+admin, "GAFFER_BIN="+os.Args[0], "TZ=UTC")
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
	return e, url, admin
}

// TestDocUniquenessWindowsWalkthrough runs the uniqueness windows
// walk-through of docs/shaping.md (curl and the CLI) against a real
// server, and the CLI's refusal of a bad window.
func TestDocUniquenessWindowsWalkthrough(t *testing.T) {
	t.Parallel()
	e, url, admin := runShapingWalkthrough(t, "unique")
	e.env = append(e.env, "GAFFER_URL="+url, "GAFFER_TOKEN="+admin)
	e.fails(1, "unique_for", "jobs", "enqueue", "--kind", "k", "--allow-unknown-kind", "--unique-key", "u", "--unique-for", "1ms")
}

// TestDocDebounceWalkthrough runs the debounce walk-through of
// docs/shaping.md (curl and the CLI) against a real server, and the CLI's
// refusal of debounce beside a unique key.
func TestDocDebounceWalkthrough(t *testing.T) {
	t.Parallel()
	e, url, admin := runShapingWalkthrough(t, "debounce")
	e.env = append(e.env, "GAFFER_URL="+url, "GAFFER_TOKEN="+admin)
	e.fails(1, "debounce", "jobs", "enqueue", "--kind", "k", "--allow-unknown-kind", "--debounce-key", "d", "--debounce-window", "1s", "--unique-key", "u")
}
