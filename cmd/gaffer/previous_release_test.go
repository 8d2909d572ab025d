package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// previousRelease is the commit TestRollingUpgradeFromPreviousRelease
// runs beside HEAD: the release a cluster is upgraded from. There are no
// release tags yet; it is ca2ab10 ("Public packages stop exposing
// internals"), the last commit of main before the online-migrations
// merge, at schema version 17. An older commit cannot stand in for it:
// from before 0017_exact_payloads (c410c95 and earlier) the upgrade is
// not a rolling one — see docs/operations.md, "Rolling upgrades".
//
// To bump it when a release is cut: set it to the release's commit (the
// full hash a tag points at: git rev-parse v1.2.0^{commit}), run
//
//	go test ./cmd/gaffer -run TestRollingUpgradeFromPreviousRelease -v
//
// and, should it fail, read the failure as a compatibility break between
// the two releases (docs/operations.md, "Expand, then contract").
const previousRelease = "ca2ab10c836acae5e4df1a21a6b77eec29d432ea"

// previousReleaseEnv, when set, names another commit to upgrade from:
// GAFFER_PREVIOUS_RELEASE=<commit> go test ./cmd/gaffer -run TestRollingUpgrade.
const previousReleaseEnv = "GAFFER_PREVIOUS_RELEASE"

// requirePreviousEnv turns the skip for a clone without the previous
// release's history into a failure (CI sets it: it runs on a full clone).
const requirePreviousEnv = "GAFFER_REQUIRE_PREVIOUS_RELEASE"

// buildPreviousRelease builds `gaffer` as of previousRelease into a
// temporary directory and returns its path. The source comes from
// `git archive`, not a worktree: the repository's .git is only read, so
// a test killed halfway leaves no worktree registered behind it, and
// runs in parallel (the race pass) do not share one.
func buildPreviousRelease(t *testing.T) string {
	t.Helper()
	commit := previousRelease
	if c := os.Getenv(previousReleaseEnv); c != "" {
		commit = c
	}
	unavailable := func(why string) {
		t.Helper()
		msg := fmt.Sprintf("previous release %.12s unavailable: %s", commit, why)
		if os.Getenv(requirePreviousEnv) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (set " + requirePreviousEnv + "=1 to make this a failure)")
	}
	if _, err := exec.LookPath("git"); err != nil {
		unavailable("no git command")
	}
	if out, err := git("cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		shallow, _ := git("rev-parse", "--is-shallow-repository").Output()
		unavailable(fmt.Sprintf("the commit is not in this clone (%s; shallow clone: %s); fetch the full history: git fetch --unshallow",
			strings.TrimSpace(string(out)), strings.TrimSpace(string(shallow))))
	}
	// From the top: in a subdirectory, git archive takes that subdirectory only.
	top, err := git("rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	archiveCmd := git("archive", "--format=tar", commit)
	archiveCmd.Dir = strings.TrimSpace(string(top))
	archive, err := archiveCmd.Output()
	if err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	if err := untar(bytes.NewReader(archive), src); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gaffer-previous")
	start := time.Now()
	// Not -trimpath: that would miss the build cache for every dependency
	// the test binary's own build left there (minutes on a cold cache);
	// as it is, only the module's own packages compile.
	build := exec.Command("go", "build", "-o", bin, "./cmd/gaffer")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release: %v\n%s", err, out)
	}
	t.Logf("built gaffer %.12s in %s", commit, time.Since(start).Round(time.Millisecond))
	return bin
}

// git runs a git command that only reads the repository. safe.directory
// lets it read a checkout owned by another user (a CI container's).
func git(args ...string) *exec.Cmd {
	return exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
}

// untar extracts a tar stream of regular files and directories into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q leaves %s", h.Name, dir)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
