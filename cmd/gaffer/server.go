package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/egress"
	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/internal/redact"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/ui"
	"github.com/gafferhq/gaffer/webhook"
)

// nodeFlags are the flags shared by `server` and `dev` that shape a node.
type nodeFlags struct {
	webhookAllow  *string
	ownHosts      *string
	rateLimit     *int
	maxResponse   *int
	tlsCert       *string
	tlsKey        *string
	etcd          *string
	sessionTTL    *time.Duration
	prefix        *string
	queues        *string
	leaseTTL      *time.Duration
	pollInterval  *time.Duration
	remoteWait    *time.Duration
	remoteWaiting *int
	drainTimeout  *time.Duration
	jobRetention  *time.Duration
	dlqRetention  *time.Duration
	idemRetention *time.Duration
	runRetention  *time.Duration
	nodeRetention *time.Duration
	cronRetention *time.Duration
	tokRetention  *time.Duration
	vacuumAt      *int
	cronEntries   *int
	cronInterval  *time.Duration
	cronPerMinute *int
	cronFireRate  *int
	logLevel      *string
	logJSON       *bool
	metricsToken  *string
	allowUnknown  *bool
	*httpFlags
	*etcdFlags
}

func addNodeFlags(fs *flagSet) *nodeFlags {
	return &nodeFlags{
		webhookAllow: fs.String("webhook-allow", "", "", "destinations http jobs may call that are refused by default (loopback, private, link-local, this node's API, PostgreSQL and etcd): "+
			"comma-separated CIDRs, addresses, host names and host:port; only an exact host:port opens one of the node's own endpoints"),
		ownHosts: fs.String("own-hosts", "", "", "addresses and host names of this cluster that its interfaces do not show (a NAT's or load balancer's public address), comma-separated: "+
			"http jobs are refused the API, PostgreSQL and etcd ports there, as on every address of this host; host:port adds one more own endpoint (a forwarded port)"),
		rateLimit: fs.Int("rate-limit", "", 200, "API requests per second allowed per token (burst: twice that)"),
		maxResponse: fs.Int("max-response-bytes", "", api.DefaultMaxResponseBytes, "the byte budget of one API list page or remote claim: a page ends before the item that would pass it (with a next_cursor), "+
			"a claim returns no more jobs than fit; also bounds the rows a list holds in memory"),
		tlsCert:      fs.String("tls-cert", "", "", "serve HTTPS with this certificate (PEM); needs --tls-key"),
		tlsKey:       fs.String("tls-key", "", "", "the certificate's private key (PEM)"),
		etcd:         fs.String("etcd", "", "", "etcd endpoints, comma-separated; without them the node runs alone: no leader election, and cron and the other leader-only services run on it unfenced"),
		sessionTTL:   fs.Duration("session-ttl", "", 10*time.Second, "etcd session TTL: how soon a dead node is noticed and a new leader elected"),
		prefix:       fs.String("cluster-prefix", "", "/gaffer", "etcd key prefix; clusters sharing an etcd need different prefixes"),
		queues:       fs.String("queues", "", "default=10", "queues to work and how many jobs of each to run at once: name=N,…"),
		leaseTTL:     fs.Duration("lease-ttl", "", 30*time.Second, "how long a claimed job stays owned without a heartbeat"),
		pollInterval: fs.Duration("poll-interval", "", time.Second, "fallback poll for due jobs (inserts wake nodes at once)"),
		remoteWait: fs.Duration("remote-max-wait", "", 30*time.Second, "the longest a remote worker's claim may wait for work (keep it below any proxy's idle timeout); "+
			"a remote worker silent for this plus two lease TTLs is marked lost"),
		remoteWaiting: fs.Int("remote-max-waiting", "", 256, "the most claims of one tenant's remote workers that may wait for work on this node at once "+
			"(one per worker; past it a claim that finds nothing answers 429 too_many_waiting_claims)"),
		drainTimeout:  fs.Duration("drain-timeout", "", 30*time.Second, "on SIGTERM, how long running jobs get to finish before they are released"),
		jobRetention:  fs.Duration("job-retention", "", 24*time.Hour, "how long finished jobs are kept"),
		dlqRetention:  fs.Duration("dlq-retention", "", 14*24*time.Hour, "how long DLQ entries are kept"),
		idemRetention: fs.Duration("idempotency-retention", "", 24*time.Hour, "how long an API Idempotency-Key replays its first response"),
		runRetention:  fs.Duration("workflow-retention", "", 7*24*time.Hour, "how long finished workflow runs are kept (failed ones also while a step's DLQ entry waits)"),
		nodeRetention: fs.Duration("dead-node-retention", "", 7*24*time.Hour, "how long a node that left or died stays in the nodes list"),
		cronRetention: fs.Duration("cron-history-retention", "", 7*24*time.Hour, "how long cron occurrence history is kept"),
		tokRetention:  fs.Duration("revoked-token-retention", "", 30*24*time.Hour, "how long a revoked API token stays listed"),
		vacuumAt: fs.Int("vacuum-threshold", "", maintenance.DefaultVacuumThreshold, "the dead row versions gaffer.jobs gathers before the leader vacuums it itself "+
			"rather than wait for autovacuum (needs the node's role to own the table); 0: leave it to autovacuum"),
		cronEntries:  fs.Int("cron-max-entries", "", cron.DefaultMaxEntries, "cron entries a tenant's tokens may hold per tenant (tokens spanning tenants are not held to the cron quotas)"),
		cronInterval: fs.Duration("cron-min-interval", "", cron.DefaultMinInterval, "the shortest gap between two fires a tenant's token may give an entry's schedule"),
		cronPerMinute: fs.Int("cron-max-fires-per-minute", "", cron.DefaultMaxFiresPerMinute,
			"the most a tenant's entries may fire per minute, all together, each counted at its fastest; checked when a tenant's token creates an entry or changes a schedule"),
		cronFireRate: fs.Int("cron-fire-rate", "", cron.DefaultTenantFireRate, "jobs per second the leader's cron makes per tenant, whoever made the entries (burst: twice that); a tenant past it waits, others do not"),
		logLevel:     fs.String("log-level", "", "info", "trace, debug, info, warn or error"),
		logJSON:      fs.Bool("log-json", "", false, "log JSON lines instead of text"),
		metricsToken: fs.String("metrics-token", "", "", "when set, /metrics answers only requests with Authorization: Bearer <this token>"),
		allowUnknown: fs.Bool("allow-unknown-kinds", "", false, "accept API enqueues of kinds no node handles and no remote worker of the tenant works "+
			"(refused by default with 400 unknown_kind; a request may still ask with allow_unknown_kind)"),
		httpFlags: addHTTPFlags(fs),
		etcdFlags: addEtcdFlags(fs),
	}
}

