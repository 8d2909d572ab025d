// Package job owns the life of a job: enqueueing it, claiming it under a
// lease, running its handler, and recording the outcome of each attempt.
//
// It holds the Request and the Client that enqueues and manages jobs;
// the Registry of handlers; the Worker, whose claim loops, heartbeats and
// completer run a node's attempts; limits and tenant weights; the Fence
// that leader-only writes go through; and Metrics, the job series, which
// the packages beside it count in too. Two neighbours build on it and
// are not part of it: remote workers, which claim and finish jobs over
// HTTP under the same fenced leases (package remote), and the services
// that keep the tables and gauges in order — the lease rescuer, the
// retention cleaner, the queue monitor, the label refresher
// (internal/maintenance).
//
// # States
//
//	           enqueue
//	              │
//	              ▼        snooze, or release at a drain deadline
//	          pending ◄──────────────────────────────┐  (neither uses up an attempt)
//	              │                                   │
//	              │ claim: attempt+1, new lease token, │
//	              │ lease = database now() + TTL       │
//	              ▼                                   │
//	          running ────────────────────────────────┘
//	          │  │  │
//	          │  │  └──► retrying ── claim once run_at passes ──► running
//	          │  │       a failed attempt with attempts left (run_at = now() + backoff),
//	          │  │       or a lost one: lease expired or node dead (rescue, run_at = now())
//	          │  ▼
//	          │ failed ──► its DLQ entry, written by the same statement
//	          │ attempts exhausted, a permanent error, or the last attempt lost
//	          ▼
//	      completed
//
//	cancelled: from pending or retrying at once; from running when the
//	handler, its context cancelled, returns (or its lost lease is rescued).
//
// A pending or retrying job whose run_at is still ahead waits in the
// scheduled index (jobs.due false); the first claim of its queue after
// run_at makes it due and takes it (store/schema/claim.sql).
//
// # Claims
//
// Each queue a Worker serves has a claim loop (producer.go): it claims
// up to its free slots, at most ClaimBatch at once, when woken by an
// insert's notification, a finished job or its poll, through one
// statement (store.Claim), keeping its place among the queue's units in
// a store.ClaimCursor. While that loop claims, an insert of a due job of
// a unit its last claim did not serve asks for a side claim of that unit
// alone (side_claim.go), made at once beside the claim in flight; the
// claims of the queue leave such fresh jobs (under 25 ms) to it, unless
// a notification since their last claim asked for no side claim (the
// loop was idle), for then none would come.
//
// Every write made for a running attempt — complete, fail, snooze, cancel,
// heartbeat, release — is a compare-and-set on (id, attempt, lease_token,
// state = 'running'). A worker that was paused, partitioned or too slow
// finds its lease gone: its write changes nothing, is counted in
// gaffer_job_stale_rejected_total, and a refused heartbeat cancels its
// handler's context with cause ErrLeaseLost.
//
// # Timing
//
// All due times and leases are compared with PostgreSQL's now(), never a
// node's clock. With LeaseTTL L (default 30s), heartbeat every L/3 for
// running attempts, and the lease rescuer (internal/maintenance)
// sweeping every R (default 5s):
//
//	a live attempt's lease never has less than 2L/3 left after a heartbeat;
//	a dead node's jobs run again after at most L + R (the cluster rescues
//	them sooner when it sees the node's etcd session end).
//
// Cancellation of a running job reaches its handler through NOTIFY at
// once, or through the worker's periodic check within CheckInterval
// (default 1s).
//
// # Tracing
//
// Enqueue stores the W3C trace context of the span in its ctx with the
// job (ParseTraceContext reads a caller's headers into one). With a
// WorkerConfig.TracerProvider, each attempt is a root span linked to that
// context, started at launch and ended once the attempt's outcome is
// written (by the completer, for a completion), with the outcome as an
// attribute. Without one, no span is made.
//
// # What this package must never do
//
// It never writes a job's row outside the store's compare-and-set
// statements, never compares a lease with the local clock, and never
// holds a database transaction open while a handler runs. It never
// installs a global tracer provider. Deleting expired rows is not its
// work (internal/maintenance does it, for every package's tables), and
// it never imports remote or internal/maintenance: they import it.
package job
