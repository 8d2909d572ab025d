package pgserver

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A port another server took between our probe and our bind: with a
// chosen port Start fails rather than hand back the other server; with a
// picked one it moves to a new port and serves its own data directory.
func TestStartSurvivesATakenPort(t *testing.T) {
	ctx := context.Background()
	first, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()

	if s, err := Start(ctx, Config{Port: first.Port()}); err == nil {
		s.Stop()
		t.Fatal("Start on a port another PostgreSQL serves succeeded")
	} else if !strings.Contains(err.Error(), "could not bind") {
		t.Fatalf("Start on a taken port: %v, want the bind failure", err)
	}

	calls := 0
	real := freePort
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return first.Port(), nil
		}
		return real()
	}
	defer func() { freePort = real }()
	second, err := Start(ctx, Config{})
	if err != nil {
		t.Fatalf("Start when the first port it picked was taken: %v", err)
	}
	defer second.Stop()
	if second.Port() == first.Port() || calls < 2 {
		t.Fatalf("second server on port %d (first %d) after %d picks", second.Port(), first.Port(), calls)
	}
	conn, err := pgx.Connect(ctx, second.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil || !sameDir(dir, second.dir) {
		t.Fatalf("second server serves %q (%v), want %q", dir, err, second.dir)
	}
}