func (f *nodeFlags) logger(m *Main) (hclog.Logger, error) {
	level := hclog.LevelFromString(*f.logLevel)
	if level == hclog.NoLevel {
		return nil, usageError(fmt.Sprintf("--log-level: unknown level %q: use trace, debug, info, warn or error", *f.logLevel))
	}
	// Log lines quote URLs (database, etcd, failed calls): no passwords
	// or query values in the logs.
	return hclog.New(&hclog.LoggerOptions{Name: "gaffer", Level: level, JSONFormat: *f.logJSON, Output: redact.Writer(m.Stderr)}), nil
}

// outbound reads --webhook-allow and --own-hosts.
func (f *nodeFlags) outbound() (outbound, error) {
	allow, err := egress.SplitAllow(*f.webhookAllow)
	if err != nil {
		return outbound{}, usageError("--webhook-allow: " + err.Error())
	}
	hosts, err := egress.SplitOwnHosts(*f.ownHosts)
	if err != nil {
		return outbound{}, usageError("--own-hosts: " + err.Error())
	}
	return outbound{allow: allow, ownHosts: hosts}, nil
}

// cronQuota is the cron quota of tenants' tokens (checked by config).
func (f *nodeFlags) cronQuota() cron.Quota {
	return cron.Quota{MaxEntries: *f.cronEntries, MinInterval: *f.cronInterval, MaxFiresPerMinute: float64(*f.cronPerMinute)}
}

