package job_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// TestStopDuringClaimLosesNothing stops a worker after PostgreSQL has
// committed its claim but before the claimed rows reached the worker. The
// jobs must not stay running on the stopped node (where nothing runs them
// until the lease expires, burning an attempt — a one-attempt job went to
// the DLQ without ever running). Red when the claim is cancelled with the
// worker's context: pgx then drops the connection and the rows with it.
func TestStopDuringClaimLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	e.reg.HandleFunc("once", func(ctx context.Context, j *job.Job) error {
		runs.Add(1)
		return nil
	})
	ctx := context.Background()
	j := e.enqueue(job.Request{Kind: "once", MaxAttempts: 1, Queue: "stopq"})

	// The worker reaches PostgreSQL through a proxy that can slow the
	// answers down, on one connection whose claim statement is prepared
	// already (so that a claim is one round trip).
	u, err := url.Parse(e.st.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	u.Host = proxy.Addr()
	wst, err := store.Open(ctx, u.String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer wst.Close()
	if _, err := wst.ClaimJobs(ctx, store.ClaimParams{Queue: "warm", Limit: 1, Token: 1, LeaseTTL: time.Minute, Node: "stopping"}); err != nil {
		t.Fatal(err)
	}
	w, err := job.NewWorker(job.WorkerConfig{Pool: wst.Pool(), Registry: e.reg, Metrics: e.metrics, NodeID: "stopping",
		Queues: map[string]int{"stopq": 1}, Logger: testLogger(t), LeaseTTL: time.Minute, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const lag = time.Second
	proxy.SetLatency(lag)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The claim committed on the server; its answer is a second away.
	e.waitState(j.ID, job.Running)
	stopped := make(chan error, 1)
	go func() {
		stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		stopped <- w.Stop(stopCtx)
	}()
	time.Sleep(lag / 4)
	proxy.SetLatency(0) // the answer in flight still takes its second
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	got, err := e.client.Get(ctx, "", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case got.State == job.Completed && runs.Load() == 1:
		// Claimed, run and completed within the drain: fine.
	case got.State == job.Pending && runs.Load() == 0:
		// Given back: any node claims it at once, with its attempt intact.
		if left := got.MaxAttempts - got.Attempt; left < 1 {
			t.Fatalf("released job has no attempt left: attempt %d of %d", got.Attempt, got.MaxAttempts)
		}
	default:
		t.Fatalf("after Stop the job is %s on node %q (attempt %d, handler runs %d): lost until its lease expires",
			got.State, got.Node, got.Attempt, runs.Load())
	}
}
