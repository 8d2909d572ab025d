package chaos

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/internal/testnode"
)

// rerunSlack is what the re-run bound allows beyond the lease TTL and the
// rescue interval: the claim by another node, and a loaded 2-core box.
const rerunSlack = 5 * time.Second

// killDuringEtcdOutage takes etcd away from every node — all members
// stopped, or (half the time) every node's etcd proxies blackholed —,
// waits until no node can prove it leads, SIGKILLs the node running the
// most jobs, and waits for each of those jobs to run again (or finish)
// elsewhere: within lease TTL + rescue interval + rerunSlack of the kill,
// with etcd still down, since the lease rescuer needs no leader. Only
// then does etcd come back. A job not re-run by then is a violation; the
// time it took is reported.
func (h *harness) killDuringEtcdOutage() {
	ctx := context.Background()
	stop := h.rng.IntN(2) == 0
	if stop {
		for _, m := range h.etcd.Members {
			m.Stop()
		}
	} else {
		for _, s := range h.nodes {
			for _, p := range s.etcd {
				p.Set(faultproxy.Blackhole)
			}
		}
	}
	outage := time.Now()
	var victim *slot
	defer func() {
		if stop {
			h.restartEtcd()
		} else {
			for _, s := range h.nodes {
				for _, p := range s.etcd {
					p.Set(faultproxy.Pass)
				}
			}
		}
		h.logf("etcd back after %s", time.Since(outage).Round(time.Millisecond))
		if victim != nil {
			h.startNode(victim)
		}
	}()
	// Past the session TTL every leader has stepped down and no node can
	// campaign: only the lease rescuer can re-run a dead node's jobs.
	time.Sleep(h.o.TTL + time.Second)
	most := -1
	for _, s := range h.nodes {
		var n int
		h.pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1`, s.id).Scan(&n)
		if !s.down && n > most {
			victim, most = s, n
		}
	}
	killed := time.Now()
	victim.child.Signal(syscall.SIGKILL)
	<-victim.child.Exited
	victim.down = true
	// Every job still running on the dead node is one it held.
	var ids []int64
	var attempts []int32
	if err := h.pool.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(attempt), '{}')
		FROM gaffer.jobs WHERE state = 'running' AND node = $1`, victim.id).Scan(&ids, &attempts); err != nil {
		h.t.Fatalf("jobs of the killed node: %v", err)
	}
	how := "every member stopped"
	if !stop {
		how = "every node's etcd proxies blackholed"
	}
	h.logf("etcd down (%s); SIGKILL %s holding %d running jobs", how, victim.id, len(ids))
	bound := h.o.Lease + testnode.RescueInterval + rerunSlack
	left := len(ids)
	for left > 0 && time.Since(killed) < bound {
		time.Sleep(50 * time.Millisecond)
		// Run again: a later attempt claimed, or finished (a cancel
		// requested, a last attempt dead-lettered).
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs j JOIN unnest($1::bigint[], $2::int[]) AS h(id, attempt) ON h.id = j.id
			WHERE j.attempt = h.attempt AND j.state NOT IN ('completed', 'failed', 'cancelled')`, ids, attempts).Scan(&left); err != nil {
			left = len(ids)
		}
	}
	took := time.Since(killed)
	if left > 0 {
		var rows string
		// With what could keep each one waiting: its unit's due jobs
		// ahead of it, and the jobs of its limit key running.
		h.pool.QueryRow(ctx, `SELECT string_agg(format('%s %s attempt %s on %s, lease until %s (tenant %s kind %s fairness key %s limit key %s, due %s ago; %s due jobs of its unit ahead, %s of its limit key running)',
				j.id, j.state, j.attempt, j.node, to_char(j.lease_expires_at, 'HH24:MI:SS.MS'), j.tenant, j.kind, j.fairness_key,
				coalesce(j.limit_key, '-'), (now() - j.run_at)::text,
				(SELECT count(*) FROM gaffer.jobs a WHERE a.queue = j.queue AND a.tenant = j.tenant AND a.fairness_key = j.fairness_key
					AND a.state IN ('pending', 'retrying') AND a.run_at <= now() AND (a.priority, a.run_at, a.id) < (j.priority, j.run_at, j.id)),
				(SELECT count(*) FROM gaffer.jobs r WHERE r.state = 'running' AND r.tenant = j.tenant AND r.limit_key IS NOT DISTINCT FROM j.limit_key)),
				', ' ORDER BY j.id)
			FROM gaffer.jobs j JOIN unnest($1::bigint[], $2::int[]) AS h(id, attempt) ON h.id = j.id
			WHERE j.attempt = h.attempt AND j.state NOT IN ('completed', 'failed', 'cancelled')`, ids, attempts).Scan(&rows)
		h.violation("%d of the %d jobs %s held when SIGKILLed with etcd down did not run again within %s (lease %s + rescue %s + %s), before etcd returned: %s",
			left, len(ids), victim.id, bound, h.o.Lease, testnode.RescueInterval, rerunSlack, rows)
		return
	}
	if len(ids) > 0 {
		h.logf("%s's %d jobs ran again %s after the kill, etcd still down", victim.id, len(ids), took.Round(time.Millisecond))
		h.mu.Lock()
		h.reruns = append(h.reruns, took.Seconds())
		h.mu.Unlock()
	}
}

// restartEtcd starts every stopped member again, at once: a member alone
// cannot become ready without a quorum.
func (h *harness) restartEtcd() {
	var wg sync.WaitGroup
	errs := make([]error, len(h.etcd.Members))
	for i, m := range h.etcd.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Restart()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			h.t.Fatalf("restart etcd: %v", err)
		}
	}
}