func (f *nodeFlags) config() (gaffer.Config, error) {
	queues, err := parseQueues(*f.queues)
	if err != nil {
		return gaffer.Config{}, usageError("--queues: " + err.Error())
	}
	for name, d := range map[string]time.Duration{"lease-ttl": *f.leaseTTL, "poll-interval": *f.pollInterval, "remote-max-wait": *f.remoteWait,
		"drain-timeout": *f.drainTimeout, "job-retention": *f.jobRetention, "dlq-retention": *f.dlqRetention,
		"idempotency-retention": *f.idemRetention, "workflow-retention": *f.runRetention, "dead-node-retention": *f.nodeRetention,
		"cron-history-retention": *f.cronRetention, "revoked-token-retention": *f.tokRetention} {
		if d <= 0 {
			return gaffer.Config{}, usageError(fmt.Sprintf("--%s must be positive, got %s", name, d))
		}
	}
	if (*f.tlsCert == "") != (*f.tlsKey == "") {
		return gaffer.Config{}, usageError("--tls-cert and --tls-key go together")
	}
	if *f.maxResponse < api.MinMaxResponseBytes {
		return gaffer.Config{}, usageError(fmt.Sprintf("--max-response-bytes must be at least %d, got %d", api.MinMaxResponseBytes, *f.maxResponse))
	}
	if *f.rateLimit < 1 {
		return gaffer.Config{}, usageError(fmt.Sprintf("--rate-limit must be at least 1, got %d", *f.rateLimit))
	}
	for name, v := range map[string]int{"cron-max-entries": *f.cronEntries, "cron-max-fires-per-minute": *f.cronPerMinute, "cron-fire-rate": *f.cronFireRate} {
		if v < 1 {
			return gaffer.Config{}, usageError(fmt.Sprintf("--%s must be at least 1, got %d", name, v))
		}
	}
	if *f.cronInterval < time.Second {
		return gaffer.Config{}, usageError(fmt.Sprintf("--cron-min-interval must be at least 1s (schedules fire at most every second), got %s", *f.cronInterval))
	}
	if _, err := f.outbound(); err != nil {
		return gaffer.Config{}, err
	}
	if *f.sessionTTL < 2*time.Second || *f.sessionTTL%time.Second != 0 {
		return gaffer.Config{}, usageError(fmt.Sprintf("--session-ttl must be whole seconds, at least 2s, got %s", *f.sessionTTL))
	}
	if _, err := f.httpSettings(); err != nil {
		return gaffer.Config{}, err
	}
	var endpoints []string
	for _, e := range strings.Split(*f.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	if *f.vacuumAt < 0 {
		return gaffer.Config{}, usageError(fmt.Sprintf("--vacuum-threshold must not be negative (0 leaves vacuum to autovacuum), got %d", *f.vacuumAt))
	}
	vacuumAt := int64(*f.vacuumAt)
	if vacuumAt == 0 {
		vacuumAt = -1
	}
	if *f.remoteWaiting < 1 {
		return gaffer.Config{}, usageError(fmt.Sprintf("--remote-max-waiting must be at least 1, got %d", *f.remoteWaiting))
	}
	if *f.remoteWait > 5*time.Minute {
		return gaffer.Config{}, usageError(fmt.Sprintf("--remote-max-wait must be at most 5m, got %s", *f.remoteWait))
	}
	if *f.remoteWait >= *f.writeTimeout {
		return gaffer.Config{}, usageError(fmt.Sprintf("--remote-max-wait (%s) must be below --http-write-timeout (%s): a waiting claim must be able to answer", *f.remoteWait, *f.writeTimeout))
	}
	cfg := gaffer.Config{Queues: queues, LeaseTTL: *f.leaseTTL, PollInterval: *f.pollInterval, RemoteMaxWait: *f.remoteWait,
		RemoteMaxWaiting: *f.remoteWaiting,
		JobRetention:     *f.jobRetention, DLQRetention: *f.dlqRetention, IdempotencyRetention: *f.idemRetention,
		WorkflowRetention: *f.runRetention, DeadNodeRetention: *f.nodeRetention, CronHistoryRetention: *f.cronRetention,
		RevokedTokenRetention: *f.tokRetention, EtcdEndpoints: endpoints, CronTenantFireRate: float64(*f.cronFireRate),
		SessionTTL: *f.sessionTTL, ClusterPrefix: *f.prefix, Version: version(), VacuumThreshold: vacuumAt}
	if err := f.etcdAccess(&cfg); err != nil {
		return gaffer.Config{}, err
	}
	return cfg, nil
}

type serverFlags struct {
	dbURL     *string
	listenURL *string
	pooler    *bool
	nodeID    *string
	addr      *string
	maxConns  *int
	*nodeFlags
}

// serverFlagSet defines `gaffer server`'s flags; the compose file test
// reads it too.
func (m *Main) serverFlagSet() (*flagSet, *serverFlags) {
	fs := m.newFlagSet("server", "server [flags]\n\nRuns one production node: it claims and runs jobs from PostgreSQL and serves\nthe API (/v1), the dashboard (/ui), /metrics, /healthz and /readyz. SIGTERM drains it (see --drain-timeout).")
	return fs, &serverFlags{
		dbURL: fs.String("database-url", "DATABASE_URL", "", "PostgreSQL connection URL (required); several hosts (postgres://a:5432,b:5432/db) "+
			"mean the node connects to whichever accepts writes, and follows a failover"),
		listenURL: fs.String("listen-database-url", "", "", "a direct (or session-pooled) PostgreSQL URL for the node's LISTEN connection "+
			"(default: --database-url); needed with --transaction-pooler"),
		pooler: fs.Bool("transaction-pooler", "", false, "--database-url goes through a transaction-mode pooler (PgBouncer pool_mode = transaction): "+
			"prepare no statements, send no startup parameters, LISTEN over --listen-database-url"),
		nodeID:    fs.String("node-id", "", "", "this node's id (default hostname-<random>)"),
		addr:      fs.String("addr", "", ":8080", "HTTP listen address: the API (/v1), the dashboard (/ui), /metrics, /healthz, /readyz"),
		maxConns:  fs.Int("max-conns", "", 0, "PostgreSQL pool size (default: from total concurrency, 4-20)"),
		nodeFlags: addNodeFlags(fs),
	}
}

func (m *Main) runServer(ctx context.Context, args []string) error {
	fs, sf := m.serverFlagSet()
	dbURL, nodeID, addr, maxConns, nf := sf.dbURL, sf.nodeID, sf.addr, sf.maxConns, sf.nodeFlags
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("server takes no arguments, got %q", fs.Args()))
	}
	if *dbURL == "" {
		return usageError("--database-url (or $DATABASE_URL) is required")
	}
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
	tp, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// Listen first: the outbound guard must know the API's real address
	// (--addr :0 picks a port) to refuse http jobs aimed at it.
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	own := append([]string{ln.Addr().String()}, cfg.EtcdEndpoints...)
	own = append(own, tracingEndpoints(tp)...)
	if *sf.listenURL != "" {
		// The LISTEN connection reaches PostgreSQL where the pool may not
		// (past a pooler): those addresses are the node's own too.
		eps, err := store.Endpoints(*sf.listenURL)
		if err != nil {
			return usageError("--listen-database-url: " + err.Error())
		}
		own = append(own, eps...)
	}
	hooks, err := newWebhooks(ctx, out, log, *dbURL, own...)
	if err != nil {
		return err
	}
	reg := newRegistry()
	cfg.DatabaseURL, cfg.ID, cfg.MaxConns, cfg.Logger, cfg.Registerer = *dbURL, *nodeID, int32(*maxConns), log, reg
	cfg.ListenDatabaseURL, cfg.TransactionPooler = *sf.listenURL, *sf.pooler
	cfg.TracerProvider = tp.TracerProvider
	node, err := gaffer.NewNode(ctx, cfg)
	if err != nil {
		return err
	}
	secrets := webhook.NewSecrets(node.Pool())
	hooks.SetSecrets(secrets)
	registerBuiltinKinds(node, hooks)
	if err := node.Start(ctx); err != nil {
		node.Stop(context.Background())
		return err
	}
	h, _, err := httpHandler(reg, reg, nf, log, hooks, secrets, node)
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
		// The node claims nothing new from the signal on (G6); requests in
		// flight finish while it can still serve them; then it drains.
		node.Worker().SetClaiming(false)
		// Remote workers' waiting claims answer at once, so that the
		// workers claim through another node.
		node.RemoteWorkers().EndWaits()
		shutdownHTTP(srv, *nf.shutdownTimeout, log)
		log.Info("signal received; draining", "deadline", *nf.drainTimeout)
		return drain(node, *nf.drainTimeout)
	case <-node.Done():
		log.Info("drained through the cluster; exiting")
		node.RemoteWorkers().EndWaits()
		shutdownHTTP(srv, *nf.shutdownTimeout, log)
		return nil
	}
}

