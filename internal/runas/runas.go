// Package runas runs the servers tests start — PostgreSQL, Patroni,
// PgBouncer — as the postgres system user when the test runs as root,
// since each of them refuses root.
package runas

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Postgres returns the credentials to run server (a name for errors) with:
// nil, the current user, unless the caller is root; then the postgres
// user's.
func Postgres(server string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and %s refuses to: need a \"postgres\" system user to run it as: %w", server, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Chown gives dir and everything below it to cred's user; nothing to do
// for nil (the server runs as the caller).
func Chown(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
}
