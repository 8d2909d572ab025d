package pgserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// CPU counts the work of a backend that has exited (its connection
// closed before the second reading), which a sum over live processes
// misses, and it is the instance's: the postmaster found from a backend.
func TestCPUCountsExitedBackends(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		t.Fatal(err)
	}
	pm, err := PostmasterOf(backend)
	if err != nil {
		t.Fatal(err)
	}
	before, err := CPU(pm)
	if err != nil {
		t.Fatal(err)
	}
	// About half a second of one core, in the backend, then it exits.
	start := time.Now()
	var busy time.Duration
	for busy < 500*time.Millisecond {
		if _, err := conn.Exec(ctx, `SELECT sum(g) FROM generate_series(1, 2000000) g`); err != nil {
			t.Fatal(err)
		}
		busy = time.Since(start)
	}
	spent, err := readStat(backend)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	// The postmaster reaps the backend soon after it exits.
	var after time.Duration
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := readStat(backend); err != nil {
			if after, err = CPU(pm); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backend did not exit")
		}
	}
	used := time.Duration(spent.utime+spent.stime) * time.Second / userHZ
	if used < 100*time.Millisecond {
		t.Fatalf("the backend used %s: the load did not happen", used)
	}
	if got := after - before; got < used {
		t.Fatalf("CPU rose by %s while an exited backend used %s", got, used)
	}
	if _, err := CPU(1 << 30); err == nil {
		t.Fatal("CPU of a postmaster that does not exist: no error")
	}
}
