package gaffer_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/webhook"
	"github.com/gafferhq/gaffer/workflow"
)

// The examples here hold, line for line, every Go snippet in README.md
// and docs/ (TestDocSnippetsAreCompiled checks it), so a snippet that
// stops compiling fails the build. They are compiled, not run.

func send(ctx context.Context, to string) error              { return nil }
func buildReport(ctx context.Context, args []byte) error     { return nil }
func alreadyDone(id string) bool                             { return false }
func process(body []byte)                                    {}
func handleSnippetErr(err error)                             {}
func docsPool(ctx context.Context, url string) *pgxpool.Pool { p, _ := pgxpool.New(ctx, url); return p }

// docs/shaping.md, "Uniqueness windows".
func Example_uniqueWindow() {
	ctx := context.Background()
	node, _ := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: os.Getenv("DATABASE_URL")})
	type ReportArgs struct{ Customer int }
	res, err := node.Client().Enqueue(ctx, job.Request{
		Kind:         "report.build",
		Args:         ReportArgs{Customer: 42},
		UniqueKey:    "report-42",
		UniqueFor:    time.Hour,
		UniqueStates: []job.State{job.Pending, job.Running, job.Retrying, job.Completed},
	})
	if err == nil && res.Existing {
		log.Printf("report already asked for: job %d", res.Job.ID)
	}
}

// docs/shaping.md, "Debounce".
func Example_debounce() {
	ctx := context.Background()
	node, _ := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: os.Getenv("DATABASE_URL")})
	type IndexArgs struct{ Doc int }
	res, err := node.Client().Enqueue(ctx, job.Request{
		Kind:     "doc.index",
		Args:     IndexArgs{Doc: 7},
		Debounce: &job.Debounce{Key: "doc-7", Window: 30 * time.Second, MaxWait: 5 * time.Minute},
	})
	if err == nil && res.Debounced {
		log.Printf("folded into job %d", res.Job.ID)
	}
}

// docs/shaping.md, "Sequences".
func Example_sequence() {
	ctx := context.Background()
	node, _ := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: os.Getenv("DATABASE_URL")})
	type EventArgs struct {
		Account int    `json:"account"`
		Type    string `json:"type"`
	}
	// every event of account 42 runs alone, in the order it was enqueued;
	// a failed one stops the account's events until it is replayed
	res, err := node.Client().Enqueue(ctx, job.Request{
		Kind:     "account.event",
		Args:     EventArgs{Account: 42, Type: "deposit"},
		Sequence: &job.Sequence{KeyArgs: []string{"account"}},
	})
	if err == nil && res.Job.State == job.Held {
		log.Printf("job %d waits its turn in %s", res.Job.ID, res.Job.Sequence)
	}
}

// docs/shaping.md, "Tags and search".
func Example_tags() {
	ctx := context.Background()
	node, _ := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: os.Getenv("DATABASE_URL")})
	type ReportArgs struct {
		Customer int
		Region   string
	}
	handleSnippetErr(func() error {
		c := node.Client()
		_, err := c.Enqueue(ctx, job.Request{
			Kind: "report.build",
			Args: ReportArgs{Customer: 42, Region: "eu"},
			Tags: []string{"billing", "env:prod"},
		})
		if err != nil {
			return err
		}
		customer, err := job.ArgsMatch("customer", "42")
		if err != nil {
			return err
		}
		f := job.Filter{Tenant: "default", Tags: []string{"billing", "env:prod"}, Args: []json.RawMessage{customer}}
		for {
			page, err := c.Search(ctx, f)
			if err != nil {
				return err
			}
			for _, j := range page.Jobs {
				log.Printf("job %d %s %v", j.ID, j.State, j.Tags)
			}
			if !page.More {
				break
			}
			f.BeforeID = page.Next
		}
		return nil
	}())
}

// docs/shaping.md, "Batches with a callback".
func importFile(ctx context.Context, node *gaffer.Node, reg *job.Registry, lines []string) error {
	type ImportArgs struct{ File string }
	type RowArgs struct{ Row int }
	c := node.Client()
	b, err := c.OpenBatch(ctx, job.BatchRequest{Kind: "import.done", Args: ImportArgs{File: "orders.csv"}})
	if err != nil {
		return err
	}
	rows := make([]job.Request, 0, len(lines))
	for i := range lines {
		rows = append(rows, job.Request{Kind: "import.row", Args: RowArgs{Row: i}, Batch: b.ID})
	}
	if _, err := c.EnqueueMany(ctx, rows); err != nil {
		return err
	}
	if _, err := c.CloseBatch(ctx, b.Tenant, b.ID); err != nil {
		return err
	}

	// the callback's handler gets the summary
	job.HandleArgs(reg, "import.done", func(ctx context.Context, j *job.Job, s job.BatchSummary) error {
		log.Printf("batch %d: %d completed, %d failed", s.Batch, s.Completed, s.Failed)
		return nil
	})
	return nil
}

var _ = importFile

