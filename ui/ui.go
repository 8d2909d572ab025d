// Package ui is Gaffer's dashboard: server-rendered pages under /ui that
// every node serves, reading and acting through the same clients, tokens
// and scopes as the HTTP API.
//
// A visitor signs in with an API token and gets a session: the cookie
// (HttpOnly, SameSite=Strict, scoped to /ui/, Secure over TLS) holds a
// random 256-bit session id, never the token; the database holds the id's
// hash with the token's id, tenant and scopes, and an absolute expiry.
// Every request looks the session up and checks the token is not revoked,
// so signing out or revoking the token ends the session on its next
// request, on every node. Every action is a POST carrying a CSRF token
// bound to the session, and a POST from another origin is refused. Failed
// sign-ins and unknown sessions count against the client's address (see
// auth.FailureLimiter).
package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// Config configures the dashboard. Every field but Cluster and Logger is
// required.
type Config struct {
	Tokens    *auth.Tokens
	Sessions  *auth.Sessions
	Jobs      *job.Client
	DLQ       *dlq.Client
	Cron      *cron.Client
	Workflows *workflow.Client
	Admin     *cluster.Admin
	// Cluster is the serving node's membership; nil without etcd.
	Cluster *cluster.Cluster
	// Health says what the serving node sees degraded beyond its cluster
	// membership (Node.Health); identify names what is at fault, for a
	// token spanning tenants. Nil: nothing.
	Health func(identify bool) []string
	Logger hclog.Logger
	// TrustedProxies are the proxies whose X-Forwarded-For (the client's
	// address) and X-Forwarded-Proto (whether it used TLS) are believed.
	// Default: none.
	TrustedProxies *auth.TrustedProxies
	// Failures limits failed sign-ins per client address; share the API's.
	// Default: a FailureLimiter of its own.
	Failures *auth.FailureLimiter
	// MaxPageBytes bounds the rows a page of jobs or DLQ entries reads
	// (about this many bytes of payload; the row that crosses it is the
	// page's last, and the page links to the next): give the API's
	// response budget. Default 8 MiB.
	MaxPageBytes int
	// CronQuota holds the cron entries a tenant's token creates or
	// reschedules to the API's quota: give the API's Config.CronQuota.
	CronQuota cron.Quota
}

// Handler serves the dashboard under /ui/. It is an http.Handler.
type Handler struct {
	cfg   Config
	log   hclog.Logger
	mux   *http.ServeMux
	pages map[string]*template.Template
	// tenantCron is Cron holding tenants' tokens to CronQuota.
	tenantCron *cron.Client
	// patterns are the routes get and post registered, in order.
	patterns []string
}

const (
	sessionCookie = "gaffer_session"
	flashCookie   = "gaffer_flash"
	// depthCap is where the dashboard stops counting a queue's or the
	// DLQ's rows: beyond it the page says "10,000+", which stays fast on a
	// table of millions.
	depthCap = 10000
	pageSize = 50
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns the dashboard handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Tokens == nil || cfg.Sessions == nil || cfg.Jobs == nil || cfg.DLQ == nil || cfg.Cron == nil || cfg.Workflows == nil || cfg.Admin == nil {
		return nil, errors.New("ui: Config.Tokens, Sessions, Jobs, DLQ, Cron, Workflows and Admin are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxPageBytes == 0 {
		cfg.MaxPageBytes = 8 << 20
	}
	if cfg.Failures == nil {
		cfg.Failures = auth.NewFailureLimiter(auth.FailureLimiterConfig{})
	}
	h := &Handler{cfg: cfg, log: cfg.Logger.Named("ui"), mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "templates/")
		if base == "layout.html" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("ui: parse %s: %w", name, err)
		}
		h.pages[strings.TrimSuffix(base, ".html")] = t
	}
	h.tenantCron = cfg.Cron.WithQuota(cfg.CronQuota)
	h.routes()
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	if h.cfg.TrustedProxies.HTTPS(r) {
		hd.Set("Strict-Transport-Security", hsts)
	}
	h.mux.ServeHTTP(w, r)
}

// page is a GET handler: it fills v.Data (and v.Title) or returns an error.
type page func(r *http.Request, v *view) error

// action is a POST handler: it acts and returns where to go next and what
// to tell the user there.
type action func(r *http.Request, p auth.Principal) (redirect, message string, err error)

