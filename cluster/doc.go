// Package cluster makes worker nodes a cluster: membership and leader
// election on etcd, with leadership fenced in PostgreSQL, dead-node
// rescue, and drain. It is the only package that imports the etcd client.
//
// # A node's states
//
//	              Start
//	                │  register in the nodes table (PostgreSQL)
//	                ▼
//	   ┌──────► no session ──── etcd grants a lease ───► member (key under the lease)
//	   │            ▲                                       │  campaign
//	   │            │ session ends: lease expired,          ▼
//	   │            │ revoked, or etcd unreachable ◄──── follower
//	   │            │ for a whole TTL                       │ Campaign returns, the session is still
//	   │            │                                       │ alive, the election key still ours,
//	   │            │                                       │ and the fence raised to our epoch
//	   │            └──────────────────────────────────── leader ── leader-only services run
//	   │                                                    │
//	   └── fenced write (a newer epoch exists): step down, resign, campaign again
//
//	active ── drain order ──► draining ── in-flight reaches 0, or the deadline
//	  ▲                          │        (then running jobs are released) ──► left
//	  └──────── undrain ─────────┘
//
// Jobs never wait on any of this: claiming and running need only
// PostgreSQL, so a node with no session keeps working; it only cannot
// lead, and leader-only work (rescue of dead nodes, retention, cron)
// pauses until etcd returns.
//
// # Fencing
//
// On winning, the leader raises gaffer.leader_fence.epoch to its term's
// epoch (UPDATE … WHERE epoch < $epoch): its election key's etcd create
// revision, with the etcd generation in the high bits (generation<<40 |
// revision). Revisions only grow within one etcd history, and a leader
// that finds etcd without its generation key (etcd lost its data and its
// revisions started over) starts the next generation, so each term's
// epoch is larger than every earlier one. Every
// leader-only write runs in a transaction that share-locks the fence row
// and rolls back unless the epoch is still its own; a raise waits for
// those transactions. A deposed leader — paused, partitioned, or slow to
// notice its lease expired — therefore cannot commit a leader-only write
// after its successor's term began. A refused write counts in
// gaffer_cluster_fence_rejections_total and makes the node step down.
//
// # Timing
//
// With session TTL T (default 10s) and keepalives every T/3:
//
//   - trust window: the leader acts only while etcd's last keepalive
//     answer is younger than T − max(T/5, 1s), so it stops acting before
//     etcd can have expired its lease;
//   - failover: a dead leader's lease expires within T of its last
//     keepalive, and the next candidate leads as soon as it has raised the
//     fence, so a new leader is in place within about T + 1s;
//   - rescue bound: a dead node's key vanishes within T; the leader sees
//     the deletion at once and releases the node's running jobs, which are
//     claimed again within milliseconds (NOTIFY): T + ε, independent of the
//     job lease. The job lease (default 30s) is the backstop when there is
//     no leader: every node, leader or not, sweeps expired leases. A
//     leader that starts finds the nodes that died while none watched
//     (a row, no key) at once — but a row younger than max(T, 5s) may be
//     a node starting (it writes its row, then registers), so that one is
//     looked at again when it is older.
//   - drain: a drain order reaches the node at once by NOTIFY (within
//     ReportInterval, default 2s, if notifications are down), and every
//     claim statement refuses to claim for a node with a drain order, so
//     claims stop at the order's commit.
//
// # Reaching etcd
//
// Config.TLS and Config.Username/Password reach an etcd that requires
// client certificates and authentication. The client is made by the
// session loop, not by New: etcd's client authenticates as it is made,
// and an etcd that is down or refuses the credentials must not keep the
// node from starting and running jobs. Such a node stays out of the
// cluster, retrying with backoff, and Status().Degraded names the reason
// (an etcd call that timed out is explained by probing the endpoints: a
// refused dial, or a TLS handshake etcd or the node rejected).
//
// # What this package must never do
//
// Let job processing depend on etcd; act as leader without a live,
// trusted session (except under the TrustFenceOnly testing aid); or write
// leader-only state outside a fenced transaction.
package cluster
