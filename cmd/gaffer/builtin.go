package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/webhook"
)

// devLoopback is what `gaffer dev` opens to http jobs on top of
// --webhook-allow, so that a receiver on the developer's machine works.
var devLoopback = []string{"127.0.0.0/8", "::1"}

// outbound is what the operator says about the calls http jobs make:
// what --webhook-allow opens and what --own-hosts adds to the node itself.
type outbound struct {
	allow, ownHosts []string
}

// newWebhooks builds the "http" kind's handler (signed with each tenant's
// secrets once SetSecrets is called), calling only what the outbound
// guard lets through — out.allow opened, and the node's own endpoints
// (dbURL's hosts, and own: its API listener and etcd endpoints) refused
// even when public, with their ports on every address of this host and
// of out.ownHosts. ctx bounds resolving their names.
func newWebhooks(ctx context.Context, out outbound, log hclog.Logger, dbURL string, own ...string) (*webhook.Handler, error) {
	db, err := store.Endpoints(dbURL)
	if err != nil {
		return nil, err
	}
	own = append(db, own...)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return webhook.New(ctx, webhook.Config{Allow: out.allow, OwnEndpoints: own, OwnHosts: out.ownHosts, Logger: log})
}

// registerBuiltinKinds registers the kinds every gaffer node handles
// without Go code: "http" (a webhook call, by hooks) and "noop".
func registerBuiltinKinds(node *gaffer.Node, hooks *webhook.Handler) {
	node.HandleFunc("noop", func(ctx context.Context, j *job.Job) error { return nil })
	hooks.Register(node.Registry())
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
