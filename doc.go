// Package gaffer is a distributed job system on PostgreSQL: durable jobs
// with fenced leases, retries and a dead-letter queue, run by a cluster of
// Go worker nodes.
//
// A Go program embeds a Node to run handlers, and enqueues through the
// node's Client — inside its own transaction if it likes, so that the job
// exists if and only if the transaction commits:
//
//	node, err := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: url, Queues: map[string]int{"default": 20}})
//	job.HandleArgs(node.Registry(), "email.send", func(ctx context.Context, j *job.Job, a EmailArgs) error {
//		return send(ctx, a.To)
//	})
//	node.Start(ctx)
//	defer node.Stop(drainCtx)
//
//	tx, _ := pool.Begin(ctx)
//	node.Client().EnqueueTx(ctx, tx, job.Request{Kind: "email.send", Args: EmailArgs{To: "a@example.com"}})
//	tx.Commit(ctx)
//
// Before a node starts, Migrate (or `gaffer migrate up`) brings the
// database's schema up to date.
//
// The packages beneath hold the parts, each usable on its own with a
// *pgxpool.Pool:
//
//   - job: requests, handlers, the worker that claims and runs jobs, the
//     client that enqueues and manages them, limits and tenant weights.
//   - remote: remote workers, processes in any language that claim and
//     finish jobs over HTTP under the same fenced leases as a node.
//   - dlq: the dead-letter queue — list, replay, purge.
//   - workflow: DAG runs of jobs, sleeps and signals.
//   - cron: schedules, time zones, the leader's scheduler.
//   - cluster: etcd membership, leader election and the fence that keeps
//     a deposed leader's writes out, drain.
//   - webhook: the built-in "http" job kind, its outbound guard and its
//     Standard Webhooks signatures.
//   - auth: API tokens, scopes and principals, dashboard sessions.
//   - api: the HTTP API; ui: the dashboard.
//   - store: all SQL — the schema's one current text (store/schema, the
//     claim among it), its migrations and queries — the claim every
//     claimer makes, and the LISTEN connection.
//
// Under internal/ sit what users never import: maintenance (the lease
// rescuer, the retention cleaner, the queue monitor and the label
// refresher, the services a node runs to keep tables and gauges in
// order), egress (the outbound address policy), redact (secrets out of
// errors and logs), service (background loop plumbing), clock (the
// loops' time, fake in tests), tzdata (the zone rules compiled into the
// binary, the only zone loader), knobs (testing aids), workclient (the
// Go client of the remote worker protocol, for tests and benchmarks),
// and the test harnesses pgserver, pgtest, etcdserver, patroni,
// pgbouncer, faultproxy and testnode, with runas (their servers as the
// postgres user under root) and localport.
// chaos is the chaos suite; cmd/gaffer is the command-line tool.
package gaffer
