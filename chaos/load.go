package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/job"
)

func (h *harness) jobLoad(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(h.o.Seed), 2))
	client := job.NewClient(h.pool, nil)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	per := max(1, h.o.Profile.JobsPerSec/10)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		reqs := make([]job.Request, per)
		for i := range reqs {
			ms := h.o.Profile.JobMS[0] + rng.IntN(h.o.Profile.JobMS[1]-h.o.Profile.JobMS[0]+1)
			args, _ := json.Marshal(map[string]any{"ms": ms, "fail": rng.Float64() < h.o.Profile.FailShare})
			reqs[i] = job.Request{Kind: "chaos.work", Args: json.RawMessage(args), MaxAttempts: 100}
			switch {
			case rng.Float64() < h.o.Profile.LimitedShare:
				reqs[i] = limitedRequest(reqs[i], rng.IntN(limitKeys))
			case rng.Float64() < h.o.Profile.SequencedShare:
				reqs[i] = sequencedRequest(reqs[i], rng)
			case h.o.Profile.FairnessKeys > 0:
				reqs[i].FairnessKey = fmt.Sprintf("fk-%d", rng.IntN(h.o.Profile.FairnessKeys))
			}
			if rng.Float64() < h.o.Profile.ScheduledShare {
				// Due later: it waits in the scheduled index until a claim
				// makes it due.
				reqs[i].Delay = time.Duration(100+rng.IntN(1900)) * time.Millisecond
			}
		}
		ids, err := client.EnqueueMany(ctx, reqs)
		if err != nil {
			continue // not accepted (PostgreSQL restarting): not counted
		}
		h.mu.Lock()
		h.accepted = append(h.accepted, ids...)
		h.mu.Unlock()
	}
}

func (h *harness) replayLoad(ctx context.Context) {
	c := dlq.NewClient(h.pool)
	no := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		entries, err := c.List(ctx, dlq.Filter{Replayed: &no, Limit: 5, Kind: "chaos.work"})
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.WorkflowRun != 0 {
				continue
			}
			r, err := c.Replay(ctx, "", e.ID)
			if err != nil {
				continue
			}
			h.mu.Lock()
			h.replays[r.EntryID] = r.JobID
			h.mu.Unlock()
		}
	}
}
