package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
)

// Remote workers: /v1/workers and /v1/work. See docs/workers.md for the
// protocol.

type registerWorkerRequest struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Tenant  string   `json:"tenant"`
	Queues  []string `json:"queues"`
	Kinds   []string `json:"kinds"`
}

// workerView is a registered remote worker and the timings it must keep.
type workerView struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Version string   `json:"version"`
	Tenant  string   `json:"tenant"`
	Queues  []string `json:"queues"`
	Kinds   []string `json:"kinds"`
	// LeaseTTLSeconds: a claimed job's lease lasts this long from its
	// claim or last heartbeat; HeartbeatIntervalSeconds is how often to
	// heartbeat (a third of it); MaxWaitSeconds is the longest a claim
	// may wait.
	LeaseTTLSeconds          float64 `json:"lease_ttl_seconds"`
	HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
	MaxWaitSeconds           float64 `json:"max_wait_seconds"`
}

// workTenant is the tenant a worker call acts for: the token's, or ""
// (any) for a token spanning tenants.
func workTenant(p auth.Principal) string {
	if p.Tenant == auth.AllTenants {
		return ""
	}
	return p.Tenant
}

func (s *Server) registerWorker(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var req registerWorkerRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	for i, k := range req.Kinds {
		if pr := reservedKind(fmt.Sprintf("kinds[%d]", i), k); pr != nil {
			return 0, nil, pr
		}
	}
	tenant := remote.AllTenants
	if p.Tenant != auth.AllTenants || (req.Tenant != "" && req.Tenant != remote.AllTenants) {
		var pr *Problem
		if tenant, pr = writeTenant(p, req.Tenant); pr != nil {
			return 0, nil, pr
		}
	}
	w, err := s.cfg.Remote.Register(r.Context(), remote.Registration{Tenant: tenant, Name: req.Name, Version: req.Version,
		Queues: req.Queues, Kinds: req.Kinds})
	if err != nil {
		return 0, nil, workProblem(err)
	}
	if w.Kinds == nil {
		w.Kinds = []string{}
	}
	return http.StatusCreated, workerView{ID: w.ID, Name: w.Name, Version: w.Version, Tenant: w.Tenant, Queues: w.Queues, Kinds: w.Kinds,
		LeaseTTLSeconds: w.LeaseTTL.Seconds(), HeartbeatIntervalSeconds: w.HeartbeatInterval.Seconds(), MaxWaitSeconds: w.MaxWait.Seconds()}, nil
}

type leaveResponse struct {
	ID string `json:"id"`
	// Released is how many running jobs the worker held: given back, to
	// run again at once without using up an attempt.
	Released int `json:"released"`
}

func (s *Server) leaveWorker(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id := r.PathValue("id")
	n, err := s.cfg.Remote.Leave(r.Context(), workTenant(p), id)
	if err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, leaveResponse{ID: id, Released: n}, nil
}

type claimRequest struct {
	Worker string  `json:"worker"`
	Max    *int    `json:"max"`
	Wait   *string `json:"wait"`
}

