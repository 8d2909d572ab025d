package clients

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The clients as packages: each one's own unit tests (against a stand-in
// node on 127.0.0.1), the Python package installed by pip into a fresh
// venv without an index, and the TypeScript declarations type-checked
// against the module and packed as npm would publish them.

// run runs name args in dir and returns its combined output; it fails
// the test, showing the output, when the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := command(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return out
}

func command(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pipOffline keeps pip off the network: no package index, and no check
// for a newer pip (which asks PyPI).
var pipOffline = []string{"PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1"}

func TestPythonClientUnitTests(t *testing.T) {
	t.Parallel()
	py := python.need(t)
	out := run(t, ".", []string{"PYTHONDONTWRITEBYTECODE=1"}, py, "-m", "unittest", "discover", "-s", "python/tests")
	if !regexp.MustCompile(`(?m)^Ran [1-9]\d* tests? in `).MatchString(out) || !strings.Contains(out, "\nOK") {
		t.Fatalf("unittest ran no tests or did not say OK:\n%s", out)
	}
}

// pip install ./clients/python must work where PyPI cannot be reached:
// the build backend is in the tree and requires nothing, so pip has
// nothing to download (PIP_NO_INDEX makes any download attempt fail).
func TestPythonClientInstallsWithPipOffline(t *testing.T) {
	t.Parallel()
	py := python.need(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := command(".", nil, py, "-m", "venv", venv); err != nil {
		msg := "python3 -m venv failed (on Debian: apt-get install python3-venv): " + strings.TrimSpace(out)
		if os.Getenv(python.require) != "" {
			t.Fatalf("%s (%s is set, so this is a failure, not a skip)", msg, python.require)
		}
		t.Skip(msg + "; skipped")
	}
	vpy := filepath.Join(venv, "bin", "python")
	src, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	run(t, t.TempDir(), pipOffline, vpy, "-m", "pip", "install", "--no-index", src)
	// Imported from elsewhere than the source, it is the installed copy.
	out := run(t, t.TempDir(), pipOffline, vpy, "-c", `
import importlib.metadata as m, os, gaffer_worker
print(gaffer_worker.__version__, m.version("gaffer-worker"), m.metadata("gaffer-worker")["License"])
print(os.path.relpath(gaffer_worker.__file__, os.path.dirname(os.path.dirname(gaffer_worker.__file__))))
print(os.path.exists(os.path.join(os.path.dirname(gaffer_worker.__file__), "py.typed")))
print(gaffer_worker.Worker.__name__, sorted(gaffer_worker.__all__))
`)
	want := "0.1.0 0.1.0 Apache-2.0\ngaffer_worker/__init__.py\nTrue\n" +
		"Worker ['APIError', 'Job', 'LeaseLost', 'Permanent', 'RetryLater', 'Snooze', 'Worker']\n"
	if out != want {
		t.Fatalf("the installed package says\n%s\nwant\n%s", out, want)
	}
	run(t, t.TempDir(), pipOffline, vpy, "-m", "pip", "uninstall", "--yes", "gaffer-worker")
	if out, err := command(t.TempDir(), nil, vpy, "-c", "import gaffer_worker"); err == nil {
		t.Fatalf("gaffer_worker still imports after pip uninstall: %s", out)
	}
}

func TestTypeScriptClientUnitTests(t *testing.T) {
	t.Parallel()
	nodePath := node.need(t)
	tests, err := filepath.Glob("typescript/test/*.test.mjs")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no typescript/test/*.test.mjs: %v", err)
	}
	for i, f := range tests {
		tests[i] = strings.TrimPrefix(f, "typescript/")
	}
	out := run(t, "typescript", nil, nodePath, append([]string{"--test"}, tests...)...)
	if !regexp.MustCompile(`(?m)^# pass [1-9]`).MatchString(out) || !regexp.MustCompile(`(?m)^# fail 0$`).MatchString(out) {
		t.Fatalf("node --test passed nothing, or failed some:\n%s", out)
	}
}

// The declarations are checked by tsc in a copy of the package with its
// locked devDependencies installed from npm's cache (npm ci --offline):
// gaffer.mjs's own types
// against gaffer.d.mts (test/conformance.mts), the tests and the example
// against gaffer.d.mts. The test then breaks each side once and expects
// tsc to say so, and checks what `npm pack` would publish.
func TestTypeScriptClientTypesAndPackage(t *testing.T) {
	t.Parallel()
	node.need(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not on PATH; the TypeScript type check and npm pack are skipped")
	}
	// The copy keeps the repository's shape around the package: prepack
	// copies ../../LICENSE into it.
	root := t.TempDir()
	pkg := filepath.Join(root, "clients", "typescript")
	copyTree(t, "typescript", pkg)
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "LICENSE"), license, 0o644); err != nil {
		t.Fatal(err)
	}
	// From npm's cache only: a test stays off the network (.ci/run fills
	// the cache before the tests).
	if out, err := command(pkg, nil, npm, "ci", "--offline", "--no-audit", "--no-fund"); err != nil {
		if regexp.MustCompile(`ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH`).MatchString(out) {
			t.Skipf("npm's cache lacks the devDependencies (run npm ci in clients/typescript once); skipped:\n%s", out)
		}
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	tsc := filepath.Join(pkg, "node_modules", ".bin", "tsc")
	typecheck := func() (string, error) {
		if out, err := command(pkg, nil, tsc, "-p", "tsconfig.impl.json"); err != nil {
			return out, err
		}
		return command(pkg, nil, tsc, "-p", ".")
	}
	if out, err := typecheck(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}

	// The check checks: cut a method from gaffer.d.mts (the tests call it)
	// and one from gaffer.mjs (the declarations promise it), and tsc must
	// name both.
	mutations := []struct{ file, old, new, want string }{
		{"gaffer.d.mts", "  stop(): void;\n", "", "Property 'stop' does not exist on type 'Worker'"},
		{"gaffer.mjs", "  handle(kind, fn) {\n", "  on(kind, fn) {\n", "Property 'handle' is missing"},
	}
	originals := map[string][]byte{}
	for _, m := range mutations {
		path := filepath.Join(pkg, m.file)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), m.old) {
			t.Fatalf("%s no longer holds %q: update this test's mutation", m.file, m.old)
		}
		originals[path] = src
		if err := os.WriteFile(path, []byte(strings.Replace(string(src), m.old, m.new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := typecheck(); err == nil {
		t.Errorf("tsc passed with a method cut from each of gaffer.d.mts and gaffer.mjs:\n%s", out)
	} else {
		for _, m := range mutations {
			if !strings.Contains(out, m.want) {
				t.Errorf("with %q cut from %s, tsc should say %q; it said:\n%s", strings.TrimSpace(m.old), m.file, m.want, out)
			}
		}
	}
	for path, src := range originals {
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out := run(t, pkg, nil, npm, "pack", "--dry-run", "--json", "--ignore-scripts=false")
	// npm prints the lifecycle scripts' output before the JSON.
	var packed []struct {
		Name, Version string
		Files         []struct{ Path string }
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "\n[")+1:]), &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --dry-run --json: %v\n%s", err, out)
	}
	var files []string
	for _, f := range packed[0].Files {
		files = append(files, f.Path)
	}
	slices.Sort(files)
	want := []string{"LICENSE", "README.md", "gaffer.d.mts", "gaffer.mjs", "package.json"}
	if packed[0].Name != "gaffer-worker" || packed[0].Version != "0.1.0" || !slices.Equal(files, want) {
		t.Fatalf("npm pack would publish %s@%s with %v, want gaffer-worker@0.1.0 with %v", packed[0].Name, packed[0].Version, files, want)
	}
	if _, err := os.Stat(filepath.Join(pkg, "LICENSE")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("postpack left LICENSE in the package directory (%v)", err)
	}
}

// copyTree copies the files under src to dst, leaving out what npm and
// tsc write (node_modules, build).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if rel == "node_modules" || rel == "build" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
