package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// sequenceResult is what the sequences mode saw: how many sequences, and
// the proof — jobs that started while another of their sequence ran, and
// jobs that started out of their sequence's order (both must be 0).
type sequenceResult struct {
	Sequences   int   `json:"sequences"`
	PerSequence int   `json:"jobs_per_sequence"`
	Overlaps    int64 `json:"overlaps"`
	OutOfOrder  int64 `json:"out_of_order"`
}

// benchSequences enqueues o.PerSequence jobs into each of o.Sequences
// sequences (in rounds: every sequence's first job, then every second
// one…, in --batch batches), then times one node working them off. The
// handler checks each start against its sequence: none of its jobs in an
// attempt, and every job before it done. A violation fails the run.
func benchSequences(ctx context.Context, st *store.Store, o Options, r *Result) error {
	total := o.Sequences * o.PerSequence
	running := make([]atomic.Int32, o.Sequences)
	next := make([]atomic.Int32, o.Sequences)
	seq := &sequenceResult{Sequences: o.Sequences, PerSequence: o.PerSequence}
	var overlaps, disorder atomic.Int64
	type args struct {
		S int `json:"s"`
		N int `json:"n"`
	}
	handle := func(n *gaffer.Node) {
		n.HandleFunc("bench.seq", func(ctx context.Context, j *job.Job) error {
			var a args
			if err := json.Unmarshal(j.Args, &a); err != nil || a.S < 0 || a.S >= len(running) {
				return job.Permanent(fmt.Errorf("bad args %s", j.Args))
			}
			if !running[a.S].CompareAndSwap(0, 1) {
				overlaps.Add(1)
			}
			if int(next[a.S].Load()) != a.N {
				disorder.Add(1)
			}
			next[a.S].Store(int32(a.N + 1))
			running[a.S].Store(0)
			return nil
		})
	}
	client := job.NewClient(st.Pool(), nil)
	cpu := startCPU()
	start := time.Now()
	reqs := make([]job.Request, 0, o.Batch)
	flush := func() error {
		if len(reqs) == 0 {
			return nil
		}
		_, err := client.EnqueueMany(ctx, reqs)
		reqs = reqs[:0]
		return err
	}
	for n := range o.PerSequence {
		for s := range o.Sequences {
			b, _ := json.Marshal(args{S: s, N: n})
			reqs = append(reqs, job.Request{Kind: "bench.seq", Queue: Queue, Args: json.RawMessage(b),
				Sequence: &job.Sequence{Key: fmt.Sprintf("seq-%d", s)}})
			if len(reqs) == o.Batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	r.EnqueuePerSec = float64(total) / time.Since(start).Seconds()
	cpu.stop(r)

	reg := prometheus.NewRegistry()
	node, err := benchNode(ctx, o.URL, o, reg, handle)
	if err != nil {
		return err
	}
	cpu = startCPU()
	start = time.Now()
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	if err := waitCompleted(ctx, reg, float64(total)); err != nil {
		return err
	}
	r.Jobs = total
	r.Seconds = time.Since(start).Seconds()
	r.JobsPerSec = float64(total) / r.Seconds
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	cpu.stop(r)
	seq.Overlaps, seq.OutOfOrder = overlaps.Load(), disorder.Load()
	for s := range next {
		if int(next[s].Load()) != o.PerSequence {
			seq.OutOfOrder++
		}
	}
	r.Sequences = seq
	if seq.Overlaps != 0 || seq.OutOfOrder != 0 {
		return fmt.Errorf("sequences broken: %d jobs started beside another of their sequence, %d out of order", seq.Overlaps, seq.OutOfOrder)
	}
	return nil
}

func printSequences(w io.Writer, r Result) {
	s := r.Sequences
	fmt.Fprintf(w, "enqueue: %d jobs into %d sequences at %.0f jobs/s\n", r.Jobs, s.Sequences, r.EnqueuePerSec)
	fmt.Fprintf(w, "work: %d jobs (%d sequences x %d) in %.2fs = %.0f jobs/s (concurrency %d, claim batch %d)\n",
		r.Jobs, s.Sequences, s.PerSequence, r.Seconds, r.JobsPerSec, r.Concurrency, r.ClaimBatch)
	fmt.Fprintf(w, "proof: %d starts beside another job of their sequence, %d out of order\n", s.Overlaps, s.OutOfOrder)
}