// claimedJobView is a claimed job on the wire: what a worker needs to run
// it, and the lease every later call for the attempt carries.
type claimedJobView struct {
	ID          int64           `json:"id"`
	Tenant      string          `json:"tenant"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	Priority    int             `json:"priority"`
	Args        json.RawMessage `json:"args"`
	Inputs      json.RawMessage `json:"inputs,omitempty"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	// LeaseToken is a decimal string: it is a 64-bit number, more than a
	// JSON number holds exactly in many languages.
	LeaseToken     string    `json:"lease_token"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	Timeout        string    `json:"timeout,omitempty"`
	RunAt          time.Time `json:"run_at"`
	CreatedAt      time.Time `json:"created_at"`
	WorkflowRun    int64     `json:"workflow_run,omitempty"`
	Step           string    `json:"step,omitempty"`
	// TraceParent and TraceState are the W3C trace context the job was
	// enqueued in, absent for none: the worker's span of the attempt
	// links to it (or is its child).
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

type claimResponse struct {
	Jobs []claimedJobView `json:"jobs"`
	// Draining: the worker was drained; it gets no more jobs.
	Draining bool `json:"draining"`
	// Replaced: a later claim of the same worker came to wait on this
	// node, and this one answered at once, empty: one claim of a worker
	// waits at a time.
	Replaced bool `json:"replaced"`
}

// stream writes the answer job by job (the claim kept it within the
// budget).
func (c claimResponse) stream(w io.Writer, _ int) error {
	var item bytes.Buffer
	enc := json.NewEncoder(&item)
	enc.SetEscapeHTML(false)
	if _, err := io.WriteString(w, `{"jobs":[`); err != nil {
		return err
	}
	for i, j := range c.Jobs {
		item.Reset()
		if i > 0 {
			item.WriteByte(',')
		}
		if err := enc.Encode(j); err != nil {
			return err
		}
		if _, err := w.Write(bytes.TrimSuffix(item.Bytes(), []byte("\n"))); err != nil {
			return err
		}
	}
	// The other fields, as the struct encodes them (after "jobs", its
	// first).
	rest := c
	rest.Jobs = nil
	tail, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	if _, err := w.Write(append([]byte("]"), bytes.TrimPrefix(tail, []byte(`{"jobs":null`))...)); err != nil {
		return err
	}
	_, err = io.WriteString(w, "\n")
	return err
}

func (s *Server) claimWork(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var req claimRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	if req.Worker == "" {
		return 0, nil, fieldProblem("worker", "worker is required: the id POST /v1/workers returned")
	}
	c := remote.Claim{Tenant: workTenant(p), Worker: req.Worker, Max: 1}
	if req.Max != nil {
		c.Max = *req.Max
	}
	wait, pr := parseDuration("wait", req.Wait)
	if pr != nil {
		return 0, nil, pr
	}
	c.Wait = wait
	// Jobs past the budget are released in their claim's transaction,
	// claimable again at once.
	c.MaxBytes = s.cfg.MaxResponseBytes - pageTailBytes
	res, err := s.cfg.Remote.Claim(r.Context(), c)
	if err != nil {
		return 0, nil, workProblem(err)
	}
	out := claimResponse{Jobs: make([]claimedJobView, len(res.Jobs)), Draining: res.Draining, Replaced: res.Replaced}
	for i, cj := range res.Jobs {
		j := cj.Job
		out.Jobs[i] = claimedJobView{ID: j.ID, Tenant: j.Tenant, Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, Args: j.Args,
			Inputs: j.Inputs, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, LeaseToken: strconv.FormatInt(cj.Lease.Token, 10),
			LeaseExpiresAt: cj.LeaseExpiresAt, Timeout: formatDuration(j.Timeout), RunAt: j.RunAt, CreatedAt: j.CreatedAt,
			WorkflowRun: j.WorkflowRun, Step: j.Step, TraceParent: j.TraceParent, TraceState: j.TraceState}
	}
	return http.StatusOK, out, nil
}

// leaseRef names an attempt in a batch.
type leaseRef struct {
	ID         int64  `json:"id"`
	Attempt    int    `json:"attempt"`
	LeaseToken string `json:"lease_token"`
}

// lease checks an attempt's lease as a request names it; field is where
// it sits in the request ("jobs[3]", or "" at the top).
func lease(field string, id int64, attempt int, token string) (remote.Lease, *Problem) {
	at := func(name string) string {
		if field == "" {
			return name
		}
		return field + "." + name
	}
	if id < 1 {
		return remote.Lease{}, fieldProblem(at("id"), fmt.Sprintf("%s: must be a job id, got %d", at("id"), id))
	}
	if attempt < 1 {
		return remote.Lease{}, fieldProblem(at("attempt"), fmt.Sprintf("%s: must be the attempt number the claim gave (1 or more), got %d", at("attempt"), attempt))
	}
	t, err := strconv.ParseInt(token, 10, 64)
	if err != nil {
		return remote.Lease{}, fieldProblem(at("lease_token"), at("lease_token")+": must be the lease_token string the claim gave")
	}
	return remote.Lease{JobID: id, Attempt: attempt, Token: t}, nil
}

// outcomeView is one job's part of a batch write.
type outcomeView struct {
	ID int64 `json:"id"`
	// Status is "ok", "lease_lost" (the attempt no longer owns the job:
	// stop working on it and drop its result) or "not_found".
	Status string `json:"status"`
	// CancelRequested (heartbeats): stop the job and report it (fail).
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

type outcomesResponse struct {
	Jobs []outcomeView `json:"jobs"`
}

func outcomes(res []remote.Outcome) outcomesResponse {
	out := outcomesResponse{Jobs: make([]outcomeView, len(res))}
	for i, o := range res {
		v := outcomeView{ID: o.JobID, Status: "ok", CancelRequested: o.CancelRequested}
		switch {
		case errors.Is(o.Err, job.ErrLeaseLost):
			v.Status = CodeLeaseLost
		case errors.Is(o.Err, job.ErrNotFound):
			v.Status = CodeNotFound
		}
		out.Jobs[i] = v
	}
	return out
}

type heartbeatRequest struct {
	Worker string     `json:"worker"`
	Jobs   []leaseRef `json:"jobs"`
}

func (s *Server) heartbeatWork(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var req heartbeatRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	if req.Worker == "" {
		return 0, nil, fieldProblem("worker", "worker is required: the id POST /v1/workers returned")
	}
	leases := make([]remote.Lease, len(req.Jobs))
	for i, x := range req.Jobs {
		var pr *Problem
		if leases[i], pr = lease(fmt.Sprintf("jobs[%d]", i), x.ID, x.Attempt, x.LeaseToken); pr != nil {
			return 0, nil, pr
		}
	}
	res, err := s.cfg.Remote.Heartbeat(r.Context(), workTenant(p), req.Worker, leases)
	if err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, outcomes(res), nil
}

type completionRef struct {
	ID         int64           `json:"id"`
	Attempt    int             `json:"attempt"`
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result"`
}

type completeRequest struct {
	Jobs []completionRef `json:"jobs"`
}

func (s *Server) completeWork(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var req completeRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	cs := make([]remote.Completion, len(req.Jobs))
	for i, x := range req.Jobs {
		l, pr := lease(fmt.Sprintf("jobs[%d]", i), x.ID, x.Attempt, x.LeaseToken)
		if pr != nil {
			return 0, nil, pr
		}
		cs[i] = remote.Completion{Lease: l, Result: x.Result}
	}
	res, err := s.cfg.Remote.Complete(r.Context(), workTenant(p), cs)
	if err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, outcomes(res), nil
}
