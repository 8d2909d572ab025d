package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// stopGrace is how long a SIGTERMed node may take to exit: the node
// process's drain deadline (10 s, internal/testnode) and the release and
// flush after it.
const stopGrace = 30 * time.Second

// sigterm stops a node the way an orchestrator does, under load and with
// its PostgreSQL traffic slowed, the signal timed (aim) to land while a
// claim the server has committed is on its way back to the node (a claim
// committed while the node stops must be given back, not left running on
// a node that is gone). Once the node has exited it must hold no job:
// every job it had claimed either finished or was released. Its later
// checks (checkSigterms) look for attempts it held that were lost all the
// same.
func (h *harness) sigterm() {
	ctx := context.Background()
	s := h.pick(nil)
	w := stopWindow{node: s.id}
	if err := h.pool.QueryRow(ctx, `SELECT now()`).Scan(&w.from); err != nil {
		h.logf("SIGTERM %s skipped: %v", s.id, err)
		return
	}
	lat := h.between(50*time.Millisecond, 200*time.Millisecond)
	s.pg.SetLatency(lat)
	time.Sleep(h.between(500*time.Millisecond, 1500*time.Millisecond))
	claimed, waited := h.aim(s)
	// What the node holds as the signal lands, in one snapshot: its
	// attempts with a live lease (the aimed claim's among them), and the
	// claims it made since from that are already visible, so that the
	// check can tell the claims committed after the signal from them. An
	// attempt whose lease ran out before the signal (its heartbeats held
	// up by the latency: the suite's lease is 3 s) was not lost by the
	// stop, and is not counted.
	if err := h.pool.QueryRow(ctx, `SELECT now(),
			coalesce((SELECT array_agg(id) FROM gaffer.jobs WHERE state = 'running' AND node = $1 AND lease_expires_at > now()), '{}'),
			coalesce((SELECT array_agg(attempt) FROM gaffer.jobs WHERE state = 'running' AND node = $1 AND lease_expires_at > now()), '{}'),
			coalesce((SELECT array_agg(job_id) FROM test_claims WHERE node = $1 AND at >= $2), '{}'),
			coalesce((SELECT array_agg(attempt) FROM test_claims WHERE node = $1 AND at >= $2), '{}')`,
		s.id, w.from).Scan(&w.signal, &w.ids, &w.attempts, &w.seenIDs, &w.seenAttempts); err != nil {
		h.logf("snapshot of %s at its SIGTERM: %v", s.id, err)
	}
	s.child.Signal(syscall.SIGTERM)
	if claimed > 0 {
		h.mu.Lock()
		h.aimed++
		h.mu.Unlock()
		h.logf("SIGTERM %s (postgres latency %s) as a claim of %d jobs it made committed, its answer still on the way (waited %s)",
			s.id, lat.Round(time.Millisecond), claimed, waited.Round(time.Millisecond))
	} else {
		h.logf("SIGTERM %s (postgres latency %s; no claim of its committed within %s)", s.id, lat.Round(time.Millisecond), aimWait)
	}
	select {
	case <-s.child.Exited:
	case <-time.After(stopGrace):
		h.violation("%s did not exit within %s of its SIGTERM", s.id, stopGrace)
		s.child.Signal(syscall.SIGKILL)
		<-s.child.Exited
	}
	s.pg.SetLatency(0)
	s.down = true
	h.pool.QueryRow(ctx, `SELECT now()`).Scan(&w.to)
	if code := s.child.Cmd.ProcessState.ExitCode(); code != 0 {
		h.violation("%s exited %d after SIGTERM (its stop failed)", s.id, code)
	}
	var held int
	var jobs string
	h.pool.QueryRow(ctx, `SELECT count(*), coalesce(string_agg(format('%s (attempt %s of %s, lease until %s)', id, attempt, max_attempts,
			to_char(lease_expires_at, 'HH24:MI:SS.MS')), ', ' ORDER BY id), '') FROM gaffer.jobs WHERE state = 'running' AND node = $1`,
		s.id).Scan(&held, &jobs)
	if held > 0 {
		h.violation("%s exited after SIGTERM still holding %d running jobs: %s", s.id, held, jobs)
	}
	h.mu.Lock()
	h.sigterms = append(h.sigterms, w)
	h.mu.Unlock()
	time.Sleep(time.Second)
	h.startNode(s)
}

// aimWait bounds how long sigterm waits for the node to commit a claim.
const aimWait = 5 * time.Second

// aimBurst is the burst of jobs aim enqueues: more than the other two
// nodes' 16 slots, each long enough (aimBurstMS) that they cannot work
// through it before the slowed node's claim arrives.
const (
	aimBurst   = 32
	aimBurstMS = 1500
)

