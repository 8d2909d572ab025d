package pgserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gafferhq/gaffer/internal/runas"
)

// needRoot skips a test of what Start does when it runs the server as the
// postgres user, which happens only when the caller is root (as in CI).
func needRoot(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Start runs the server as the postgres user only when the caller is root")
	}
	cred, err := runas.Postgres("PostgreSQL")
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// rootOnlyDir is a fresh directory as root makes one: mode 0700, in a
// directory everyone may enter.
func rootOnlyDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "gaffer-pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// gaffer dev --data DIR as root: DIR (0700, root's, holding etcd's data
// too) is opened to the postgres user for passing through only, so the
// server starts on DIR/postgres, and what lies beside it stays closed.
func TestParentIsOpenedForPassingThroughOnly(t *testing.T) {
	cred := needRoot(t)
	parent := rootOnlyDir(t)
	beside := filepath.Join(parent, "etcd")
	if err := os.Mkdir(beside, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), Config{Dir: filepath.Join(parent, "postgres"), Parent: parent})
	if err != nil {
		t.Fatalf("start with the data directory inside a root-only parent: %v", err)
	}
	s.Stop()
	fi, err := os.Stat(parent)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o710 || st.Uid != 0 || st.Gid != cred.Gid {
		t.Fatalf("parent: mode %#o owner %d:%d, want 0710 0:%d (the postgres user may pass, not list)", fi.Mode().Perm(), st.Uid, st.Gid, cred.Gid)
	}
	if fi, err := os.Stat(beside); err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Gid != 0 {
		t.Fatalf("the directory beside: %v %v, want untouched (0700 root)", fi.Mode(), err)
	}
}

// A directory above the data that keeps the postgres user out, and that
// Start was not told is the caller's, is named rather than changed.
func TestUnreachableDataDirectoryIsNamed(t *testing.T) {
	needRoot(t)
	closed := rootOnlyDir(t)
	_, err := Start(context.Background(), Config{Dir: filepath.Join(closed, "postgres")})
	if err == nil || !strings.Contains(err.Error(), "cannot enter "+closed+" (mode 0700") {
		t.Fatalf("start under a root-only directory: %v, want it named", err)
	}
	if fi, err := os.Stat(closed); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the closed directory was changed: %v %v", fi.Mode(), err)
	}
	if _, err := Start(context.Background(), Config{Dir: filepath.Join(closed, "postgres"), Parent: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "is not inside") {
		t.Fatalf("a parent that does not hold the data: %v", err)
	}
}
