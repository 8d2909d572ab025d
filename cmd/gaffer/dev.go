package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/store"
)

func (m *Main) runDev(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dev", "dev [flags]\n\nStarts a local Gaffer cluster: a throwaway PostgreSQL from the local server\nbinaries (unless $DATABASE_URL is set), an embedded etcd, and --nodes nodes with\ndemo job kinds, each node a process of its own on a port of its own (kill -9,\nkill -STOP or kill -TERM one to watch the others rescue its jobs). --addr serves\nthe API, the dashboard and /metrics of every node. Ctrl-C stops everything;\n--data keeps the database between runs.")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "use this PostgreSQL instead of starting one")
	dataDir := fs.String("data", "", "", "keep PostgreSQL's data in this directory across runs")
	nodes := fs.Int("nodes", "", 1, "how many nodes to run, each its own process")
	addr := fs.String("addr", "", "127.0.0.1:8080", "HTTP listen address: the API (/v1), the dashboard (/ui), /metrics, /healthz, /readyz; "+
		"the nodes listen on the next ports on 127.0.0.1 (or any free one)")
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
	// The nodes' log lines and dev's own go to one stderr, a line at a
	// time.
	m.Stderr = &lineWriter{w: m.Stderr}
	log, err := nf.logger(m)
	if err != nil {
		return err
	}
	cfg, err := nf.config()
	if err != nil {
		return err
	}
	if _, err := nf.outbound(); err != nil {
		return err
	}
	// The addresses first: a busy port is said before etcd and PostgreSQL
	// start and the migrations run, not after.
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	nodeLns, err := devNodeListeners(ln.Addr(), *nodes)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range nodeLns {
			l.Close()
		}
	}()
	// `gaffer dev 2>&1 | tee log` and Ctrl-C: tee is gone before dev's
	// last lines, and a write to the broken pipe must fail, not kill dev
	// before it removes its throwaway database.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	ownEtcd := cfg.EtcdEndpoints
	var nodeEnv []string
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
		nodeEnv = append(nodeEnv, fs.env["etcd"]+"="+etcd.Endpoint())
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
	if err != nil {
		st.Close()
		return fmt.Errorf("migrate: %w", err)
	}
	if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}
	defer st.Close()
	token, err := devAPIToken(ctx, auth.NewTokens(st.Pool()), *devToken, *dataDir)
	if err != nil {
		return err
	}
	// The nodes: each a process of its own, a child of this one.
	// On a throwaway database (deleted next) a stopping node gives its
	// running jobs back at once instead of waiting for them.
	throwaway := *dataDir == "" && *dbURL == ""
	// The nodes trust this process's X-Forwarded-For and -Proto (it
	// proxies to them from loopback, having read the client's address
	// through --trusted-proxies), and no one else's.
	nodeEnv = append(nodeEnv, "DATABASE_URL="+url, fs.env["trusted-proxies"]+"=127.0.0.1,::1")
	cl := &devCluster{log: log, stderr: m.Stderr}
	// However dev ends, its nodes end first: stopped when it returns
	// (an error, Ctrl-C), killed with it (Pdeathsig) when it is killed.
	defer cl.stopAll(stopBound(nf, throwaway))
	addrs := make([]string, len(nodeLns))
	for i, l := range nodeLns {
		addrs[i] = l.Addr().String()
	}
	for i, l := range nodeLns {
		own := append(slices.Clone(ownEtcd), slices.Delete(slices.Clone(addrs), i, i+1)...)
		nodeArgs := []string{"dev-node", "--node-id", fmt.Sprintf("dev-%d", i+1), "--dev-addr", ln.Addr().String(), "--dev-own", strings.Join(own, ",")}
		if throwaway {
			nodeArgs = append(nodeArgs, "--stop-at-once")
		}
		if err := cl.start(nodeArgs, devNodeEnv(fs, nodeEnv), l); err != nil {
			return err
		}
	}
	if err := cl.waitReady(ctx, 2*time.Minute, st); err != nil || ctx.Err() != nil {
		return err
	}
	hs, err := nf.httpSettings()
	if err != nil {
		return err
	}
	proxy := newDevProxy(cl, *nf.metricsToken, hs.proxies)
	h, err := proxy.handler(*nf.metricsToken)
	if err != nil {
		return err
	}
	srv, err := serveHTTP(ln, h, nf, log)
	if err != nil {
		return err
	}
	go proxy.watch(ctx)
	scheme := "http"
	if *nf.tlsCert != "" {
		scheme = "https"
	}
	base := scheme + "://" + *addr
	fmt.Fprintf(m.Stdout, "\nGaffer dev cluster is up: %d node(s), each a process of its own.\n  dashboard: %s/ui/  (sign in with the token)\n  API:       %s/v1  (OpenAPI: %s/v1/openapi.json)\n  token:     %s\n  database:  %s\n  etcd:      %s\n  metrics:   %s/metrics  (every node's, labelled node=\"dev-N\")\n  outbound:  http jobs may call loopback (%s) — dev only; this cluster's own API, PostgreSQL and etcd ports stay refused\n",
		len(cl.nodes), base, base, base, token, url, strings.Join(cfg.EtcdEndpoints, ","), base, strings.Join(devLoopback, ", "))
	fmt.Fprintf(m.Stdout, "\nNodes (%s proxies to the first one that answers):\n", *addr)
	for _, n := range cl.nodes {
		fmt.Fprintf(m.Stdout, "  %-6s pid %-8d http://%s\n", n.name, n.pid, n.addr)
	}
	fmt.Fprintf(m.Stdout, "Kill or pause one and watch the others rescue its jobs (when its etcd session expires: --session-ttl, %s):\n"+
		"  kill -9 PID       kill it\n"+
		"  kill -STOP PID    pause it; kill -CONT PID resumes it, and its stale attempts are refused\n"+
		"  kill -TERM PID    drain it (or: gaffer nodes drain dev-N)\n", *nf.sessionTTL)
	fmt.Fprintf(m.Stdout, "\nTry:\n  export GAFFER_URL=%s GAFFER_TOKEN=%s\n  gaffer jobs enqueue --kind demo.echo --args '{\"hello\":\"world\"}'\n\nPress Ctrl-C to stop.\n", base, token)
	if throwaway {
		fmt.Fprintln(m.Stdout, "  (the database is thrown away on exit; use --data DIR to keep it)")
	}
	// Until Ctrl-C, say which node ended and how; the others run on.
	for ctx.Err() == nil {
		select {
		case n := <-cl.exited:
			fmt.Fprintf(m.Stdout, "node %s (pid %d) %s; %s\n", n.name, n.pid, n.ending(), cl.stillRunning())
		case <-ctx.Done():
		}
	}
	// A second Ctrl-C stops the nodes at once, giving running jobs back.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-again:
			fmt.Fprintln(m.Stdout, "stopping at once: running jobs are given back")
			cl.stop(true)
		case <-stopped:
		}
	}()
	if !throwaway {
		fmt.Fprintf(m.Stdout, "stopping… (running jobs get up to %s to finish; Ctrl-C again to stop at once)\n", *nf.drainTimeout)
	} else {
		fmt.Fprintln(m.Stdout, "stopping…")
	}
	_ = os.Stdout.Sync()
	// The nodes claim nothing new and drain; requests in flight finish;
	// the nodes are waited for (a second Ctrl-C still reaches them), then
	// etcd and PostgreSQL stop (deferred).
	cl.stop(false)
	shutdownHTTP(srv, *nf.shutdownTimeout, log)
	cl.stopAll(stopBound(nf, throwaway))
	return nil
}

