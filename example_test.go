package gaffer_test

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
)

type EmailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// A node that sends email, and a caller that enqueues in its own
// transaction.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	node, err := gaffer.NewNode(ctx, gaffer.Config{Pool: pool, Queues: map[string]int{"default": 20}})
	if err != nil {
		panic(err)
	}
	job.HandleArgs(node.Registry(), "email.send", func(ctx context.Context, j *job.Job, a EmailArgs) error {
		if a.To == "" {
			return job.Permanent(errors.New("no recipient")) // straight to the DLQ
		}
		return j.SetResult(map[string]string{"sent_to": a.To})
	}, job.KindOptions{Timeout: 30 * time.Second})
	if err := node.Start(ctx); err != nil {
		panic(err)
	}
	defer func() {
		drain, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		node.Stop(drain)
	}()

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)
	// ... the caller's own writes ...
	if _, err := node.Client().EnqueueTx(ctx, tx, job.Request{
		Kind: "email.send",
		Args: EmailArgs{To: "ada@example.com", Subject: "Welcome"},
	}); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil { // the job exists iff this commits
		panic(err)
	}
}

// A handler can snooze, cancel itself, or fail permanently.
func ExampleHandler() {
	handler := job.HandlerFunc(func(ctx context.Context, j *job.Job) error {
		switch {
		case j.Attempt > 3:
			return job.Cancel(errors.New("gave up after three tries"))
		case rateLimited():
			return job.Snooze(time.Minute) // not counted as a failed attempt
		}
		return nil
	})
	_ = handler
}

func rateLimited() bool { return false }
