package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/webhook"
)

func (m *Main) runDev(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dev", "dev [flags]\n\nStarts a local Gaffer cluster in one process: a throwaway PostgreSQL from the\nlocal server binaries (unless $DATABASE_URL is set) and --nodes nodes with demo\njob kinds. Ctrl-C stops everything; --data keeps the database between runs.")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "use this PostgreSQL instead of starting one")
	dataDir := fs.String("data", "", "", "keep PostgreSQL's data in this directory across runs")
	nodes := fs.Int("nodes", "", 1, "how many nodes to run")
	addr := fs.String("addr", "", "127.0.0.1:8080", "HTTP listen address: the API (/v1), the dashboard (/ui), /metrics, /healthz, /readyz")
	// Not $GAFFER_TOKEN: that is the client commands' API token, often
	// still exported from the last dev run.
	devToken := fs.String("token", "GAFFER_DEV_TOKEN", "", "the dev API token to create (at least 16 characters; default: a random one)")
	nf := addNodeFlags(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("dev takes no arguments, got %q", fs.Args()))
	}
	if *nodes < 1 || *nodes > 16 {
		return usageError(fmt.Sprintf("--nodes must be between 1 and 16, got %d", *nodes))
	}
	if *dbURL != "" && *dataDir != "" {
		return usageError("--data and --database-url do not mix: --data is for the PostgreSQL that dev starts")
	}
	if t := *devToken; t != "" && (len(t) < 16 || strings.TrimSpace(t) != t) {
		return usageError(fmt.Sprintf("--token must be at least 16 characters with no surrounding spaces, got %d", len(t)))
	}
	log, err := nf.logger(m)
	if err != nil {
		return err
	}
	// The address first: a busy port is said before etcd and PostgreSQL
	// start and the migrations run, not after.
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	// `gaffer dev 2>&1 | tee log` and Ctrl-C: tee is gone before dev's
	// last lines, and a write to the broken pipe must fail, not kill dev
	// before it removes its throwaway database.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// A second Ctrl-C stops the nodes at once (force).
	force, forceNow := context.WithCancel(context.WithoutCancel(ctx))
	defer forceNow()
	cfg, err := nf.config()
	if err != nil {
		return err
	}
	out, err := nf.outbound()
	if err != nil {
		return err
	}
	tp, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg.TracerProvider = tp.TracerProvider
	ownEtcd := cfg.EtcdEndpoints
	if len(cfg.EtcdEndpoints) == 0 {
		etcdDir := ""
		if *dataDir != "" {
			etcdDir = filepath.Join(*dataDir, "etcd")
		}
		etcd, err := etcdserver.Start(etcdDir)
		if err != nil {
			return err
		}
		defer etcd.Close()
		cfg.EtcdEndpoints = []string{etcd.Endpoint()}
		ownEtcd = []string{etcd.Endpoint(), etcd.PeerEndpoint()}
		log.Info("embedded etcd started", "endpoint", etcd.Endpoint())
	}
	url := *dbURL
	if url == "" {
		pc := pgserver.Config{Durable: *dataDir != ""}
		if *dataDir != "" {
			// --data holds etcd's data beside PostgreSQL's: when PostgreSQL
			// runs as the postgres user (dev runs as root), that user may
			// pass through it, no more.
			if pc.Parent, err = filepath.Abs(*dataDir); err != nil {
				return err
			}
			pc.Dir = filepath.Join(pc.Parent, "postgres")
		}
		srv, err := pgserver.Start(ctx, pc)
		if errors.Is(err, pgserver.ErrNoBinaries) {
			return err
		}
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer srv.Stop()
		url = srv.URL()
		log.Info("postgres started", "url", url, "data", srv.Dir())
	}
	st, err := store.Open(ctx, url, 2)
	if err != nil {
		return err
	}
	applied, err := st.MigrateUp(ctx)
	st.Close()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}
	// Loopback is open in dev so a receiver on this machine works; the
	// cluster's own API, PostgreSQL and etcd ports stay refused.
	out.allow = append(slices.Clone(devLoopback), out.allow...)
	hooks, err := newWebhooks(ctx, out, log, url, append(append([]string{ln.Addr().String()}, ownEtcd...), tracingEndpoints(tp)...)...)
	if err != nil {
		return err
	}
	reg := newRegistry()
	var running []*gaffer.Node
	var secrets *webhook.Secrets
	// The nodes drain at once, side by side. On a throwaway database
	// (deleted next) running jobs are given back at once instead of
	// waited for.
	stopWithin := *nf.drainTimeout
	if *dataDir == "" && *dbURL == "" {
		stopWithin = 0
	}
	defer func() { stopNodes(force, running, stopWithin) }()
	for i := range *nodes {
		c := cfg
		c.DatabaseURL, c.ID, c.Logger = url, fmt.Sprintf("dev-%d", i+1), log
		c.Registerer = nodeRegisterer(reg, c.ID, *nodes)
		n, err := gaffer.NewNode(ctx, c)
		if err != nil {
			return err
		}
		if i == 0 {
			secrets = webhook.NewSecrets(n.Pool())
			hooks.SetSecrets(secrets)
		}
		registerBuiltinKinds(n, hooks)
		registerDemoKinds(n)
		if err := n.Start(ctx); err != nil {
			n.Stop(context.Background())
			return err
		}
		running = append(running, n)
	}
	h, tokens, err := httpHandler(reg, nf, log, hooks, secrets, running...)
	if err != nil {
		return err
	}
	token, err := devAPIToken(ctx, tokens, *devToken, *dataDir)
	if err != nil {
		return err
	}
	srv, err := serveHTTP(ln, h, nf, log)
	if err != nil {
		return err
	}
	scheme := "http"
	if *nf.tlsCert != "" {
		scheme = "https"
	}
	base := scheme + "://" + *addr
	fmt.Fprintf(m.Stdout, "\nGaffer dev cluster is up: %d node(s).\n  dashboard: %s/ui/  (sign in with the token)\n  API:       %s/v1  (OpenAPI: %s/v1/openapi.json)\n  token:     %s\n  database:  %s\n  etcd:      %s\n  metrics:   %s/metrics\n  outbound:  http jobs may call loopback (%s) — dev only; this cluster's own API, PostgreSQL and etcd ports stay refused\n\nTry:\n  export GAFFER_URL=%s GAFFER_TOKEN=%s\n  gaffer jobs enqueue --kind demo.echo --args '{\"hello\":\"world\"}'\n\nPress Ctrl-C to stop.\n",
		len(running), base, base, base, token, url, strings.Join(cfg.EtcdEndpoints, ","), base, strings.Join(devLoopback, ", "), base, token)
	if *dataDir == "" && *dbURL == "" {
		fmt.Fprintln(m.Stdout, "  (the database is thrown away on exit; use --data DIR to keep it)")
	}
	<-ctx.Done()
	// (Not stopped here: the nodes stop in a deferred call, after this
	// function's other deferred calls, and a second Ctrl-C must reach
	// them then.)
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-again:
			fmt.Fprintln(m.Stdout, "stopping at once: running jobs are given back")
			forceNow()
		case <-force.Done():
		}
	}()
	if stopWithin > 0 {
		fmt.Fprintf(m.Stdout, "stopping… (running jobs get up to %s to finish; Ctrl-C again to stop at once)\n", stopWithin)
	} else {
		fmt.Fprintln(m.Stdout, "stopping…")
	}
	_ = os.Stdout.Sync()
	// The nodes claim nothing new; requests in flight finish; then the
	// deferred drains stop the nodes, etcd and PostgreSQL.
	for _, n := range running {
		n.Worker().SetClaiming(false)
		n.RemoteWorkers().EndWaits()
	}
	shutdownHTTP(srv, *nf.shutdownTimeout, log)
	return nil
}