// stopBound is how long a dev node gets to stop on SIGTERM before it is
// killed: its HTTP server's shutdown, its drain, and some slack.
func stopBound(nf *nodeFlags, throwaway bool) time.Duration {
	d := *nf.shutdownTimeout + 10*time.Second
	if !throwaway {
		d += *nf.drainTimeout
	}
	return d
}

// devOnlyFlags are dev's flags that are not the nodes': they are not
// handed on to the nodes (TLS is dev's listener's alone: the nodes serve
// plain HTTP on loopback, behind it).
var devOnlyFlags = map[string]bool{"database-url": true, "data": true, "nodes": true, "addr": true, "token": true, "tls-cert": true, "tls-key": true}

// devNodeEnv is a dev node's environment: this process's, with the node
// flags dev was given (on the command line or in the environment) as
// their variables — not on the node's command line, which ps shows —
// less dev's own flags' variables, then extra.
func devNodeEnv(fs *flagSet, extra []string) []string {
	drop := map[string]bool{}
	for name := range devOnlyFlags {
		if v := fs.env[name]; v != "" {
			drop[v] = true
		}
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return drop[k]
	})
	fs.Visit(func(f *flag.Flag) {
		if v := fs.env[f.Name]; v != "" && !devOnlyFlags[f.Name] {
			env = append(env, v+"="+f.Value.String())
		}
	})
	return append(env, extra...)
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
