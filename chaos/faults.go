package chaos

import (
	"context"
	"syscall"
	"time"

	"github.com/gafferhq/gaffer/internal/faultproxy"
)

// Fault kinds.
const (
	FaultKill          = "kill"           // SIGKILL a node; restart it a few seconds later
	FaultPause         = "pause"          // SIGSTOP a node (the leader half the time) past its session TTL, then SIGCONT
	FaultPauseWorker   = "pause-worker"   // SIGSTOP a node that is not the leader, past the job lease
	FaultPGBlackhole   = "pg-blackhole"   // a node's PostgreSQL connections hang
	FaultPGReset       = "pg-reset"       // a node's PostgreSQL connections are reset
	FaultPGLatency     = "pg-latency"     // a node's PostgreSQL traffic is delayed
	FaultEtcdBlackhole = "etcd-blackhole" // a node is cut off from every etcd member
	FaultPGRestart     = "pg-restart"     // PostgreSQL restarts immediately (a crash)
	FaultEtcdStop      = "etcd-stop"      // an etcd member (the leader half the time) stops, then returns
	FaultDrain         = "drain"          // a node is drained under load, leaves, and is started again
	// FaultSigterm stops a node with SIGTERM, its PostgreSQL traffic
	// slowed and the signal sent as a claim it made has committed and its
	// answer is still on the way (aim); waits for it to drain and exit,
	// checks that it left no job running, and starts it again.
	FaultSigterm = "sigterm"
	// FaultKillInEtcdOutage takes etcd away from every node (all members
	// stopped, or every node's etcd proxies blackholed), SIGKILLs a node
	// that runs jobs, and requires its jobs to run again before etcd
	// returns: no leader is needed to rescue an expired lease.
	FaultKillInEtcdOutage = "kill-during-etcd-outage"
	// FaultPGFailover kills the PostgreSQL primary (Patroni and all);
	// Patroni promotes the synchronous standby. Long profile only.
	FaultPGFailover = "pg-failover"
)

// AllFaults is every fault kind the harness can inject.
var AllFaults = []string{FaultKill, FaultPause, FaultPGBlackhole, FaultPGReset, FaultPGLatency, FaultEtcdBlackhole, FaultPGRestart,
	FaultEtcdStop, FaultDrain, FaultSigterm, FaultKillInEtcdOutage}

// pick returns a random live node; leader biases the choice to (true) or
// away from (false) the leader, or neither (nil).
func (h *harness) pick(leader *bool) *slot {
	f, _ := h.admin.Fence(context.Background())
	var live, preferred []*slot
	for _, s := range h.nodes {
		if s.down {
			continue
		}
		live = append(live, s)
		if leader != nil && (s.id == f.Leader) == *leader {
			preferred = append(preferred, s)
		}
	}
	if len(preferred) > 0 {
		return preferred[h.rng.IntN(len(preferred))]
	}
	if len(live) == 0 {
		return nil
	}
	return live[h.rng.IntN(len(live))]
}

func (h *harness) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.rng.Int64N(int64(hi-lo)+1))
}

