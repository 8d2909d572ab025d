// Package remote lets processes in any language work jobs over HTTP
// under the same fenced attempts as a node (G11). Workers registers a
// remote worker, answers its claims (a long poll, woken by the
// notifications that wake nodes), records its heartbeats, outcomes and
// progress with each attempt's lease, and runs this node's share of the
// sweep that moves remote workers along. The api package serves it as
// the /work endpoints; a node makes one (gaffer.Node.RemoteWorkers).
//
// # States
//
// A remote worker is a row of the nodes table, kind "remote", moved by
// Register and Leave and by the sweep (store: sweep_remote_workers), all
// by the database clock:
//
//	  Register
//	     │
//	     ▼        drain order (cluster.Admin.Drain), seen by a sweep
//	  active ─────────────────────────────────────────► draining
//	     │  │                                              │  │
//	     │  │ Leave: its running jobs released at once      │  │ nothing left running: drained;
//	     │  └──────────────► dead (stopped) ◄── Leave ──────┘  │ at the drain deadline its running
//	     │                                                     │ jobs are released first
//	     │ silent for SilentAfter                              ▼
//	     └──────────────► dead (lost)                    dead (drained)
//
//	dead: its claims fail with ErrWorkerGone (a drained one's answer
//	Draining); the row is deleted Keep after it left.
//
// Claims answer Draining as soon as a drain is ordered, before any sweep
// marks the row draining: a claim waiting when the order comes wakes on
// its notification and says so.
//
// # Timing
//
// With LeaseTTL L (a node's, default 30s), MaxWait W (default 30s), the
// sweep interval S (default 1s while any remote worker is live, 5S
// otherwise) and the lease rescuer's interval R (internal/maintenance,
// default 5s):
//
//	a worker heartbeats every L/3; a claim answers within its Wait ≤ W;
//	a worker that stops calling has its jobs run again at most L + R
//	after its last heartbeat, and is marked lost after SilentAfter
//	(default W + 2L) plus at most 5S;
//	the sweep acts on a drain's deadline, a finished drain and a
//	silence within 5S.
//
// A waiting claim is parked: the tenant's poller on this node looks for
// due work for all the tenant's parked claims at once, every
// PollInterval (±10%) and on each notification naming one of their
// queues, and wakes those of a queue it saw work in (parking.go); one
// claim of a worker is parked at a time, at most MaxWaitingPerTenant of
// a tenant.
//
// The sweep, a claim's wait, the pollers' polls and the cursors' age
// read the Workers' clock (the wall clock; a fake one in
// tests); leases and due times are the database's.
//
// # What this package must never do
//
// It never writes a job's row outside the store's compare-and-set
// statements on (job, attempt, lease token, running) — the very ones a
// node's worker uses — and never compares a lease with the local clock.
// It never writes for a job of another tenant than the caller's: each
// write checks the jobs are the caller's first. It never lets a claim's
// statements follow the caller's context (a claim committed after the
// caller gave up would leave jobs running for nobody; it is bounded by
// the lease TTL instead) and never keeps jobs claimed for a caller that
// went away: they are released. It owns no metric series: remote
// attempts count in job.Metrics, the node's own series, through the
// Metrics interface declared here.
package remote
