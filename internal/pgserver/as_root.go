package pgserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// letThrough makes sure the server's user can reach dir: it opens parent
// and the directories between it and dir to that user (group search
// only), and checks the directories above. Nothing to do when the server
// runs as the caller.
func letThrough(dir, parent string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	if parent != "" {
		if parent, err = filepath.Abs(parent); err == nil {
			parent, err = filepath.EvalSymlinks(parent)
		}
		if err != nil {
			return fmt.Errorf("data directory parent: %w", err)
		}
		if rel, err := filepath.Rel(parent, dir); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("data directory %s is not inside %s", dir, parent)
		}
	}
	ours := parent != ""
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !canSearch(fi, cred) {
			if !ours {
				st := fi.Sys().(*syscall.Stat_t)
				return fmt.Errorf("PostgreSQL runs as the postgres user (uid %d), which cannot enter %s (mode %#o, owner %d:%d) to reach %s: put the data elsewhere, or let that user through %s",
					cred.Uid, p, fi.Mode().Perm(), st.Uid, st.Gid, dir, p)
			}
			if err := os.Chown(p, -1, int(cred.Gid)); err != nil {
				return err
			}
			if err := os.Chmod(p, fi.Mode().Perm()&^0o070|0o010); err != nil {
				return err
			}
		}
		if p == parent {
			ours = false
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// canSearch reports whether the user of cred (no supplementary groups:
// the server is started without any) may enter the directory fi.
func canSearch(fi os.FileInfo, cred *syscall.Credential) bool {
	st := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == cred.Uid:
		return perm&0o100 != 0
	case st.Gid == cred.Gid:
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

func chownForServer(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
}
