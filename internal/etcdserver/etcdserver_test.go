package etcdserver

import (
	"errors"
	"fmt"
	"net"
	"testing"
)

// A start that loses its port to another process is tried again on new
// ports; any other failure is returned at once.
func TestRetryOnTakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, taken := net.Listen("tcp", l.Addr().String())
	if taken == nil || !portTaken(fmt.Errorf("start embedded etcd: %w", taken)) {
		t.Fatalf("a second listen on %s: %v, not recognised as a taken port", l.Addr(), taken)
	}

	calls := 0
	got, err := retryOnTakenPort(func() (int, error) {
		calls++
		if calls < 3 {
			return 0, fmt.Errorf("start embedded etcd: %w", taken)
		}
		return 42, nil
	})
	if err != nil || got != 42 || calls != 3 {
		t.Fatalf("after two taken ports: %d, %v in %d calls", got, err, calls)
	}

	calls = 0
	other := errors.New("embedded etcd did not become ready within 30s")
	if _, err := retryOnTakenPort(func() (int, error) { calls++; return 0, other }); !errors.Is(err, other) || calls != 1 {
		t.Fatalf("another failure: %v after %d calls, want it returned at once", err, calls)
	}

	calls = 0
	if _, err := retryOnTakenPort(func() (int, error) { calls++; return 0, taken }); err == nil || calls != portAttempts {
		t.Fatalf("ports always taken: %v after %d calls, want an error after %d", err, calls, portAttempts)
	}
}
