package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

type enqueueRequest struct {
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	Tenant      string          `json:"tenant"`
	Queue       string          `json:"queue"`
	Priority    *int            `json:"priority"`
	RunAt       *string         `json:"run_at"`
	Delay       *string         `json:"delay"`
	MaxAttempts *int            `json:"max_attempts"`
	Timeout     *string         `json:"timeout"`
	UniqueKey   string          `json:"unique_key"`
	// UniqueStates and UniqueFor give unique_key a window
	// (docs/shaping.md).
	UniqueStates *[]string `json:"unique_states"`
	UniqueFor    *string   `json:"unique_for"`
	// Debounce makes the enqueue a trailing debounce (docs/shaping.md).
	Debounce *debounceRequest `json:"debounce"`
	// Sequence enqueues the job into a sequence (docs/shaping.md).
	Sequence    *sequenceRequest `json:"sequence"`
	FairnessKey string           `json:"fairness_key"`
	LimitKey    string           `json:"limit_key"`
	// Tags label the job for search: at most 16, each 1-64 bytes of
	// letters, digits and _ . : / = + @ - (docs/shaping.md).
	Tags []string `json:"tags"`
	// Batch enqueues the job into that open batch of the tenant
	// (docs/shaping.md, "Batches").
	Batch int64 `json:"batch"`
	// AllowUnknownKind enqueues a kind no node or remote worker registered
	// (refused otherwise with unknown_kind).
	AllowUnknownKind bool `json:"allow_unknown_kind"`
}

// debounceRequest is an enqueue's debounce.
type debounceRequest struct {
	Key     string  `json:"key"`
	Window  string  `json:"window"`
	MaxWait *string `json:"max_wait"`
}

// sequenceRequest is an enqueue's sequence.
type sequenceRequest struct {
	Key       string   `json:"key"`
	KeyArgs   []string `json:"key_args"`
	OnFailure string   `json:"on_failure"`
}

func (s *sequenceRequest) job() *job.Sequence {
	if s == nil {
		return nil
	}
	return &job.Sequence{Key: s.Key, KeyArgs: s.KeyArgs, OnFailure: s.OnFailure}
}

// jobView is a job on the wire.
type jobView struct {
	*job.Job
	Timeout string `json:"timeout,omitempty"`
}

func viewJob(j *job.Job) jobView { return jobView{Job: j, Timeout: formatDuration(j.Timeout)} }

type enqueueResponse struct {
	Job jobView `json:"job"`
	// Existing: the unique key was held by this job (unfinished, or one
	// the request's window holds the key for); nothing was enqueued.
	Existing bool `json:"existing"`
	// Debounced: the debounce key named this job, which had not started;
	// it took the request's args and its new run_at. Nothing was
	// enqueued.
	Debounced bool `json:"debounced"`
}

// reservedKind refuses one of Gaffer's own kinds (gaffer.sleep and
// gaffer.signal: a workflow's sleep and signal steps) where a tenant
// names the kind of a job or of the jobs it works: enqueued or worked
// outside a workflow it would end a step's wait. nil for any other kind.
func reservedKind(field, kind string) *Problem {
	if !strings.HasPrefix(kind, job.ReservedKindPrefix) {
		return nil
	}
	p := problem(CodeReservedKind, fmt.Sprintf("%s: kind %q is reserved: kinds starting with %q are Gaffer's own "+
		"(a workflow's sleep and signal steps; submit a workflow with a sleep or signal step instead)", field, clipText(kind, 100), job.ReservedKindPrefix))
	p.Field = field
	return p
}

