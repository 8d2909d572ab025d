package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// completionScript writes `gaffer completion shell` to a file. The
// script is cobra's: it asks gaffer itself (gaffer __complete …) for the
// words, so a command, action or flag is completed once gaffer has it.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	out, _, err := run(t, nil, "completion", shell)
	if err != nil {
		t.Fatalf("completion %s: %v", shell, err)
	}
	if !strings.Contains(out, "__complete") {
		t.Errorf("the %s script does not ask gaffer __complete", shell)
	}
	for _, c := range [][]string{{""}, {"jobs", "list", "--wo"}, {"dev", "--dashboard-s"}, {"server", "--dashboard-s"}} {
		words, _, err := run(t, nil, append([]string{"__complete"}, c...)...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range map[string][]string{"": {"webhook-secrets", "completion"}, "jobs": {"--workflow-run"}, "dev": {"--dashboard-session-length"}, "server": {"--dashboard-session-length"}}[c[0]] {
			if !strings.Contains(words, want) {
				t.Errorf("completing %q lacks %q:\n%s", c, want, words)
			}
		}
	}
	p := filepath.Join(t.TempDir(), "gaffer."+shell)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// gafferOnPath is a PATH whose gaffer is this test binary run as the
// command (see TestMain), for the shells' scripts to call.
func gafferOnPath(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nGAFFER_E2E_MAIN=1 exec '" + exe + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "gaffer"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// The bash script parses and completes commands, actions, flags (from
// the commands' own flag sets) and positional choices, asking gaffer.
// (compopt is stubbed: outside a real completion bash refuses it.)
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	script := completionScript(t, "bash")
	path := gafferOnPath(t)
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	for line, want := range map[string]string{
		"gaffer jo":                              "jobs",
		"gaffer tokens l":                        "list",
		"gaffer jobs list --wo":                  "--workflow-run",
		"gaffer tokens list --j":                 "--json",
		"gaffer migrate st":                      "status",
		"gaffer bench ba":                        "backlog batches",
		"gaffer cron apply --dr":                 "--dry-run",
		"gaffer server --database-url x --lease": "--lease-ttl",
		"gaffer completion ":                     "bash fish zsh",
		"gaffer jobs list ":                      "",
	} {
		words := strings.Split(line, " ")
		cmd := exec.Command("bash", "-c", `compopt() { :; }; source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($#-1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; __start_gaffer; echo "${COMPREPLY[*]}"`, "-", script)
		cmd.Args = append(cmd.Args, words...)
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("completing %q: %q, want %q", line, got, want)
		}
	}
}

// The zsh and fish scripts are produced; where the shell is installed,
// it accepts them (and fish completes with them).
func TestZshAndFishCompletion(t *testing.T) {
	t.Parallel()
	zsh := completionScript(t, "zsh")
	fish := completionScript(t, "fish")
	if _, err := exec.LookPath("zsh"); err == nil {
		if out, err := exec.Command("zsh", "-n", zsh).CombinedOutput(); err != nil {
			t.Errorf("zsh -n: %v\n%s", err, out)
		}
	} else {
		t.Log("zsh is not installed: its script is not parsed")
	}
	if _, err := exec.LookPath("fish"); err != nil {
		t.Log("fish is not installed: its script is not parsed")
		return
	}
	if out, err := exec.Command("fish", "--no-execute", fish).CombinedOutput(); err != nil {
		t.Fatalf("fish --no-execute: %v\n%s", err, out)
	}
	cmd := exec.Command("fish", "--no-config", "-c", `source $argv[1]; complete -C "gaffer jobs list --wo"; complete -C "gaffer migrate st"`, fish)
	cmd.Env = append(os.Environ(), "PATH="+gafferOnPath(t))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--workflow-run") || !strings.Contains(string(out), "status") {
		t.Fatalf("fish completing: %v\n%s", err, out)
	}
}

func TestCompletionNeedsAShell(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"completion"}, {"completion", "powershell"}} {
		if _, _, err := run(t, nil, args...); err == nil || exitCode(err) != 2 {
			t.Errorf("gaffer %v: %v, want a usage error", args, err)
		}
	}
}
