package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/webhook"
)

// devListenerFD is the descriptor a dev node finds its HTTP listener on:
// `gaffer dev` opens every node's port before anything starts (a busy
// one is said at once) and hands each node its own.
const devListenerFD = 3

// runDevNode runs one node of `gaffer dev --nodes N` in a process of its
// own, started by dev: its own pools, its own port, demo kinds, loopback
// open to http jobs. It is `gaffer server` with what dev needs besides:
//
//   - its metrics carry a node label, so that dev's /metrics can show
//     every node's series side by side;
//   - SIGTERM drains it (for up to --drain-timeout, or at once with
//     --stop-at-once: dev's throwaway database is deleted next), and a
//     second SIGTERM stops it at once, giving running jobs back;
//   - it exits when dev does, even if dev was killed (Pdeathsig, set by
//     dev, and a watch on the parent for where that does not exist).
func (m *Main) runDevNode(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dev-node", "dev-node [flags]\n\nOne node of `gaffer dev --nodes N`, started by gaffer dev: not for direct use.")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "the dev cluster's PostgreSQL")
	nodeID := fs.String("node-id", "-", "", "this node's id")
	devAddr := fs.String("dev-addr", "-", "", "gaffer dev's own address (refused to http jobs)")
	own := fs.String("dev-own", "-", "", "the other dev nodes' and etcd's addresses (refused to http jobs), comma-separated")
	atOnce := fs.Bool("stop-at-once", "-", false, "on SIGTERM, give running jobs back at once (a throwaway database)")
	nf := addNodeFlags(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *nodeID == "" || *dbURL == "" {
		return usageError("dev-node is started by gaffer dev")
	}
	go exitWithParent(os.Getppid())
	// Its log goes through dev, which may outlive the terminal it writes
	// to: a broken pipe fails the write, it does not kill the node.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	log, err := nf.logger(m)
	if err != nil {
		return err
	}
	cfg, err := nf.config()
	if err != nil {
		return err
	}
	out, err := nf.outbound()
	if err != nil {
		return err
	}
	f := os.NewFile(devListenerFD, "dev listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("the listener gaffer dev handed over: %w", err)
	}
	defer ln.Close()
	tp, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	ownEndpoints := []string{ln.Addr().String(), *devAddr}
	for _, e := range strings.Split(*own, ",") {
		if e = strings.TrimSpace(e); e != "" {
			ownEndpoints = append(ownEndpoints, e)
		}
	}
	ownEndpoints = append(append(ownEndpoints, cfg.EtcdEndpoints...), tracingEndpoints(tp)...)
	// Loopback is open in dev so a receiver on this machine works; the
	// cluster's own API, PostgreSQL and etcd ports stay refused.
	out.allow = append(slices.Clone(devLoopback), out.allow...)
	hooks, err := newWebhooks(ctx, out, log, *dbURL, ownEndpoints...)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	nodeReg := prometheus.WrapRegistererWith(prometheus.Labels{"node": *nodeID}, reg)
	nodeReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.DatabaseURL, cfg.ID, cfg.Logger, cfg.Registerer = *dbURL, *nodeID, log, nodeReg
	cfg.TracerProvider = tp.TracerProvider
	node, err := gaffer.NewNode(ctx, cfg)
	if err != nil {
		return err
	}
	secrets := webhook.NewSecrets(node.Pool())
	hooks.SetSecrets(secrets)
	registerBuiltinKinds(node, hooks)
	registerDemoKinds(node)
	if err := node.Start(ctx); err != nil {
		node.Stop(context.Background())
		return err
	}
	h, _, err := httpHandler(reg, nodeReg, nf, log, hooks, secrets, node)
	if err != nil {
		node.Stop(context.Background())
		return err
	}
	srv, err := serveHTTP(ln, h, nf, log)
	if err != nil {
		node.Stop(context.Background())
		return err
	}
	// A drain ordered through the cluster: the requests in flight (the
	// order itself, when this node was asked) finish before the node
	// closes its pools.
	node.OnDrainedStop(func() {
		node.RemoteWorkers().EndWaits()
		shutdownHTTP(srv, *nf.shutdownTimeout, log)
	})
	select {
	case <-ctx.Done():
		// A second SIGTERM (dev's second Ctrl-C) stops the node at once.
		force, forceNow := context.WithCancel(context.Background())
		defer forceNow()
		again := make(chan os.Signal, 1)
		signal.Notify(again, syscall.SIGTERM, os.Interrupt)
		defer signal.Stop(again)
		go func() {
			select {
			case <-again:
				forceNow()
			case <-force.Done():
			}
		}()
		node.Worker().SetClaiming(false)
		node.RemoteWorkers().EndWaits()
		shutdownHTTP(srv, *nf.shutdownTimeout, log)
		within := *nf.drainTimeout
		if *atOnce {
			within = 0
		}
		log.Info("signal received; draining", "deadline", within)
		stop, cancel := context.WithTimeout(force, within)
		defer cancel()
		return node.Stop(stop)
	case <-node.Done():
		log.Info("drained through the cluster; exiting")
		node.RemoteWorkers().EndWaits()
		shutdownHTTP(srv, *nf.shutdownTimeout, log)
		return nil
	}
}

// exitWithParent ends this process once its parent, gaffer dev, is gone
// (the process was handed to another parent): where Pdeathsig does not
// exist, or was lost with the thread that set it, no dev node outlives
// dev.
func exitWithParent(parent int) {
	for {
		time.Sleep(250 * time.Millisecond)
		if os.Getppid() != parent {
			fmt.Fprintln(os.Stderr, "gaffer dev-node: gaffer dev is gone; exiting")
			os.Exit(1)
		}
	}
}
