package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/webhook"
	"github.com/gafferhq/gaffer/workflow"
)

// Config configures the API. Zero values take the defaults shown. Give it
// the node's clients (Node.Client, Node.Cron, Node.Workflows): they run
// each kind's own checks (job.KindOptions.Check) on what the API
// enqueues, schedules and submits — the http kind's destination check
// among them.
type Config struct {
	Pool   *pgxpool.Pool // required
	Tokens *auth.Tokens  // required
	Jobs   *job.Client   // required
	DLQ    *dlq.Client   // required
	Cron   *cron.Client  // required
	// Workflows submits and manages runs. Required.
	Workflows *workflow.Client
	Admin     *cluster.Admin
	// Cluster is this node's cluster membership, for GET /v1/cluster; nil
	// when the node runs without etcd.
	Cluster *cluster.Cluster
	// Health says what the node sees degraded beyond its cluster
	// membership (Node.Health), for GET /v1/cluster; identify names what
	// is at fault, for a token spanning tenants. Nil: nothing.
	Health func(identify bool) []string
	// Remote serves remote workers (/v1/workers, /v1/work): give the
	// node's (Node.RemoteWorkers), whose waiting claims the node's
	// notifications wake. Default: one of Pool's database whose claims
	// wake only on this API's own writes and their poll.
	Remote *remote.Workers
	// WebhookSecrets manages the tenants' signing secrets. Default: those
	// in Pool's database.
	WebhookSecrets *webhook.Secrets
	Logger         hclog.Logger
	// Registerer receives the API's request metrics.
	Registerer prometheus.Registerer
	// MaxBodyBytes caps a request body. Default 2 MiB.
	MaxBodyBytes int64
	// MaxResponseBytes is the budget of one list or claim answer
	// (GET /v1/jobs, /v1/dlq, /v1/workflows, POST /v1/work/claim): a page
	// ends before the item that would take it past the budget, with a
	// next_cursor, and a claim takes no more jobs than fit (a single item
	// larger than the budget is still sent alone). It also bounds the rows
	// a list holds in memory. Default DefaultMaxResponseBytes (8 MiB).
	MaxResponseBytes int
	// RateLimit is the sustained requests per second allowed per token;
	// RateBurst the burst. Defaults 200 and 400.
	RateLimit float64
	RateBurst int
	// CronQuota bounds the cron entries of each tenant whose token is
	// confined to it: how many, how often each may fire, and how often
	// all together (cron.Quota; zero fields take its defaults). Tokens
	// spanning every tenant are operators' and are not held to it.
	CronQuota cron.Quota
	// IdempotencyRetention is how long an Idempotency-Key replays its
	// first response. Default 24h (the leader's retention deletes keys
	// after the same time; see maintenance.RetentionCleanerConfig).
	IdempotencyRetention time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client. Default: none (the client is the TCP peer).
	TrustedProxies *auth.TrustedProxies
	// AllowUnknownKinds turns off the enqueue check that refuses, with 400
	// unknown_kind, a kind no node handles and no remote worker of the
	// tenant works (by the nodes table, those that left included until
	// dead-node retention). Off by default: the check is on.
	AllowUnknownKinds bool
	// Failures limits failed authentications per client address; share
	// one with the dashboard so that both count against one budget.
	// Default: an auth.FailureLimiter of its own, with its defaults.
	Failures *auth.FailureLimiter
}

// Server is the HTTP API under /v1. It is an http.Handler.
type Server struct {
	cfg     Config
	store   *store.Store
	log     hclog.Logger
	mux     *http.ServeMux
	metrics *prometheus.HistogramVec

	// kinds answers whether a kind is registered (the unknown_kind check).
	kinds *knownKinds

	// tenantCron is Cron holding tenants' tokens to CronQuota.
	tenantCron *cron.Client

	limitMu  sync.Mutex
	limiters map[string]*rate.Limiter

	// patterns are the routes registered on mux, in order.
	patterns []string
}

