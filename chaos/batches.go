package chaos

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// batchLoad opens a batch every second while workflows run (the
// profiles with WorkflowEvery): its callback is a chaos.work job, its ten
// jobs come in two calls, some of them fail into the DLQ, and it is
// closed. The batches are tracked whatever the faults did to the calls:
// settleAndCheck closes them all again before it waits, and requires each
// one's callback exactly once (checkBatches).
func (h *harness) batchLoad(ctx context.Context) {
	if h.o.Profile.WorkflowEvery == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(h.o.Seed), 7))
	client := job.NewClient(h.pool, nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		b, err := client.OpenBatch(ctx, job.BatchRequest{Kind: "chaos.work", Args: map[string]int{"ms": 1}, MaxAttempts: 100})
		if err != nil {
			continue // not accepted (PostgreSQL restarting)
		}
		h.mu.Lock()
		h.batches = append(h.batches, b.ID)
		h.mu.Unlock()
		for range 2 {
			reqs := make([]job.Request, 5)
			for i := range reqs {
				args, _ := json.Marshal(map[string]any{"ms": 5 + rng.IntN(60), "fail": rng.Float64() < 0.2})
				reqs[i] = job.Request{Kind: "chaos.work", Args: json.RawMessage(args), MaxAttempts: 2, Batch: b.ID}
			}
			client.EnqueueMany(ctx, reqs) // a refusal leaves the batch smaller
		}
		client.CloseBatch(ctx, "", b.ID) // settleAndCheck closes it again
	}
}

// closeBatches closes every tracked batch (a close a fault refused), so
// that each can finish.
func (h *harness) closeBatches(ctx context.Context) {
	h.mu.Lock()
	ids := append([]int64(nil), h.batches...)
	h.mu.Unlock()
	client := job.NewClient(h.pool, nil)
	for _, id := range ids {
		if _, err := client.CloseBatch(ctx, "", id); err != nil {
			h.t.Fatalf("close batch %d: %v", id, err)
		}
	}
}

// checkBatches: every tracked batch finished, with exactly one callback
// job (the one it names), enqueued no earlier than its last job's final
// state, whose summary counts what its jobs became.
func (h *harness) checkBatches(ctx context.Context, r *Report, v func(string, ...any)) {
	h.mu.Lock()
	ids := append([]int64(nil), h.batches...)
	h.mu.Unlock()
	r.Batches = len(ids)
	rows, err := h.pool.Query(ctx, `
		SELECT b.id, b.state, b.total, b.completed, b.failed, b.cancelled, coalesce(b.callback_job_id, 0),
		       (SELECT count(*) FROM gaffer.jobs c WHERE c.kind = 'chaos.work' AND c.args::jsonb ? 'failed_ids'
		            AND (c.args->>'batch')::bigint = b.id),
		       (SELECT count(*) FROM gaffer.jobs j WHERE j.batch_id = b.id),
		       (SELECT count(*) FROM gaffer.jobs j WHERE j.batch_id = b.id AND j.state = 'completed'),
		       (SELECT count(*) FROM gaffer.jobs j WHERE j.batch_id = b.id AND j.state = 'failed'),
		       coalesce((SELECT (c.args->>'completed')::bigint = b.completed AND (c.args->>'failed')::bigint = b.failed
		                 FROM gaffer.jobs c WHERE c.id = b.callback_job_id), false),
		       coalesce((SELECT c.created_at >= coalesce((SELECT max(finalized_at) FROM gaffer.jobs j WHERE j.batch_id = b.id), '-infinity')
		                 FROM gaffer.jobs c WHERE c.id = b.callback_job_id), false)
		FROM gaffer.batches b WHERE b.id = ANY($1) ORDER BY b.id`, ids)
	if err != nil {
		h.t.Fatalf("check batches: %v", err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var id, total, completed, failed, cancelled, cb, callbacks, jobs, jc, jf int64
		var state string
		var summaryOK, afterOK bool
		if err := rows.Scan(&id, &state, &total, &completed, &failed, &cancelled, &cb, &callbacks, &jobs, &jc, &jf, &summaryOK, &afterOK); err != nil {
			h.t.Fatalf("check batches: %v", err)
		}
		seen++
		switch {
		case callbacks != 1:
			v("batch %d has %d callback jobs, want exactly 1", id, callbacks)
		case state != "finished" || cb == 0:
			v("batch %d is %s (callback job %d) after the healed cluster settled", id, state, cb)
		case total != jobs || completed != jc || failed != jf || completed+failed+cancelled != total:
			v("batch %d counts %d jobs (%d completed, %d failed, %d cancelled), its jobs are %d (%d completed, %d failed)",
				id, total, completed, failed, cancelled, jobs, jc, jf)
		case !summaryOK:
			v("batch %d's callback job %d does not carry its counts", id, cb)
		case !afterOK:
			v("batch %d's callback job %d was enqueued before its last job was final", id, cb)
		}
	}
	if err := rows.Err(); err != nil {
		h.t.Fatalf("check batches: %v", err)
	}
	if seen != len(ids) {
		v("%d of %d tracked batches no longer exist", len(ids)-seen, len(ids))
	}
}