// README.md, "Using it from Go".
func Example_readme() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	pool := docsPool(ctx, url)
	drainCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	node, _ := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: url, Queues: map[string]int{"default": 20}})
	job.HandleArgs(node.Registry(), "email.send", func(ctx context.Context, j *job.Job, a EmailArgs) error {
		return send(ctx, a.To)
	})
	node.Start(ctx)
	defer node.Stop(drainCtx) // stops claiming, waits until drainCtx ends, releases the rest

	tx, _ := pool.Begin(ctx)
	node.Client().EnqueueTx(ctx, tx, job.Request{Kind: "email.send", Args: EmailArgs{To: "ada@example.com"}})
	tx.Commit(ctx) // the job exists iff this commits
}

// docs/library.md, from the top.
func Example_library() {
	ctx := context.Background()
	pool := docsPool(ctx, os.Getenv("DATABASE_URL"))
	setUp := func() error {
		if _, err := gaffer.Migrate(ctx, pool); err != nil { // safe to run from every process at once
			return err
		}
		return nil
	}
	handleSnippetErr(setUp())

	node, err := gaffer.NewNode(ctx, gaffer.Config{
		DatabaseURL: "postgres://…", // or Pool: yourPgxPool
		Queues:      map[string]int{"default": 20, "mail": 5},
	})
	handleSnippetErr(err)

	node.HandleFunc("report.build", func(ctx context.Context, j *job.Job) error {
		return buildReport(ctx, j.Args)
	})

	type EmailArgs struct{ To string }
	job.HandleArgs(node.Registry(), "email.send",
		func(ctx context.Context, j *job.Job, a EmailArgs) error { return send(ctx, a.To) },
		job.KindOptions{
			Backoff: job.ExponentialBackoff{Base: 5 * time.Second, Max: 10 * time.Minute},
			Timeout: time.Minute, // for jobs enqueued without their own
		})

	res, err := node.Client().Enqueue(ctx, job.Request{
		Kind:        "email.send",
		Args:        EmailArgs{To: "ada@example.com"}, // any JSON-encodable value
		Queue:       "mail",                           // default "default"
		Priority:    0,                                // 0 runs first … 9 last
		Delay:       time.Minute,                      // or RunAt: t (not both)
		MaxAttempts: 5,                                // default 25, at most 1000
		Timeout:     30 * time.Second,
		UniqueKey:   "welcome-ada", // while an unfinished job holds it, returns that job
		Tenant:      "default",
	})
	// res.Job is the job; res.Existing says the unique key was held.
	_, _ = res, err
}

// docs/workflows.md.
func Example_workflows() {
	ctx := context.Background()
	node, _ := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: os.Getenv("DATABASE_URL")})
	type ExtractArgs struct{ Day string }
	day := time.Now().Format(time.DateOnly)

	def, err := workflow.New("nightly-etl").
		Job("extract", "etl.extract", ExtractArgs{Day: day}).
		Job("clean-a", "etl.clean", nil, workflow.After("extract")).
		Job("clean-b", "etl.clean", nil, workflow.After("extract"), workflow.AllowFailure()).
		WaitSignal("approve", 24*time.Hour, workflow.After("clean-a", "clean-b")).
		Sleep("cool-off", 10*time.Minute, workflow.After("approve")).
		Job("load", "etl.load", nil, workflow.After("cool-off"), workflow.Queue("db"), workflow.MaxAttempts(5)).
		Definition()
	run, err := node.Workflows().Submit(ctx, def)
	_, _ = run, err
}

// docs/cron.md.
func Example_cron() {
	ctx := context.Background()
	node, _ := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: os.Getenv("DATABASE_URL")})
	var entry cron.Entry

	crons := node.Cron()
	crons.Create(ctx, cron.Entry{
		Name:     "nightly-report",
		Schedule: "30 2 * * *",       // 02:30 every day
		Timezone: "America/New_York", // default UTC
		Job:      cron.JobTemplate{Kind: "report.build", Queue: "reports", Args: []byte(`{"full":true}`)},
		Missed:   cron.MissedOnce,  // skip (default) | once | all
		Overlap:  cron.OverlapSkip, // allow (default) | skip
	})
	crons.NextTimes(ctx, "", "nightly-report", 5) // preview
	// and crons.Pause, Resume, Trigger, Update, Delete, History
	crons.Put(ctx, entry, cron.PutOptions{KeepPaused: true}) // create or replace, idempotent
}

// docs/operations.md, draining from Go.
func Example_drain() {
	ctx := context.Background()
	pool := docsPool(ctx, os.Getenv("DATABASE_URL"))

	cluster.NewAdmin(pool).Drain(ctx, "node-2", 2*time.Minute) // Undrain(ctx, id) takes it back
}

// docs/security.md, verifying a delivery.
func Example_verifyWebhook() {
	verifier := webhook.Verifier{Secrets: []string{os.Getenv("GAFFER_WEBHOOK_SECRET")}} // old and new during a rotation
	http.HandleFunc("/hooks/gaffer", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body", http.StatusBadRequest)
			return
		}
		id, err := verifier.Verify(r.Header, body) // signature, and timestamp within 5 minutes
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized) // 4xx: the job fails for good
			return
		}
		if alreadyDone(id) { // webhook-id is the same on every retry
			return
		}
		process(body)
	})
}