// New returns the API handler.
func New(cfg Config) (*Server, error) {
	if cfg.Pool == nil || cfg.Tokens == nil || cfg.Jobs == nil || cfg.DLQ == nil || cfg.Cron == nil || cfg.Workflows == nil {
		return nil, errors.New("api: Config.Pool, Tokens, Jobs, DLQ, Cron and Workflows are required")
	}
	if cfg.WebhookSecrets == nil {
		cfg.WebhookSecrets = webhook.NewSecrets(cfg.Pool)
	}
	if cfg.Admin == nil {
		cfg.Admin = cluster.NewAdmin(cfg.Pool)
	}
	if cfg.Remote == nil {
		r, err := remote.NewWorkers(remote.Config{Pool: cfg.Pool, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		cfg.Remote = r
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 2 << 20
	}
	switch {
	case cfg.MaxResponseBytes == 0:
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	case cfg.MaxResponseBytes < MinMaxResponseBytes:
		return nil, fmt.Errorf("api: Config.MaxResponseBytes must be at least %d, got %d", MinMaxResponseBytes, cfg.MaxResponseBytes)
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = 200
	}
	if cfg.RateBurst == 0 {
		cfg.RateBurst = 400
	}
	if cfg.IdempotencyRetention == 0 {
		cfg.IdempotencyRetention = maintenance.DefaultIdempotencyRetention
	}
	if cfg.Failures == nil {
		cfg.Failures = auth.NewFailureLimiter(auth.FailureLimiterConfig{})
	}
	s := &Server{cfg: cfg, store: store.New(cfg.Pool), kinds: newKnownKinds(store.New(cfg.Pool)), log: cfg.Logger.Named("api"), mux: http.NewServeMux(), limiters: map[string]*rate.Limiter{},
		metrics: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "gaffer", Subsystem: "api", Name: "request_duration_seconds",
			Help: "API requests by route and status.", Buckets: prometheus.DefBuckets}, []string{"route", "status"})}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(s.metrics)
	}
	s.tenantCron = cfg.Cron.WithQuota(cfg.CronQuota)
	if err := s.routes(); err != nil {
		return nil, err
	}
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// handler is an API endpoint: it returns the status and the value to
// encode as JSON, or an error (a *Problem, a domain error, or anything
// else, which becomes a 500).
type handler func(r *http.Request, p auth.Principal, body []byte) (int, any, error)

//go:generate go run ./cmd/openapi-gen -o openapi.json

// openAPIDoc is the document api/cmd/openapi-gen writes from Routes;
// TestOpenAPIDocumentIsCurrent fails when it is stale.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the API's OpenAPI 3 document, as served at
// /v1/openapi.json.
func OpenAPI() []byte { return openAPIDoc }

func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDoc)
}

// routes registers every route of routeTable, and the answer to a
// request none matches.
func (s *Server) routes() error {
	for _, r := range Routes() {
		if err := s.register(r); err != nil {
			return fmt.Errorf("api: route %s: %w", r.Pattern(), err)
		}
	}
	s.mux.HandleFunc(noRoutePattern, s.noRoute)
	return nil
}

// txHandler is an endpoint whose writes run in a transaction the API
// hands it. With an Idempotency-Key the response is stored in that same
// transaction: if the write commits, so does the response a retry with
// the key replays — even when the commit's answer never reached the node.
type txHandler func(r *http.Request, p auth.Principal, body []byte, tx pgx.Tx) (int, any, error)

// endpoint is a handler or a txHandler.
type endpoint struct {
	plain  handler
	atomic txHandler
}

