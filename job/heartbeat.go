package job

import (
	"context"

	"github.com/gafferhq/gaffer/store"
)

// watch heartbeats attempts whose lease is a third spent (running, or
// with their outcome still being written) and checks the other running
// ones for cancellation requests.
func (w *Worker) watch(ctx context.Context) {
	ticker := w.clock.NewTicker(w.cfg.CheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			w.checkRunning(ctx)
		}
	}
}

func (w *Worker) checkRunning(ctx context.Context) {
	now := w.clock.Now()
	w.mu.Lock()
	var renew, check []*execution
	for _, e := range w.executing {
		e.mu.Lock()
		switch {
		case e.released || e.lost:
		case now.Sub(e.renewedAt) >= w.cfg.LeaseTTL/3:
			// Also an attempt whose handler returned: its lease must
			// outlast the write of its outcome, however slow.
			renew = append(renew, e)
		case e.finished:
		case now.Sub(e.started) >= w.cfg.CheckInterval:
			check = append(check, e)
		}
		e.mu.Unlock()
	}
	w.mu.Unlock()
	if len(renew) > 0 {
		w.heartbeat(ctx, renew)
	}
	if len(check) > 0 {
		ids := make([]int64, len(check))
		for i, e := range check {
			ids[i] = e.lease.ID
		}
		cancelled, err := w.leases.CancelRequestedAmong(ctx, ids)
		if err != nil {
			w.log.Warn("check running jobs for cancellation", "error", err)
			return
		}
		for _, id := range cancelled {
			w.CancelLocal(id)
		}
	}
}

func (w *Worker) heartbeat(ctx context.Context, es []*execution) {
	leases := make([]store.Lease, len(es))
	for i, e := range es {
		leases[i] = e.lease
	}
	sent := w.clock.Now()
	res, err := w.leases.HeartbeatJobs(ctx, leases, w.cfg.LeaseTTL)
	if err != nil {
		// The lease still has two thirds of its time: try again next tick.
		w.log.Warn("heartbeat running jobs", "jobs", len(es), "error", err)
		return
	}
	got := make(map[int64]bool, len(res))
	for _, r := range res {
		got[r.ID] = true
		if r.CancelRequested {
			w.CancelLocal(r.ID)
		}
	}
	for _, e := range es {
		e.mu.Lock()
		lost := !got[e.lease.ID] && !e.finished && !e.released && !e.lost
		if got[e.lease.ID] {
			e.renewedAt = sent
		}
		if lost {
			e.lost = true
		}
		e.mu.Unlock()
		if lost {
			w.stale(e.job, "heartbeat")
			e.cancel(ErrLeaseLost)
		}
	}
}