func (s *Server) enqueue(r *http.Request, p auth.Principal, body []byte, tx pgx.Tx) (int, any, error) {
	var req enqueueRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	if pr := reservedKind("kind", req.Kind); pr != nil {
		return 0, nil, pr
	}
	tenant, pr := writeTenant(p, req.Tenant)
	if pr != nil {
		return 0, nil, pr
	}
	runAt, pr := parseTime("run_at", req.RunAt)
	if pr != nil {
		return 0, nil, pr
	}
	if req.RunAt != nil && runAt.IsZero() {
		// The zero instant would read as "not set", i.e. now.
		return 0, nil, fieldProblem("run_at", "run_at must be a real instant, got the zero time "+*req.RunAt)
	}
	delay, pr := parseDuration("delay", req.Delay)
	if pr != nil {
		return 0, nil, pr
	}
	timeout, pr := parseDuration("timeout", req.Timeout)
	if pr != nil {
		return 0, nil, pr
	}
	uniqueFor, pr := parseDuration("unique_for", req.UniqueFor)
	if pr != nil {
		return 0, nil, pr
	}
	if req.UniqueFor != nil && uniqueFor == 0 {
		// Zero would read as "no period".
		return 0, nil, fieldProblem("unique_for", fmt.Sprintf("unique_for: must be between %s and 366 days (%s), got 0", job.MinUniqueFor, job.MaxUniqueFor))
	}
	jr := job.Request{Kind: req.Kind, Args: req.Args, Tenant: tenant, Queue: req.Queue, RunAt: runAt, Delay: delay,
		Timeout: timeout, UniqueKey: req.UniqueKey, FairnessKey: req.FairnessKey, LimitKey: req.LimitKey, UniqueFor: uniqueFor, Tags: req.Tags,
		Sequence: req.Sequence.job(), Batch: req.Batch}
	if d := req.Debounce; d != nil {
		w := d.Window
		window, pr := parseDuration("debounce.window", &w)
		if pr != nil {
			return 0, nil, pr
		}
		maxWait, pr := parseDuration("debounce.max_wait", d.MaxWait)
		if pr != nil {
			return 0, nil, pr
		}
		if d.MaxWait != nil && maxWait == 0 {
			return 0, nil, fieldProblem("debounce.max_wait", "debounce.max_wait: must be at least the window (leave it out for no bound), got 0")
		}
		jr.Debounce = &job.Debounce{Key: d.Key, Window: window, MaxWait: maxWait}
	}
	if req.UniqueStates != nil {
		if len(*req.UniqueStates) == 0 {
			// Empty would read as "any state".
			return 0, nil, fieldProblem("unique_states", "unique_states: must name at least one job state (leave it out for any state)")
		}
		if len(*req.UniqueStates) > len(job.States) {
			return 0, nil, fieldProblem("unique_states", fmt.Sprintf("unique_states: at most %d states, got %d", len(job.States), len(*req.UniqueStates)))
		}
		for _, st := range *req.UniqueStates {
			jr.UniqueStates = append(jr.UniqueStates, job.State(st))
		}
	}
	if req.Priority != nil {
		jr.Priority = *req.Priority
	}
	if req.MaxAttempts != nil {
		if *req.MaxAttempts == 0 {
			return 0, nil, fieldProblem("max_attempts", "max_attempts: must be between 1 and 1000, got 0")
		}
		jr.MaxAttempts = *req.MaxAttempts
	}
	if !req.AllowUnknownKind && !s.cfg.AllowUnknownKinds {
		// The request's own problems first: a kind that is no kind at all
		// is invalid, not unknown.
		checked, err := jr.Check()
		if err != nil {
			return 0, nil, err
		}
		// This node's own kinds first: a node running without etcd has no
		// row in the nodes table.
		known := s.cfg.Jobs.Handles(checked.Kind)
		if !known {
			if known, err = s.kinds.registered(r.Context(), tx, checked.Tenant, checked.Kind); err != nil {
				return 0, nil, err
			}
		}
		if !known {
			return 0, nil, unknownKind(checked.Tenant, checked.Kind)
		}
	}
	res, err := s.cfg.Jobs.EnqueueTx(enqueueContext(r), tx, jr)
	if err != nil {
		if jr.Batch != 0 {
			return 0, nil, batchError(err, jr.Batch)
		}
		return 0, nil, err
	}
	status := http.StatusCreated
	if res.Existing || res.Debounced {
		status = http.StatusOK
	}
	return status, enqueueResponse{Job: viewJob(res.Job), Existing: res.Existing, Debounced: res.Debounced}, nil
}

