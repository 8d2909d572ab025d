package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/store"
)

func (m *Main) runDev(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dev", "dev [flags]\n\nStarts a local Gaffer cluster in one process: a throwaway PostgreSQL from the\nlocal server binaries (unless $DATABASE_URL is set) and --nodes nodes with demo\njob kinds. Ctrl-C stops everything; --data keeps the database between runs.")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "use this PostgreSQL instead of starting one")
	dataDir := fs.String("data", "", "", "keep PostgreSQL's data in this directory across runs")
	nodes := fs.Int("nodes", "", 1, "how many nodes to run")
	addr := fs.String("addr", "", "127.0.0.1:8080", "HTTP listen address for /metrics, /healthz, /readyz")
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
	log, err := nf.logger(m)
	if err != nil {
		return err
	}
	cfg, err := nf.config()
	if err != nil {
		return err
	}
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
		log.Info("embedded etcd started", "endpoint", etcd.Endpoint())
	}
	url := *dbURL
	if url == "" {
		dir := *dataDir
		if dir != "" {
			if dir, err = filepath.Abs(filepath.Join(dir, "postgres")); err != nil {
				return err
			}
		}
		srv, err := pgserver.Start(ctx, pgserver.Config{Dir: dir, Durable: dir != ""})
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
	reg := newRegistry()
	var running []*gaffer.Node
	defer func() {
		for _, n := range running {
			drain(n, *nf.drainTimeout)
		}
	}()
	for i := range *nodes {
		c := cfg
		c.DatabaseURL, c.ID, c.Logger = url, fmt.Sprintf("dev-%d", i+1), log
		if i == 0 {
			c.Registerer = reg
		}
		n, err := gaffer.NewNode(ctx, c)
		if err != nil {
			return err
		}
		registerBuiltinKinds(n)
		registerDemoKinds(n)
		if err := n.Start(ctx); err != nil {
			n.Stop(context.Background())
			return err
		}
		running = append(running, n)
	}
	srv, err := serveHTTP(*addr, healthMux(reg, running...), log)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(m.Stdout, "\nGaffer dev cluster is up: %d node(s).\n  database: %s\n  etcd:     %s\n  metrics:  http://%s/metrics\n\nPress Ctrl-C to stop.\n",
		len(running), url, strings.Join(cfg.EtcdEndpoints, ","), *addr)
	if *dataDir == "" && *dbURL == "" {
		fmt.Fprintln(m.Stdout, "  (the database is thrown away on exit; use --data DIR to keep it)")
	}
	<-ctx.Done()
	fmt.Fprintln(m.Stdout, "stopping…")
	_ = os.Stdout.Sync()
	return nil
}
