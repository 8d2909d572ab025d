package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// countingWorker runs inFlight jobs until released.
type countingWorker struct {
	inFlight, released atomic.Int32
}

func (w *countingWorker) SetClaiming(bool) {}
func (w *countingWorker) InFlight() int    { return int(w.inFlight.Load()) }
func (w *countingWorker) ReleaseRunning() error {
	w.released.Add(w.inFlight.Swap(0))
	return nil
}

// newClockedCluster makes a cluster on a fake clock, not started: pool
// may be one that never connects.
func newClockedCluster(t *testing.T, pool *pgxpool.Pool, ttl time.Duration, w Worker, onLeave func()) (*Cluster, *clock.Fake) {
	t.Helper()
	c, err := New(Config{
		Endpoints: []string{"127.0.0.1:1"}, // never dialled
		Pool:      pool, Node: NodeInfo{ID: "n", Hostname: "test", Version: "test"}, SessionTTL: ttl,
		Worker:     w,
		RescueNode: func(context.Context, Fence, string) (int, error) { return 0, nil },
		OnLeave:    onLeave,
		Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c.clock = f
	return c, f
}

// The leader acts only while etcd's last keepalive answer is younger than
// TTL − max(TTL/5, 1s), so that it stops before etcd can have expired
// its lease: a write then is refused before it reaches PostgreSQL. Red
// when the trust window ignores the margin or the keepalive's time.
func TestTrustWindowClosesBeforeTheLeaseCanExpire(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/never") // dials lazily: never here
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, tc := range []struct{ ttl, window time.Duration }{
		{2 * time.Second, time.Second},
		{10 * time.Second, 8 * time.Second},
		{30 * time.Second, 24 * time.Second},
	} {
		c, f := newClockedCluster(t, pool, tc.ttl, &countingWorker{}, nil)
		c.leading = &leadership{epoch: 1, cancel: func() {}, fenced: make(chan struct{}, 1)}
		if c.IsLeader() {
			t.Fatalf("TTL %s: a leader without an etcd connection is trusted", tc.ttl)
		}
		c.connected.Store(true)
		c.lastAck.Store(f.Now().UnixNano()) // a keepalive answer
		f.Advance(tc.window - time.Millisecond)
		if !c.IsLeader() {
			t.Fatalf("TTL %s: not trusted %s after a keepalive answer", tc.ttl, tc.window-time.Millisecond)
		}
		f.Advance(time.Millisecond)
		if c.IsLeader() {
			t.Fatalf("TTL %s: still trusted %s after the last keepalive answer; etcd may expire the lease at %s", tc.ttl, tc.window, tc.ttl)
		}
		err := c.Do(context.Background(), func(pgx.Tx) error {
			t.Fatal("a leader past its trust window ran a fenced write")
			return nil
		})
		if !errors.Is(err, errNotLeader) {
			t.Fatalf("TTL %s: a write past the trust window: %v", tc.ttl, err)
		}
		c.lastAck.Store(f.Now().UnixNano()) // the next answer reopens it
		if !c.IsLeader() {
			t.Fatalf("TTL %s: a fresh keepalive answer did not restore trust", tc.ttl)
		}
	}
}

// A drain releases the jobs still running at its deadline, on the
// node's clock: not a moment before, and at once then.
func TestDrainReleasesAtTheDeadlineNotBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	w := &countingWorker{}
	w.inFlight.Store(3)
	left := make(chan struct{})
	c, f := newClockedCluster(t, st.Pool(), 0, w, func() { close(left) })
	if err := st.RegisterNode(ctx, "n", "test", "test", "2025c", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.startDrain(ctx, time.Minute)
	if !f.WaitForTimers(2, 10*time.Second) { // the deadline and the in-flight poll
		t.Fatal("the drain is not waiting on the node's clock")
	}
	f.Advance(time.Minute - time.Millisecond)
	if f.Armed() != 2 {
		t.Fatal("the drain deadline fired before its time")
	}
	if n := w.released.Load(); n != 0 {
		t.Fatalf("released %d jobs before the deadline", n)
	}
	select {
	case <-left:
		t.Fatal("left before the deadline with jobs running")
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		t.Fatal("did not leave at the deadline")
	}
	if got := w.released.Load(); got != 3 {
		t.Fatalf("released %d jobs at the deadline, want 3", got)
	}
	var state, reason string
	if err := st.Pool().QueryRow(ctx, `SELECT state, coalesce(left_reason, '') FROM gaffer.nodes WHERE id = 'n'`).Scan(&state, &reason); err != nil {
		t.Fatal(err)
	}
	if state != "dead" || reason != "drained" {
		t.Fatalf("after the drain the node is %s (%q), want dead (drained)", state, reason)
	}
}
