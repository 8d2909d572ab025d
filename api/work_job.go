package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
)

// The one-job forms of the remote worker writes (work.go has the batched
// ones): the same writes, answered 409 lease_lost when the attempt no
// longer owns the job.

type jobHeartbeatRequest struct {
	Worker     string `json:"worker"`
	Attempt    int    `json:"attempt"`
	LeaseToken string `json:"lease_token"`
}

type jobHeartbeatResponse struct {
	ID              int64 `json:"id"`
	CancelRequested bool  `json:"cancel_requested"`
}

func (s *Server) heartbeatJob(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	var req jobHeartbeatRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	if req.Worker == "" {
		return 0, nil, fieldProblem("worker", "worker is required: the id POST /v1/workers returned")
	}
	l, pr := lease("", id, req.Attempt, req.LeaseToken)
	if pr != nil {
		return 0, nil, pr
	}
	res, err := s.cfg.Remote.Heartbeat(r.Context(), workTenant(p), req.Worker, []remote.Lease{l})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, jobHeartbeatResponse{ID: id, CancelRequested: res[0].CancelRequested}, nil
}

type jobCompleteRequest struct {
	Attempt    int             `json:"attempt"`
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result"`
}

// jobStateResponse is a job's state after a write of its attempt.
type jobStateResponse struct {
	ID    int64     `json:"id"`
	State job.State `json:"state"`
}

func (s *Server) completeJob(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	var req jobCompleteRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	l, pr := lease("", id, req.Attempt, req.LeaseToken)
	if pr != nil {
		return 0, nil, pr
	}
	res, err := s.cfg.Remote.Complete(r.Context(), workTenant(p), []remote.Completion{{Lease: l, Result: req.Result}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, jobStateResponse{ID: id, State: job.Completed}, nil
}

type jobFailRequest struct {
	Attempt    int     `json:"attempt"`
	LeaseToken string  `json:"lease_token"`
	Error      string  `json:"error"`
	Permanent  bool    `json:"permanent"`
	RetryAfter *string `json:"retry_after"`
	Stack      string  `json:"stack"`
}

func (s *Server) failJob(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	var req jobFailRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	l, pr := lease("", id, req.Attempt, req.LeaseToken)
	if pr != nil {
		return 0, nil, pr
	}
	after, pr := parseDuration("retry_after", req.RetryAfter)
	if pr != nil {
		return 0, nil, pr
	}
	state, err := s.cfg.Remote.Fail(r.Context(), workTenant(p), remote.Failure{Lease: l, Message: req.Error, Permanent: req.Permanent,
		RetryAfter: after, Stack: req.Stack})
	if err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, jobStateResponse{ID: id, State: state}, nil
}

type jobSnoozeRequest struct {
	Attempt    int     `json:"attempt"`
	LeaseToken string  `json:"lease_token"`
	Delay      *string `json:"delay"`
}

func (s *Server) snoozeJob(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	var req jobSnoozeRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	l, pr := lease("", id, req.Attempt, req.LeaseToken)
	if pr != nil {
		return 0, nil, pr
	}
	if req.Delay == nil {
		return 0, nil, fieldProblem("delay", `delay is required: how long until the job is due again, e.g. "30s"`)
	}
	delay, pr := parseDuration("delay", req.Delay)
	if pr != nil {
		return 0, nil, pr
	}
	state, err := s.cfg.Remote.Snooze(r.Context(), workTenant(p), l, delay)
	if err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, jobStateResponse{ID: id, State: state}, nil
}

type jobProgressRequest struct {
	Attempt    int      `json:"attempt"`
	LeaseToken string   `json:"lease_token"`
	Percent    *float64 `json:"percent"`
	Message    string   `json:"message"`
}

type jobProgressResponse struct {
	ID      int64   `json:"id"`
	Percent float64 `json:"percent"`
	Message string  `json:"message"`
}

func (s *Server) progressJob(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	var req jobProgressRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	l, pr := lease("", id, req.Attempt, req.LeaseToken)
	if pr != nil {
		return 0, nil, pr
	}
	if req.Percent == nil {
		return 0, nil, fieldProblem("percent", "percent is required: a number from 0 to 100")
	}
	if err := s.cfg.Remote.Progress(r.Context(), workTenant(p), l, *req.Percent, req.Message); err != nil {
		return 0, nil, workProblem(err)
	}
	return http.StatusOK, jobProgressResponse{ID: id, Percent: *req.Percent, Message: req.Message}, nil
}

// workProblem maps the remote worker errors to problems.
func workProblem(err error) error {
	switch {
	case errors.Is(err, job.ErrLeaseLost):
		return problem(CodeLeaseLost,
			"the attempt no longer owns the job (its lease expired and the job moved on, or it was released): stop working on it and drop its result")
	case errors.Is(err, remote.ErrWorkerGone):
		return problem(CodeWorkerGone, err.Error())
	case errors.Is(err, remote.ErrTooManyWorkers):
		return problem(CodeTooManyWorkers, err.Error()+"; stop some (DELETE /v1/workers/{id}) or wait for gone ones to be forgotten")
	case errors.Is(err, remote.ErrTooManyWaiting):
		return problem(CodeTooManyWaiting, err.Error()+"; claim again later, or with fewer workers waiting (one claim of a worker waits at a time)")
	case errors.Is(err, remote.ErrUnknownWorker):
		return problem(CodeNotFound, err.Error())
	case errors.Is(err, job.ErrNotFound):
		return problem(CodeNotFound, "no such job")
	}
	return err
}