// register serves rt: a public route as it is, any other behind
// authentication, scope, rate limit, body checks and, for POSTs,
// Idempotency-Key (see serve).
func (s *Server) register(rt Route) error {
	pattern := rt.Pattern()
	s.patterns = append(s.patterns, pattern)
	if rt.public != nil {
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { rt.public(s, w, r) })
		return nil
	}
	params, err := compileParams(rt)
	if err != nil {
		return err
	}
	var h endpoint
	if rt.atomic != nil {
		h.atomic = func(r *http.Request, p auth.Principal, body []byte, tx pgx.Tx) (int, any, error) {
			return rt.atomic(s, r, p, body, tx)
		}
	} else {
		h.plain = func(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
			return rt.plain(s, r, p, body)
		}
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("handler panicked", "route", pattern, "panic", v)
				writeProblem(rec, asProblem(nil))
			}
			s.metrics.WithLabelValues(pattern, strconv.Itoa(rec.status)).Observe(time.Since(start).Seconds())
		}()
		s.serve(rec, r, pattern, rt, params, h)
	})
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, pattern string, rt Route, params routeParams, h endpoint) {
	text, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gaffer"`)
		writeProblem(w, problem(CodeUnauthorized, "send an API token: Authorization: Bearer <token>"))
		return
	}
	client := s.cfg.TrustedProxies.ClientAddr(r)
	if wait, blocked := s.cfg.Failures.Blocked(client); blocked {
		w.Header().Set("Retry-After", auth.RetryAfter(wait))
		writeProblem(w, problem(CodeRateLimited, "too many failed authentications from this address; retry after the Retry-After seconds"))
		return
	}
	p, err := s.cfg.Tokens.Authenticate(r.Context(), text)
	if errors.Is(err, auth.ErrBadToken) {
		s.cfg.Failures.Fail(client)
		w.Header().Set("WWW-Authenticate", `Bearer realm="gaffer", error="invalid_token"`)
		writeProblem(w, problem(CodeUnauthorized, "the token is unknown or revoked"))
		return
	}
	if err != nil {
		s.log.Error("authenticate", "error", err)
		writeProblem(w, problem(CodeUnavailable, "could not check the token: the database is unreachable"))
		return
	}
	if !p.Allows(rt.Scope) {
		writeProblem(w, problem(CodeForbidden, "this endpoint needs the "+rt.Scope+" scope"))
		return
	}
	if rt.Operator && !p.Spans() {
		writeProblem(w, operatorOnly(p))
		return
	}
	if wait, ok := s.allow(p.TokenID); !ok {
		w.Header().Set("Retry-After", auth.RetryAfter(wait))
		writeProblem(w, problem(CodeRateLimited, "this token is over its request rate; retry after the Retry-After seconds"))
		return
	}
	// Every parameter, before anything reads one: a value PostgreSQL
	// cannot hold, or that breaks its pattern, never reaches it.
	if pr := params.check(r); pr != nil {
		writeProblem(w, pr)
		return
	}
	var body []byte
	if r.ContentLength != 0 && (r.Method == http.MethodPost || r.Method == http.MethodPatch || r.Method == http.MethodPut) {
		var pr *Problem
		if body, pr = readBody(r, s.cfg.MaxBodyBytes); pr != nil {
			writeProblem(w, pr)
			return
		}
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" && r.Method == http.MethodPost {
		s.idempotent(w, r, p, key, body, h)
		return
	}
	status, v, err := s.run(r, p, body, h, nil)
	s.respond(w, r, status, v, err)
}