func (h *harness) inject(kind string) {
	ctx := context.Background()
	h.mu.Lock()
	h.faults[kind]++
	h.mu.Unlock()
	yes, no := true, false
	switch kind {
	case FaultKill:
		s := h.pick(nil)
		var killedAt time.Time
		h.pool.QueryRow(ctx, `SELECT now()`).Scan(&killedAt)
		s.child.Signal(syscall.SIGKILL)
		<-s.child.Exited
		s.down = true
		h.logf("kill %s", s.id)
		go h.measureRecovery(s.id, killedAt)
		time.Sleep(h.between(2*time.Second, 4*time.Second))
		h.startNode(s)
	case FaultPause, FaultPauseWorker:
		target := &yes
		if kind == FaultPauseWorker || h.rng.IntN(2) == 0 {
			target = &no
		}
		s := h.pick(target)
		d := 2*h.o.TTL + h.between(0, 2*time.Second)
		if kind == FaultPauseWorker {
			d = h.o.Lease + h.between(2*time.Second, 4*time.Second)
		}
		s.child.Signal(syscall.SIGSTOP)
		h.logf("pause %s for %s", s.id, d.Round(time.Millisecond))
		time.Sleep(d)
		s.child.Signal(syscall.SIGCONT)
	case FaultPGBlackhole:
		s := h.pick(nil)
		d := h.between(2*time.Second, 6*time.Second)
		h.logf("blackhole %s → postgres for %s", s.id, d.Round(time.Millisecond))
		s.pg.Set(faultproxy.Blackhole)
		time.Sleep(d)
		s.pg.Set(faultproxy.Pass)
	case FaultPGReset:
		s := h.pick(nil)
		h.logf("reset %s's postgres connections", s.id)
		s.pg.Set(faultproxy.Reset)
		time.Sleep(500 * time.Millisecond)
		s.pg.Set(faultproxy.Pass)
	case FaultPGLatency:
		s := h.pick(nil)
		lat := h.between(20*time.Millisecond, 150*time.Millisecond)
		h.logf("add %s latency %s → postgres", lat, s.id)
		s.pg.SetLatency(lat)
		time.Sleep(h.between(3*time.Second, 6*time.Second))
		s.pg.SetLatency(0)
	case FaultEtcdBlackhole:
		s := h.pick(nil)
		d := h.between(3*time.Second, 6*time.Second)
		h.logf("cut %s off from etcd for %s", s.id, d.Round(time.Millisecond))
		for _, p := range s.etcd {
			p.Set(faultproxy.Blackhole)
		}
		time.Sleep(d)
		for _, p := range s.etcd {
			p.Set(faultproxy.Pass)
		}
	case FaultPGRestart:
		h.logf("restart postgres (immediate)")
		if h.db != nil {
			h.db.crashPrimary(h)
			return
		}
		if err := h.pg.Restart(ctx); err != nil {
			h.t.Fatalf("restart postgres: %v", err)
		}
	case FaultPGFailover:
		h.db.failover(h)
	case FaultEtcdStop:
		i := h.etcd.Leader()
		if i < 0 || h.rng.IntN(2) == 0 {
			i = h.rng.IntN(len(h.etcd.Members))
		}
		d := h.between(3*time.Second, 6*time.Second)
		h.logf("stop etcd member %d (leader %d) for %s", i, h.etcd.Leader(), d.Round(time.Millisecond))
		h.etcd.Members[i].Stop()
		time.Sleep(d)
		if err := h.etcd.Members[i].Restart(); err != nil {
			h.t.Fatalf("restart etcd member: %v", err)
		}
	case FaultSigterm:
		h.sigterm()
	case FaultKillInEtcdOutage:
		h.killDuringEtcdOutage()
	case FaultDrain:
		s := h.pick(&no)
		if err := h.admin.Drain(ctx, s.id, 5*time.Second); err != nil {
			h.logf("drain %s refused: %v", s.id, err)
			return
		}
		// The order binds the claims that begin after it committed: from
		// is read after Drain returned (its now() is past the commit). A
		// claim that began between the order's own clock reading and its
		// commit could not see it, and is not counted.
		var from time.Time
		h.pool.QueryRow(ctx, `SELECT now()`).Scan(&from)
		h.logf("drain %s", s.id)
		select {
		case <-s.child.Left:
		case <-time.After(30 * time.Second):
			h.t.Fatalf("%s did not leave after its drain", s.id)
		}
		<-s.child.Exited
		var to time.Time
		h.pool.QueryRow(ctx, `SELECT now()`).Scan(&to)
		h.mu.Lock()
		h.drains = append(h.drains, window{node: s.id, from: from, to: to})
		h.mu.Unlock()
		s.down = true
		time.Sleep(time.Second)
		h.startNode(s)
	default:
		h.t.Fatalf("unknown fault %q", kind)
	}
}

// measureRecovery waits until none of the jobs a killed node was running
// is still running there, and records how long that took.
func (h *harness) measureRecovery(node string, killedAt time.Time) {
	ctx := context.Background()
	start := time.Now()
	var held int
	h.pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1 AND attempted_at <= $2`, node, killedAt).Scan(&held)
	if held == 0 {
		return
	}
	for time.Since(start) < time.Minute {
		var n int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1 AND attempted_at <= $2`, node, killedAt).Scan(&n); err == nil && n == 0 {
			h.mu.Lock()
			h.recovery = append(h.recovery, time.Since(start).Seconds())
			h.mu.Unlock()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heal ends every fault: proxies pass, etcd members run, nodes are up.
func (h *harness) heal() {
	for _, s := range h.nodes {
		s.pg.Set(faultproxy.Pass)
		s.pg.SetLatency(0)
		for _, p := range s.etcd {
			p.Set(faultproxy.Pass)
		}
		if s.down {
			h.startNode(s)
		}
	}
	h.logf("healed")
}
