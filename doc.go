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
//		return send(ctx, a)
//	})
//	node.Start(ctx)
//	defer node.Stop(drainCtx)
//
//	tx, _ := pool.Begin(ctx)
//	node.Client().EnqueueTx(ctx, tx, job.Request{Kind: "email.send", Args: EmailArgs{To: "a@example.com"}})
//	tx.Commit(ctx)
//
// The packages beneath hold the parts: job (life cycle, worker, client),
// dlq (dead letters), store (all SQL).
package gaffer
