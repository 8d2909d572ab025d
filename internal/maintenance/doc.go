// Package maintenance holds the background services that keep a
// cluster's tables and gauges in order, each a service (Start, Stop,
// RunOnce) that a node starts and stops:
//
//   - LeaseRescuer ends the running attempts whose lease expired by the
//     database clock (every node, unfenced), and the attempts of a node
//     the cluster saw leave (the leader, fenced). With LeaseTTL L and the
//     rescuer's Interval R (default 5s), a dead node's jobs run again
//     after at most L + R.
//   - RetentionCleaner deletes what is past its retention, in the tables
//     of every package: finished jobs, DLQ entries, finished workflow
//     runs, idempotency keys, cron history, dead nodes' rows, revoked
//     tokens, expired dashboard sessions and webhook secrets (leader-only,
//     fenced).
//   - QueueMonitor refreshes the cluster-wide queue and limit gauges and
//     records the dashboard's throughput sample (leader-only, fenced).
//   - LabelRefresher tells the job metrics which kinds and queues may be
//     label values (every node).
//
// It sits beside the domain packages, not under them: it imports job
// (and the store), never the reverse, which is why the cleaner that
// deletes rows of job, dlq, workflow, cron, cluster, auth and webhook
// lives here rather than in any of them.
//
// # What this package must never do
//
// It never writes a row outside the store's statements: the rescuer's
// writes are the store's compare-and-set on expired leases, and every
// leader-only write goes through the Fence it is given, so that a deposed
// leader changes nothing. It never deletes a row before its retention,
// nor an unfinished job at any age. It owns no metric series: the job
// package's Metrics does, reached through the small interfaces declared
// here (RescueMetrics, QueueGauges, LabelSetter), so metric names and
// labels stay where dashboards expect them. It never needs a leader to
// rescue expired leases: with etcd down it is the only thing that runs a
// dead node's jobs again.
package maintenance