// enqueueContext is r's context carrying the caller's W3C trace context
// (the traceparent and tracestate headers), which the job client stores
// with the job. The headers are hostile input, read by
// job.ParseTraceContext: anything but one strictly valid version-00
// traceparent is ignored, never refused, as the W3C specification has a
// receiver do (the job is enqueued outside any trace); an invalid
// tracestate is dropped and the traceparent kept. A span already in the
// context (a library user's server instrumentation) wins: it is the
// enqueue's own, and a child of the same headers.
func enqueueContext(r *http.Request) context.Context {
	ctx := r.Context()
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	parents := r.Header.Values("Traceparent")
	if len(parents) != 1 { // several are ambiguous: which one is the caller's?
		return ctx
	}
	sc, ok := job.ParseTraceContext(parents[0], strings.Join(r.Header.Values("Tracestate"), ","))
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

func (s *Server) listJobs(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	q := r.URL.Query()
	f := job.Filter{Tenant: tenantFilter(p, r), Queue: q.Get("queue"), Kind: q.Get("kind"), CronEntry: q.Get("cron_entry"),
		Sequence: q.Get("sequence")}
	if v := q.Get("workflow_run"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return 0, nil, paramProblem("workflow_run", "workflow_run must be a workflow run id (a positive integer), got "+strconv.Quote(v))
		}
		f.WorkflowRun = id
	}
	if v := q.Get("batch"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return 0, nil, paramProblem("batch", "batch must be a batch id (a positive integer), got "+strconv.Quote(clipText(v, 100)))
		}
		f.Batch = id
	}
	if v := q.Get("state"); v != "" {
		for _, st := range strings.Split(v, ",") {
			f.States = append(f.States, job.State(st))
		}
	}
	timers := false
	switch v := q.Get("timers"); v {
	case "", "false":
	case "true":
		timers = true
	default:
		return 0, nil, paramProblem("timers", "timers must be true or false, got "+strconv.Quote(v))
	}
	var pr *Problem
	if f.Limit, pr = limitParam(r); pr != nil {
		return 0, nil, pr
	}
	if f.BeforeID, pr = idCursor(r); pr != nil {
		return 0, nil, pr
	}
	if pr = tagsAndArgsParams(q, &f); pr != nil {
		return 0, nil, pr
	}
	f.MaxBytes = s.cfg.MaxResponseBytes
	found, err := s.cfg.Jobs.Search(r.Context(), f)
	if err != nil {
		return 0, nil, paramError(err)
	}
	jobs, more := found.Jobs, found.More
	var lastRead int64
	if len(jobs) > 0 && !timers && f.Kind == "" && f.WorkflowRun == 0 {
		lastRead = jobs[len(jobs)-1].ID
		jobs = job.WithoutTimers(jobs)
	}
	if found.WindowCut {
		// Every row read is sent or left out; the next page starts past
		// the window.
		lastRead = found.Next
	}
	views := make([]jobView, len(jobs))
	for i, j := range jobs {
		views[i] = viewJob(j)
	}
	return http.StatusOK, page[jobView]{items: views, more: more, id: func(v jobView) int64 { return v.ID }, lastRead: lastRead,
		windowCut: found.WindowCut}, nil
}

func (s *Server) getJob(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	j, err := s.cfg.Jobs.Get(r.Context(), tenantFilter(p, r), id)
	if errors.Is(err, job.ErrNotFound) {
		return 0, nil, notFoundProblem("job", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewJob(j), nil
}

func (s *Server) cancelJob(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	_, err := s.cfg.Jobs.Cancel(r.Context(), tenantFilter(p, r), id)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return 0, nil, notFoundProblem("job", id)
	case errors.Is(err, job.ErrFinished):
		return 0, nil, problem(CodeJobFinished, "the job already finished; there is nothing to cancel")
	case err != nil:
		return 0, nil, err
	}
	j, err := s.cfg.Jobs.Get(r.Context(), tenantFilter(p, r), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, viewJob(j), nil
}

type retryResponse struct {
	// Job is the job that will run: the same job for a retrying one, the
	// DLQ replay for a failed one.
	Job jobView `json:"job"`
}

func (s *Server) retryJob(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	newID, err := s.cfg.Jobs.Retry(r.Context(), tenantFilter(p, r), id)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return 0, nil, notFoundProblem("job", id)
	case errors.Is(err, job.ErrNotRetryable):
		return 0, nil, problem(CodeNotRetryable, err.Error()+"; only a retrying job, or a failed one whose DLQ entry is unreplayed, can be retried")
	case err != nil:
		return 0, nil, err
	}
	j, err := s.cfg.Jobs.Get(r.Context(), tenantFilter(p, r), newID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, retryResponse{Job: viewJob(j)}, nil
}