// stopNodes stops the nodes side by side, each draining for up to within
// (0: giving running jobs back at once) or until force ends.
func stopNodes(force context.Context, nodes []*gaffer.Node, within time.Duration) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(force, within)
			defer cancel()
			n.Stop(ctx)
		}()
	}
	wg.Wait()
}

// devAPIToken creates the dev token: an admin token spanning tenants. A
// token given with --token that a kept database (--data) already holds is
// used as is. Without --token, a kept database's dev token is kept in
// DIR/dev-token (owner-only) and used again on the next run while the
// database still accepts it, rather than a new admin token minted each
// run and never revoked.
func devAPIToken(ctx context.Context, tokens *auth.Tokens, text, dataDir string) (string, error) {
	kept := ""
	if text == "" && dataDir != "" {
		kept = filepath.Join(dataDir, "dev-token")
		if b, err := os.ReadFile(kept); err == nil {
			text = strings.TrimSpace(string(b))
		}
	}
	if text != "" {
		if _, err := tokens.Authenticate(ctx, text); err == nil {
			return text, nil
		}
		if kept != "" {
			text = "" // revoked, or another database's: a new one
		}
	}
	created, _, err := tokens.Create(ctx, auth.NewTokenRequest{Name: "gaffer dev", Tenant: auth.AllTenants, Scopes: []string{auth.ScopeAdmin}, Secret: text})
	if err != nil {
		return "", fmt.Errorf("create the dev token: %w", err)
	}
	if kept != "" {
		if err := os.WriteFile(kept, []byte(created+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("keep the dev token: %w", err)
		}
	}
	return created, nil
}
