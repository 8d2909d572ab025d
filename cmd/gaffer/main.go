// Command gaffer runs Gaffer nodes and talks to a Gaffer cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	if err := m.Run(ctx, os.Args[1:]); err != nil {
		m.printError(err)
		os.Exit(exitCode(err))
	}
}

// Main is the gaffer program, with its streams injectable for tests.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; tests replace it.
	Getenv func(string) string
	// Location is the zone times are printed in (nil: the local one;
	// --utc: UTC).
	Location *time.Location

	// collect, when set, turns every command into a description of
	// itself: its flags land here and it returns errCollected without
	// doing anything (see commandTree).
	collect *cmdSpec

	// cmd is the cobra command being run and args its positional
	// arguments: flagSet.parse reads the values cobra parsed from them.
	cmd  *cobra.Command
	args []string
	// format is -o: "json", "table", or "" when not given.
	format string
	// jsonErrors: the command prints JSON, so its error is JSON too.
	jsonErrors bool
	// pollEvery is how often --wait and --watch ask (0: pollEvery).
	pollEvery time.Duration
}

// NewMain returns a Main on the process's streams and environment.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

type command struct {
	name    string
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

// hiddenCommands are left out of help and completion: gaffer dev starts
// dev-node, people do not.
var hiddenCommands = map[string]bool{"dev-node": true}

func commands() []command {
	return []command{
		{"server", "run a production node", (*Main).runServer},
		{"dev", "run a throwaway local cluster: Postgres, etcd and nodes, each node its own process", (*Main).runDev},
		{"dev-node", "one node of gaffer dev (started by it)", (*Main).runDevNode},
		{"migrate", "apply, revert or show database migrations", (*Main).runMigrate},
		{"bench", "measure throughput against a database", (*Main).runBench},
		{"jobs", "enqueue, inspect and cancel jobs", (*Main).runJobs},
		{"dlq", "list, replay and purge dead letters", (*Main).runDLQ},
		{"sequences", "see and resume sequences (jobs run one at a time, in order)", (*Main).runSequences},
		{"cron", "manage cron entries", (*Main).runCron},
		{"workflows", "submit and manage workflow runs", (*Main).runWorkflows},
		{"batches", "open, close and watch batches of jobs with a callback", (*Main).runBatches},
		{"queues", "list, pause and resume queues", (*Main).runQueues},
		{"nodes", "list, drain and undrain nodes", (*Main).runNodes},
		{"limits", "cluster-wide concurrency and rate limits", (*Main).runLimits},
		{"tenants", "tenants' weights in fair claiming", (*Main).runTenants},
		{"cluster", "show the leader and cluster health", (*Main).runCluster},
		{"tokens", "create, list and revoke API tokens", (*Main).runTokens},
		{"webhook-secrets", "rotate, list and delete a tenant's webhook signing secrets", (*Main).runWebhookSecrets},
		{"healthcheck", "exit 0 if a node's /readyz answers (for containers)", (*Main).runHealthcheck},
		{"version", "print the version", (*Main).runVersion},
		{"completion", "print a shell completion script: bash, zsh or fish", (*Main).runCompletion},
	}
}

// Run runs the command args name. Help (--help, -h, gaffer help CMD) goes
// to Stdout; errors are returned, not printed (see printError).
func (m *Main) Run(ctx context.Context, args []string) error {
	root, err := m.rootCommand(ctx)
	if err != nil {
		return err
	}
	root.SetArgs(normalizeArgs(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && cmd != nil {
		// A flag error comes before the command reads -o: look again.
		if f := cmd.Flags().Lookup("output"); f != nil && f.Value.String() == "json" {
			m.jsonErrors = true
		}
		if f := cmd.Flags().Lookup("json"); f != nil && f.Changed && f.Value.String() == "true" {
			m.jsonErrors = true
		}
	}
	return err
}

// usageError is a mistake in how gaffer was called: exit code 2.
type usageError string

func (e usageError) Error() string { return string(e) }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// printError reports err on Stderr: "gaffer: …", or under -o json (and
// --json) one JSON object, {"error": {"message": …, "code": …}}, whose
// code is the API's problem code when the API gave one.
func (m *Main) printError(err error) {
	if !m.jsonErrors {
		fmt.Fprintln(m.Stderr, "gaffer:", err)
		return
	}
	code := "failed"
	var p *problemError
	var u usageError
	switch {
	case errors.As(err, &p):
		code = p.Code
	case errors.As(err, &u):
		code = "usage"
	}
	type errorBody struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	}
	b, _ := jsonLine(map[string]errorBody{"error": {Message: err.Error(), Code: code}})
	m.Stderr.Write(b)
}