func (h *Handler) routes() {
	static, _ := fs.Sub(staticFS, "static")
	h.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", cacheFor(time.Hour, http.FileServerFS(static))))
	h.mux.HandleFunc("GET /ui/login", h.loginForm)
	h.mux.HandleFunc("POST /ui/login", h.login)
	h.mux.HandleFunc("POST /ui/logout", h.logout)

	h.get("GET /ui/{$}", "overview", h.overview)
	h.get("GET /ui/jobs", "jobs", h.jobsPage)
	h.get("GET /ui/jobs/bulk", "jobs_bulk", h.bulkPreview)
	h.get("GET /ui/jobs/{id}", "job", h.jobPage)
	h.get("GET /ui/queues", "queues", h.queuesPage)
	h.get("GET /ui/nodes", "nodes", h.nodesPage)
	h.get("GET /ui/cron", "cron", h.cronPage)
	h.get("GET /ui/cron/{tenant}/{name}", "cron_entry", h.cronEntryPage)
	h.get("GET /ui/dlq", "dlq", h.dlqPage)
	h.get("GET /ui/dlq/{id}", "dlq_entry", h.dlqEntryPage)
	h.get("GET /ui/workflows", "workflows", h.workflowsPage)
	h.get("GET /ui/workflows/{id}", "workflow", h.workflowPage)
	h.get("GET /ui/batches", "batches", h.batchesPage)
	h.get("GET /ui/batches/{id}", "batch", h.batchPage)

	h.post("POST /ui/jobs/{id}/cancel", auth.ScopeJobsWrite, h.cancelJob)
	h.post("POST /ui/jobs/{id}/retry", auth.ScopeJobsWrite, h.retryJob)
	h.post("POST /ui/jobs/{id}/resume-sequence", auth.ScopeJobsWrite, h.resumeSequence)
	h.post("POST /ui/jobs/bulk", auth.ScopeJobsWrite, h.bulkJobs)
	h.post("POST /ui/queues/{queue}/pause", auth.ScopeAdmin, h.pauseQueue)
	h.post("POST /ui/queues/{queue}/resume", auth.ScopeAdmin, h.resumeQueue)
	h.post("POST /ui/nodes/{node}/drain", auth.ScopeAdmin, h.drainNode)
	h.post("POST /ui/nodes/{node}/undrain", auth.ScopeAdmin, h.undrainNode)
	h.post("POST /ui/cron/{tenant}/{name}/pause", auth.ScopeJobsWrite, h.pauseCron)
	h.post("POST /ui/cron/{tenant}/{name}/resume", auth.ScopeJobsWrite, h.resumeCron)
	h.post("POST /ui/cron/{tenant}/{name}/trigger", auth.ScopeJobsWrite, h.triggerCron)
	h.post("POST /ui/dlq/replay", auth.ScopeJobsWrite, h.replayDLQ)
	h.post("POST /ui/dlq/purge", auth.ScopeJobsWrite, h.purgeDLQ)
	h.post("POST /ui/dlq/{id}/delete", auth.ScopeJobsWrite, h.deleteDLQEntry)
	h.post("POST /ui/workflows/{id}/cancel", auth.ScopeJobsWrite, h.cancelWorkflow)
	h.post("POST /ui/batches/{id}/close", auth.ScopeJobsWrite, h.closeBatch)
	h.post("POST /ui/batches/{id}/cancel", auth.ScopeJobsWrite, h.cancelBatch)

	// Forms that create and edit (forms.go): a refusal shows the form
	// again with what was typed.
	h.get("GET /ui/cron/new", "cron_form", h.cronNewPage)
	h.form("POST /ui/cron", auth.ScopeJobsWrite, "cron_form", h.cronNewPage, h.createCron)
	h.get("GET /ui/cron/{tenant}/{name}/edit", "cron_form", h.cronEditPage)
	h.form("POST /ui/cron/{tenant}/{name}/edit", auth.ScopeJobsWrite, "cron_form", h.cronEditPage, h.saveCron)
	h.post("POST /ui/cron/{tenant}/{name}/delete", auth.ScopeJobsWrite, h.deleteCron)
	h.get("GET /ui/limits/new", "limit_form", h.limitNewPage)
	h.form("POST /ui/limits", auth.ScopeAdmin, "limit_form", h.limitNewPage, h.createLimit)
	h.get("GET /ui/limits/{limit}/edit", "limit_form", h.limitEditPage)
	h.form("POST /ui/limits/{limit}/edit", auth.ScopeAdmin, "limit_form", h.limitEditPage, h.saveLimit)
	h.post("POST /ui/limits/{limit}/delete", auth.ScopeAdmin, h.deleteLimit)
	h.form("POST /ui/workflows/{id}/signal", auth.ScopeJobsWrite, "workflow", h.workflowPage, h.signalWorkflow)
	h.post("POST /ui/workflows/{id}/steps/{step}/retry", auth.ScopeJobsWrite, h.retryStep)
	h.get("GET /ui/queues/{queue}", "queues_history", h.queueHistoryPage)
	h.formPage("GET /ui/limits", func(*http.Request) string { return "/ui/queues" })
	h.formPage("GET /ui/workflows/{id}/signal", signalFormPage)

	h.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		p, ok := h.signedIn(w, r)
		if !ok {
			return
		}
		h.renderError(w, r, p, "", http.StatusNotFound, "No such page: "+quoteBounded(r.URL.Path))
	})
}

