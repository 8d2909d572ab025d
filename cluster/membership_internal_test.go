package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/pgtest"
)

// leavingWorker makes the node leave while a report is under way: report
// asks the worker for its in-flight count after reading the node's state
// and before writing its row, so that is where the leave is started, and
// given time to land first if nothing orders the two.
type leavingWorker struct {
	once  sync.Once
	leave func()
}

func (w *leavingWorker) SetClaiming(bool)      {}
func (w *leavingWorker) ReleaseRunning() error { return nil }
func (w *leavingWorker) InFlight() int {
	w.once.Do(func() {
		go w.leave()
		time.Sleep(200 * time.Millisecond)
	})
	return 0
}

// A report that read the state just before the node left must not write
// after the leave and bring the row back to life: the node would show as
// draining, and once the leader saw its etcd key go, as lost instead of
// drained. CI caught it in TestDrainUnderLoad ("node-2 is dead (lost), want
// dead (drained)").
func TestReportRacingLeaveKeepsTheLeave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	w := &leavingWorker{}
	left := make(chan struct{})
	c, err := New(Config{
		Endpoints: []string{"127.0.0.1:1"}, // never dialled: this needs only PostgreSQL
		Pool:      st.Pool(), Node: NodeInfo{ID: "n", Hostname: "test", Version: "test"},
		Worker:     w,
		RescueNode: func(context.Context, Fence, string) (int, error) { return 0, nil },
		OnLeave:    func() { close(left) },
		Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop() // New dialled nothing; Stop closes whatever a session opened
	if err := st.RegisterNode(ctx, "n", "test", "test", "2025c", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := NewAdmin(st.Pool()).Drain(ctx, "n", time.Minute); err != nil {
		t.Fatal(err)
	}
	w.leave = func() { c.leave(ctx, "drained") }
	c.state = "draining" // as startDrain leaves it
	c.report(ctx)
	select {
	case <-left:
	case <-time.After(5 * time.Second):
		t.Fatal("the node did not leave")
	}
	var state, reason string
	if err := st.Pool().QueryRow(ctx, `SELECT state, coalesce(left_reason, '') FROM gaffer.nodes WHERE id = 'n'`).Scan(&state, &reason); err != nil {
		t.Fatal(err)
	}
	if state != "dead" || reason != "drained" {
		t.Fatalf("after a report raced the leave the node is %s (%q), want dead (drained)", state, reason)
	}
}

// A node shutting down marks itself draining and wakes its report; that
// report finds no drain order in the nodes table (nobody ordered one) and
// must not take the shutdown's drain for a cancelled order: it closed the
// order's channel, which a shutdown drain does not have, and the process
// panicked ("close of nil channel") between SIGTERM and exit.
func TestReportDuringShutdownDrainKeepsDraining(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	c, err := New(Config{
		Endpoints: []string{"127.0.0.1:1"}, // never dialled: this needs only PostgreSQL
		Pool:      st.Pool(), Node: NodeInfo{ID: "n", Hostname: "test", Version: "test"},
		Worker:     &leavingWorker{leave: func() {}},
		RescueNode: func(context.Context, Fence, string) (int, error) { return 0, nil },
		Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := st.RegisterNode(ctx, "n", "test", "test", "2025c", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.SetDraining()
	c.report(ctx)
	if s := c.Status().State; s != "draining" {
		t.Fatalf("after a report during a shutdown drain the node is %s, want draining", s)
	}
}