// run runs an endpoint. A txHandler runs in its own transaction, and
// before it commits, keep (when not nil) is handed the response to store
// in the same transaction. A commit whose outcome is unknown answers 503.
func (s *Server) run(r *http.Request, p auth.Principal, body []byte, h endpoint, keep func(tx pgx.Tx, res *bufferedResponse) error) (int, any, error) {
	if h.atomic == nil {
		return h.plain(r, p, body)
	}
	ctx := r.Context()
	tx, err := s.store.Begin(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	status, v, err := h.atomic(r, p, body, tx)
	if err != nil {
		return status, v, err
	}
	if keep != nil {
		res := &bufferedResponse{header: http.Header{}}
		s.respond(res, r, status, v, nil)
		if err := keep(tx, res); err != nil {
			return 0, nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		s.log.Error("commit; the write may or may not have happened", "method", r.Method, "path", logPath(r), "error", err)
		return 0, nil, problem(CodeUnavailable,
			"the database did not confirm the write; retry with the same Idempotency-Key to learn its outcome")
	}
	return status, v, nil
}

func (s *Server) respond(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		pr := asProblem(err)
		if pr.Status >= 500 {
			s.log.Error("request failed", "method", r.Method, "path", logPath(r), "error", err)
		}
		writeProblem(w, pr)
		return
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if st, ok := v.(streamer); ok {
		// The status is sent: a failed write is a client gone away.
		if err := st.stream(w, s.cfg.MaxResponseBytes); err != nil {
			s.log.Debug("stream response", "method", r.Method, "path", r.URL.Path, "error", err)
		}
		return
	}
	// Not HTML-escaped: args and results are returned as they were sent.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// idempotent runs a POST once per (tenant, key): the same key with the
// same request replays the first response; with a different one, 422.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, p auth.Principal, key string, body []byte, h endpoint) {
	sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.RequestURI()+"\n"), body...))
	ctx := r.Context()
	taken, prev, err := s.store.ClaimIdempotencyKey(ctx, p.Tenant, key, sum[:], time.Minute, s.cfg.IdempotencyRetention)
	if err != nil {
		s.respond(w, r, 0, nil, err)
		return
	}
	if !taken {
		switch {
		case !bytes.Equal(prev.RequestHash, sum[:]):
			writeProblem(w, problem(CodeIdempotencyReuse, "this Idempotency-Key was used with a different request"))
		case prev.Status == 0:
			writeProblem(w, problem(CodeIdempotencyBusy, "the first request with this Idempotency-Key is still in progress; retry shortly"))
		default:
			w.Header().Set("Content-Type", prev.ContentType)
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(prev.Status)
			w.Write(prev.Body)
		}
		return
	}
	buf := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
	// A txHandler's response is stored with its write, in its transaction.
	keep := func(tx pgx.Tx, res *bufferedResponse) error {
		return s.store.FinishIdempotencyKey(ctx, tx, p.Tenant, key, res.status, res.body.Bytes(), res.header.Get("Content-Type"))
	}
	status, v, herr := s.run(r, p, body, h, keep)
	s.respond(buf, r, status, v, herr)
	done := context.WithoutCancel(ctx)
	switch {
	case buf.status >= 400:
		// Refused, or failed: a corrected or later retry runs anew rather
		// than replaying the error for a day. A txHandler's key whose
		// response committed with its write is not released (only an
		// unfinished key is), so a commit whose answer was lost replays.
		// A plain handler's 5xx may follow a write that happened; plain
		// handlers are those whose repeat is harmless (state changes).
		s.store.ReleaseIdempotencyKey(done, p.Tenant, key)
	case h.atomic == nil:
		if err := s.store.FinishIdempotencyKey(done, nil, p.Tenant, key, buf.status, buf.body.Bytes(), buf.header.Get("Content-Type")); err != nil {
			s.log.Error("store idempotent response", "error", err)
		}
	}
	for k, vs := range buf.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(buf.status)
	w.Write(buf.body.Bytes())
}

// logPath is r's path as a log line shows it: escaped and bounded. The
// path of a request a handler serves passed its route's checks; this is
// the second line of defence, for a log reader's terminal.
func logPath(r *http.Request) string { return boundedEscape(r.URL.Path, 512) }

func (s *Server) allow(tokenID string) (time.Duration, bool) {
	s.limitMu.Lock()
	l := s.limiters[tokenID]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(s.cfg.RateLimit), s.cfg.RateBurst)
		s.limiters[tokenID] = l
	}
	s.limitMu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return d, false
	}
	return 0, true
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(code int)        { b.status = code }

// cron is the cron client for p's writes: a token confined to one tenant
// is held to the tenant's cron quota; one spanning every tenant (an
// operator's) is not.
func (s *Server) cron(p auth.Principal) *cron.Client {
	if p.Tenant == auth.AllTenants {
		return s.cfg.Cron
	}
	return s.tenantCron
}