// aim times a SIGTERM to land on a claim in flight. Claims of a node
// whose PostgreSQL traffic is slowed mostly come back empty (the other
// nodes take new jobs first), and one that took jobs is in flight for a
// moment only: by chance, a signal rarely meets it (the first runs gave
// back no claim at all). So aim enqueues a burst the other nodes cannot
// take alone, then polls, on the harness's own unslowed connection, for
// a claim by s that took jobs and committed; its answer is then still in
// the proxy, one latency from s, and the SIGTERM sent now lands before
// it: the stopping node must give those jobs back. It returns how many
// jobs that claim took and how long it waited; 0 if no claim committed
// within aimWait (the signal is sent anyway).
func (h *harness) aim(s *slot) (int, time.Duration) {
	ctx := context.Background()
	var since time.Time
	if err := h.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&since); err != nil {
		return 0, 0
	}
	reqs := make([]job.Request, aimBurst)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "chaos.work", Args: json.RawMessage(fmt.Sprintf(`{"ms": %d}`, aimBurstMS)), MaxAttempts: 100}
	}
	if ids, err := job.NewClient(h.pool, nil).EnqueueMany(ctx, reqs); err == nil {
		h.mu.Lock()
		h.accepted = append(h.accepted, ids...)
		h.mu.Unlock()
	}
	start := time.Now()
	for time.Since(start) < aimWait {
		// A claim's rows all carry its transaction's start time, which is
		// after since for a claim sent after it.
		var n int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM test_claims WHERE node = $1 AND at >= $2
			AND at = (SELECT min(at) FROM test_claims WHERE node = $1 AND at >= $2)`, s.id, since).Scan(&n); err == nil && n > 0 {
			return n, time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, aimWait
}

// stopWindow is one SIGTERM: the node; the times, by the database clock,
// from just before its claims were slowed down (from), of the snapshot
// taken as the signal was sent (signal), and of its exit (to); the
// attempts it held with a live lease at the signal (ids, attempts); and
// the claims it had made since from that the snapshot saw (seen*).
type stopWindow struct {
	node                   string
	from, signal, to       time.Time
	ids, seenIDs           []int64
	attempts, seenAttempts []int32
}

// checkSigterms requires that no attempt a SIGTERMed node held — with a
// live lease when the signal was sent, or claimed in a claim committed
// after it, before the node exited — was ended as lost (its lease left to
// expire: an attempt burnt, a last attempt dead-lettered unrun).
// Finishing or releasing it (which keeps the attempt) is what a clean
// stop does; the count of jobs given back because their claim was in
// flight is reported.
func (h *harness) checkSigterms(ctx context.Context, r *Report, v func(string, ...any)) {
	h.mu.Lock()
	windows := append([]stopWindow(nil), h.sigterms...)
	h.mu.Unlock()
	for _, w := range windows {
		var n int
		var example string
		if err := h.pool.QueryRow(ctx, `
			WITH held AS (
				SELECT * FROM unnest($4::bigint[], $5::int[]) AS h(job_id, attempt)
				UNION
				(SELECT job_id, attempt FROM test_claims WHERE node = $1 AND at >= $2 AND at <= $3
				 EXCEPT
				 SELECT * FROM unnest($6::bigint[], $7::int[])))
			SELECT count(*), coalesce(min(format('job %s attempt %s lost at %s (%s), job now %s', j.id, e->>'attempt', e->>'at', e->>'error', j.state)), '')
			FROM held JOIN gaffer.jobs j ON j.id = held.job_id, jsonb_array_elements(j.errors) e
			WHERE e->>'kind' = 'lost' AND e->>'node' = $1 AND (e->>'attempt')::int = held.attempt`,
			w.node, w.from, w.to, w.ids, w.attempts, w.seenIDs, w.seenAttempts).Scan(&n, &example); err != nil {
			h.t.Fatalf("lost attempts of a stopped node: %v", err)
		}
		if n > 0 {
			v("%d attempts %s held at its SIGTERM (%s) or claimed before it exited (%s) were lost, not finished or released (e.g. %s)",
				n, w.node, w.signal.Format("15:04:05.000"), w.to.Format("15:04:05.000"), example)
		}
	}
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs j, jsonb_array_elements(j.errors) e
		WHERE e->>'kind' = 'released' AND e->>'error' LIKE '%stopped while claiming'`).Scan(&r.ClaimsReleased); err != nil {
		h.t.Fatalf("released claims: %v", err)
	}
}