func cacheFor(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		next.ServeHTTP(w, r)
	})
}

// view is what every template receives.
type view struct {
	Title string
	Nav   string
	P     auth.Principal
	CSRF  string
	Flash string
	// Tenant is the tenant filter a spanning token chose ("" = all).
	Tenant string
	Now    time.Time
	Data   any
	// Form is what a refused form sent, shown again with the refusal
	// (see Handler.form); nil on a page's first showing.
	Form *formState
}

// Spanning reports whether the signed-in token spans tenants.
func (v *view) Spanning() bool { return v.P.Tenant == auth.AllTenants }

// Can reports whether the signed-in token holds scope.
func (v *view) Can(scope string) bool { return v.P.Allows(scope) }

func (h *Handler) get(pattern, name string, pg page) {
	if _, ok := h.pages[name]; !ok {
		panic("ui: no template for page " + name)
	}
	params := routeParams(pattern)
	h.patterns = append(h.patterns, pattern)
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, ok := h.signedIn(w, r)
		if !ok {
			return
		}
		if !p.Allows(auth.ScopeJobsRead) {
			h.renderError(w, r, p, "", http.StatusForbidden, "This token lacks the jobs:read scope the dashboard needs.")
			return
		}
		if msg := checkParams(r, params); msg != "" {
			h.renderError(w, r, p, "", http.StatusBadRequest, msg)
			return
		}
		v := &view{P: p, Nav: strings.SplitN(name, "_", 2)[0], CSRF: h.csrf(r), Flash: h.takeFlash(w, r), Now: time.Now()}
		if p.Tenant == auth.AllTenants {
			v.Tenant = r.URL.Query().Get("tenant")
		}
		switch v.Nav {
		case "job", "workflow":
			v.Nav += "s"
		case "batch":
			v.Nav = "batches"
		}
		if err := pg(r, v); err != nil {
			var to redirect
			if errors.As(err, &to) {
				http.Redirect(w, r, string(to), http.StatusSeeOther)
				return
			}
			status, msg := h.describe(err)
			h.renderError(w, r, p, v.Nav, status, msg)
			return
		}
		h.render(w, r, http.StatusOK, name, v)
	})
}

func (h *Handler) post(pattern, scope string, act action) {
	params := routeParams(pattern)
	h.patterns = append(h.patterns, pattern)
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, ok := h.admitPost(w, r, scope, params)
		if !ok {
			return
		}
		to, msg, err := act(r, p)
		if err != nil {
			status, text := h.describe(err)
			if status >= 500 {
				h.renderError(w, r, p, "", status, text)
				return
			}
			msg = "Refused: " + text
			if to == "" {
				to = backTo(r)
			}
		}
		h.setFlash(w, r, msg)
		http.Redirect(w, r, to, http.StatusSeeOther)
	})
}

