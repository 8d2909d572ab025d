package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/webhook"
)

// registerBuiltinKinds registers the kinds every gaffer node handles
// without Go code: "http" (a webhook call) and "noop".
func registerBuiltinKinds(node *gaffer.Node, webhookSecret string) {
	node.HandleFunc("noop", func(ctx context.Context, j *job.Job) error { return nil })
	webhook.Register(node.Registry(), webhook.Config{Secret: webhookSecret})
}

// registerDemoKinds registers the demo kinds `gaffer dev` offers, so that
// a fresh cluster has something to run.
func registerDemoKinds(node *gaffer.Node) {
	type sleepArgs struct {
		MS int `json:"ms"`
	}
	job.HandleArgs(node.Registry(), "demo.sleep", func(ctx context.Context, j *job.Job, a sleepArgs) error {
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	node.HandleFunc("demo.echo", func(ctx context.Context, j *job.Job) error {
		return j.SetResult(json.RawMessage(j.Args))
	})
	type flakyArgs struct {
		FailTimes int `json:"fail_times"`
	}
	job.HandleArgs(node.Registry(), "demo.flaky", func(ctx context.Context, j *job.Job, a flakyArgs) error {
		if j.Attempt <= a.FailTimes {
			return fmt.Errorf("demo failure on attempt %d of %d planned", j.Attempt, a.FailTimes)
		}
		return nil
	}, job.KindOptions{Backoff: job.ExponentialBackoff{Base: 500 * time.Millisecond, Max: 10 * time.Second}})
	node.HandleFunc("demo.fail", func(ctx context.Context, j *job.Job) error {
		return job.Permanent(fmt.Errorf("demo.fail always fails"))
	})
}