func drain(node *gaffer.Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return node.Stop(ctx)
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// healthMux serves /metrics, /healthz (the process is up) and /readyz
// (PostgreSQL answers: 200, with what is degraded, such as etcd, listed;
// 503 when PostgreSQL does not answer, since then no job can run, or
// once the node has stopped).
func healthMux(reg *prometheus.Registry, nodeReg prometheus.Registerer, metricsToken string, n *gaffer.Node) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", bearerOnly(metricsToken, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: nodeReg})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if stopped(n) {
			w.Header().Set(nodeStoppedHeader, n.ID())
			http.Error(w, fmt.Sprintf("node %s has stopped", n.ID()), http.StatusServiceUnavailable)
			return
		}
		if err := n.Pool().Ping(ctx); err != nil {
			http.Error(w, fmt.Sprintf("node %s: postgres: %v", n.ID(), err), http.StatusServiceUnavailable)
			return
		}
		var degraded []string
		if c := n.Cluster(); c != nil {
			for _, d := range c.Status().Degraded {
				degraded = append(degraded, fmt.Sprintf("node %s: %s", n.ID(), d))
			}
		}
		if len(degraded) > 0 {
			fmt.Fprintln(w, "ready, degraded:\n"+strings.Join(degraded, "\n"))
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// bearerOnly guards next with a fixed bearer token; "" leaves it open.
func bearerOnly(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte("Bearer " + token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gaffer-metrics"`)
			http.Error(w, "send the metrics token: Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// nodeStoppedHeader marks the 503 a node's process answers once the node
// has stopped (drained and left) while its HTTP server is still closing:
// `gaffer dev` sends such a request on to a node still running.
const nodeStoppedHeader = "Gaffer-Node-Stopped"

// httpHandler serves n's API under /v1 and its dashboard under /ui beside
// the health endpoints. reg is what /metrics shows; the API's metrics go
// to nodeReg (reg itself, or reg with a node label in a dev node).
func httpHandler(reg *prometheus.Registry, nodeReg prometheus.Registerer, nf *nodeFlags, log hclog.Logger, hooks *webhook.Handler, secrets *webhook.Secrets, n *gaffer.Node) (http.Handler, *auth.Tokens, error) {
	hs, err := nf.httpSettings()
	if err != nil {
		return nil, nil, err
	}
	// One budget of failed authentications per client address, for the
	// API and the dashboard's sign-in alike.
	failures := auth.NewFailureLimiter(auth.FailureLimiterConfig{})
	tokens := auth.NewTokens(n.Pool())
	a, err := api.New(api.Config{Pool: n.Pool(), Tokens: tokens, Jobs: n.Client(), DLQ: n.DLQ(), Cron: n.Cron(), Workflows: n.Workflows(),
		Admin: cluster.NewAdmin(n.Pool()), Cluster: n.Cluster(), Health: n.Health, Remote: n.RemoteWorkers(), WebhookSecrets: secrets, Logger: log,
		Registerer: nodeReg,
		RateLimit:  float64(*nf.rateLimit), RateBurst: 2 * *nf.rateLimit, IdempotencyRetention: *nf.idemRetention,
		MaxResponseBytes: *nf.maxResponse, TrustedProxies: hs.proxies, Failures: failures, CronQuota: nf.cronQuota(),
		AllowUnknownKinds: *nf.allowUnknown})
	if err != nil {
		return nil, nil, err
	}
	dash, err := ui.New(ui.Config{Tokens: tokens, Sessions: auth.NewSessions(n.Pool(), hs.sessionLength), Jobs: n.Client(), DLQ: n.DLQ(),
		Cron: n.Cron(), Workflows: n.Workflows(), Admin: cluster.NewAdmin(n.Pool()), Cluster: n.Cluster(), Health: n.Health, Logger: log, CronQuota: nf.cronQuota(),
		TrustedProxies: hs.proxies, Failures: failures, MaxPageBytes: *nf.maxResponse})
	if err != nil {
		return nil, nil, err
	}
	// Once the node has stopped its pool is closed: a request answers 503,
	// marked, rather than "the database is unreachable". Its body is read
	// first (up to 1 MiB), so that a proxy in front (gaffer dev) has sent
	// all of it when the answer comes, and may send it to another node.
	live := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if stopped(n) {
				io.Copy(io.Discard, io.LimitReader(r.Body, maxReplayBody))
				w.Header().Set(nodeStoppedHeader, n.ID())
				http.Error(w, fmt.Sprintf("node %s has stopped", n.ID()), http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	mux := healthMux(reg, nodeReg, *nf.metricsToken, n)
	mux.Handle("/v1/", live(a))
	mux.Handle("/ui/", live(dash))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	return mux, tokens, nil
}

// stopped says whether n has stopped (drained and left, or Stop).
func stopped(n *gaffer.Node) bool {
	select {
	case <-n.Done():
		return true
	default:
		return false
	}
}