// admitPost runs the checks every action passes before it acts: a
// session, the same origin, a readable form within 1 MiB, its CSRF token,
// the scope, and every parameter (a value at fault returns to the form's
// "back" page with the refusal). It answers the request itself when one
// fails.
func (h *Handler) admitPost(w http.ResponseWriter, r *http.Request, scope string, params []string) (auth.Principal, bool) {
	p, ok := h.signedIn(w, r)
	if !ok {
		return p, false
	}
	if !sameOrigin(r) {
		h.renderError(w, r, p, "", http.StatusForbidden, "The request came from another site and was refused.")
		return p, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, p, "", http.StatusBadRequest, "The form could not be read: "+err.Error())
		return p, false
	}
	if !h.validCSRF(r) {
		h.renderError(w, r, p, "", http.StatusForbidden, "The form's CSRF token is missing or stale; reload the page and try again.")
		return p, false
	}
	if !p.Allows(scope) {
		h.renderError(w, r, p, "", http.StatusForbidden, "This token lacks the "+scope+" scope this action needs.")
		return p, false
	}
	if msg := checkParams(r, params); msg != "" {
		to := "/ui/"
		if b := r.PostForm.Get("back"); localPath(b) {
			to = b
		}
		h.setFlash(w, r, "Refused: "+msg)
		http.Redirect(w, r, to, http.StatusSeeOther)
		return p, false
	}
	return p, true
}

// backTo is the page a refused action returns to: the form's "back" field
// when it is a dashboard path, else the overview.
func backTo(r *http.Request) string {
	if b := r.PostForm.Get("back"); localPath(b) {
		return b
	}
	return "/ui/"
}

// localPath reports whether p is a dashboard path fit to redirect to:
// under /ui/, not another host's, and text a Location header carries as
// it is (see textRule.check: UTF-8, no control characters, bounded).
func localPath(p string) bool {
	return strings.HasPrefix(p, "/ui/") && !strings.HasPrefix(p, "//") && !strings.ContainsRune(p, '\\') &&
		(textRule{maxLen: maxFieldLen}).check("path", p) == ""
}

// describe turns an error into a status and a message for the user.
func (h *Handler) describe(err error) (int, string) {
	var ve *job.ValidationError
	switch {
	case errors.As(err, &ve):
		return http.StatusBadRequest, ve.Error()
	case errors.Is(err, errBadInput):
		return http.StatusBadRequest, strings.TrimPrefix(err.Error(), errBadInput.Error()+": ")
	case errors.Is(err, job.ErrNotFound), errors.Is(err, dlq.ErrNotFound), errors.Is(err, cron.ErrNotFound),
		errors.Is(err, workflow.ErrNotFound), errors.Is(err, cluster.ErrUnknownNode), errors.Is(err, errNotFound),
		errors.Is(err, job.ErrBatchNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, job.ErrFinished), errors.Is(err, job.ErrNotRetryable), errors.Is(err, dlq.ErrAlreadyReplayed),
		errors.Is(err, workflow.ErrFinished):
		return http.StatusConflict, err.Error()
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "the request was cancelled"
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, strings.TrimPrefix(err.Error(), errForbidden.Error()+": ")
	}
	h.log.Error("dashboard request failed", "error", err)
	return http.StatusInternalServerError, "Something went wrong on the server: " + err.Error()
}

// redirect is a page's answer that sends the visitor to another
// dashboard path (the search box given a job's id).
type redirect string

func (r redirect) Error() string { return "redirect to " + string(r) }

var (
	errBadInput  = errors.New("bad input")
	errNotFound  = errors.New("not found")
	errForbidden = errors.New("forbidden")
)

// errNeedsScope refuses a page the token's scopes do not cover.
func errNeedsScope(scope string) error {
	return fmt.Errorf("%w: this page needs a token with the %s scope", errForbidden, scope)
}

func badInput(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errBadInput, fmt.Sprintf(format, a...))
}

// renderError shows the error page, titled by the status, with msg.
func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, p auth.Principal, nav string, status int, msg string) {
	h.render(w, r, status, "error", &view{P: p, Nav: nav, Title: http.StatusText(status), Data: msg})
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	if v.CSRF == "" {
		v.CSRF = h.csrf(r)
	}
	if v.Now.IsZero() {
		v.Now = time.Now()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := h.pages[name].ExecuteTemplate(w, "layout", v); err != nil {
		h.log.Error("render page", "page", name, "error", err)
	}
}

// sameOrigin refuses a request whose Origin (or, lacking it, Referer)
// names another host. Browsers send Origin on every POST.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return true
	}
	u, err := url.Parse(src)
	return err == nil && u.Host == r.Host
}
