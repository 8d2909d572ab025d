// Command gaffer runs Gaffer nodes and talks to a Gaffer cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	if err := m.Run(ctx, os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(m.Stderr, "gaffer:", err)
		}
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

	// collect, when set, turns every command into a description of
	// itself: its flags land here and it returns errCollected without
	// doing anything (see commandTree).
	collect *cmdSpec
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

func commands() []command {
	return []command{
		{"server", "run a production node", (*Main).runServer},
		{"dev", "run a throwaway local cluster (Postgres, nodes) in one process", (*Main).runDev},
		{"migrate", "apply, revert or show database migrations", (*Main).runMigrate},
		{"bench", "measure throughput against a database", (*Main).runBench},
		{"jobs", "enqueue, inspect and cancel jobs", (*Main).runJobs},
		{"dlq", "list, replay and purge dead letters", (*Main).runDLQ},
		{"cron", "manage cron entries", (*Main).runCron},
		{"workflows", "submit and manage workflow runs", (*Main).runWorkflows},
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

// Run runs the subcommand named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		m.usage()
		if len(args) == 0 {
			return usageError("no command given")
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(m, ctx, args[1:])
		}
	}
	m.usage()
	return usageError(fmt.Sprintf("unknown command %q", args[0]))
}

func (m *Main) usage() {
	fmt.Fprintln(m.Stderr, "Usage: gaffer <command> [flags]\n\nCommands:")
	tw := tabwriter.NewWriter(m.Stderr, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(m.Stderr, "\nRun 'gaffer <command> --help' for a command's flags.")
}

// usageError is a mistake in how gaffer was called: exit code 2.
type usageError string

func (e usageError) Error() string { return string(e) }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}
