package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/workflow"
)

type workflowStepBody struct {
	Name         string          `json:"name"`
	Kind         string          `json:"kind"`
	Args         json.RawMessage `json:"args"`
	Queue        string          `json:"queue"`
	Priority     int             `json:"priority"`
	MaxAttempts  int             `json:"max_attempts"`
	Timeout      *string         `json:"timeout"`
	DependsOn    []string        `json:"depends_on"`
	AllowFailure bool            `json:"allow_failure"`
	Sleep        *string         `json:"sleep"`
	Signal       *string         `json:"signal"`
}

type workflowBody struct {
	Name   string             `json:"name"`
	Tenant string             `json:"tenant"`
	Steps  []workflowStepBody `json:"steps"`
}

func (b workflowBody) definition(p auth.Principal) (workflow.Definition, *Problem) {
	tenant, pr := writeTenant(p, b.Tenant)
	if pr != nil {
		return workflow.Definition{}, pr
	}
	def := workflow.Definition{Name: b.Name, Tenant: tenant, Steps: make([]workflow.Step, len(b.Steps))}
	for i, s := range b.Steps {
		field := fmt.Sprintf("steps[%d].", i)
		timeout, pr := parseDuration(field+"timeout", s.Timeout)
		if pr != nil {
			return def, pr
		}
		sleep, pr := parseDuration(field+"sleep", s.Sleep)
		if pr != nil {
			return def, pr
		}
		signal, pr := parseDuration(field+"signal", s.Signal)
		if pr != nil {
			return def, pr
		}
		def.Steps[i] = workflow.Step{Name: s.Name, Kind: s.Kind, Args: s.Args, Queue: s.Queue, Priority: s.Priority, MaxAttempts: s.MaxAttempts,
			Timeout: timeout, DependsOn: s.DependsOn, AllowFailure: s.AllowFailure, Sleep: sleep, Signal: signal}
	}
	return def, nil
}

func workflowError(err error, id int64) error {
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		return notFoundProblem("workflow run", id)
	case errors.Is(err, workflow.ErrFinished):
		return problem(CodeConflict, "the workflow run already finished")
	case errors.Is(err, workflow.ErrNotSignalStep), errors.Is(err, workflow.ErrNotWaiting):
		return problem(CodeConflict, err.Error())
	}
	return err
}

func (s *Server) submitWorkflow(r *http.Request, p auth.Principal, body []byte, tx pgx.Tx) (int, any, error) {
	var b workflowBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	def, pr := b.definition(p)
	if pr != nil {
		return 0, nil, pr
	}
	run, err := s.cfg.Workflows.SubmitTx(r.Context(), tx, def)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, run, nil
}

func (s *Server) listWorkflows(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	limit, pr := limitParam(r)
	if pr != nil {
		return 0, nil, pr
	}
	before, pr := idCursor(r)
	if pr != nil {
		return 0, nil, pr
	}
	runs, more, err := s.cfg.Workflows.ListPage(r.Context(), tenantFilter(p, r), r.URL.Query().Get("state"), before, limit, s.cfg.MaxResponseBytes)
	if err != nil {
		return 0, nil, paramError(err)
	}
	return http.StatusOK, page[workflow.Run]{items: runs, more: more, id: func(r workflow.Run) int64 { return r.ID }}, nil
}

func (s *Server) getWorkflow(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	run, err := s.getRun(r, p, id)
	if err != nil {
		return 0, nil, workflowError(err, id)
	}
	return http.StatusOK, run, nil
}

// getRun reads a run for an answer: its steps' results within the
// response budget, those past it left out (result_omitted, with
// result_bytes; the step's job carries the result).
func (s *Server) getRun(r *http.Request, p auth.Principal, id int64) (workflow.Run, error) {
	return s.cfg.Workflows.GetBounded(r.Context(), tenantFilter(p, r), id, s.cfg.MaxResponseBytes/2)
}

func (s *Server) cancelWorkflow(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	if _, err := s.cfg.Workflows.Cancel(r.Context(), tenantFilter(p, r), id); err != nil {
		return 0, nil, workflowError(err, id)
	}
	run, err := s.getRun(r, p, id)
	if err != nil {
		return 0, nil, workflowError(err, id)
	}
	return http.StatusOK, run, nil
}

type signalBody struct {
	Step    string          `json:"step"`
	Payload json.RawMessage `json:"payload"`
}

func (s *Server) signalWorkflow(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	var b signalBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	if b.Step == "" {
		return 0, nil, fieldProblem("step", "step: is required")
	}
	if err := s.cfg.Workflows.Signal(r.Context(), tenantFilter(p, r), id, b.Step, b.Payload); err != nil {
		return 0, nil, workflowError(err, id)
	}
	run, err := s.getRun(r, p, id)
	if err != nil {
		return 0, nil, workflowError(err, id)
	}
	return http.StatusOK, run, nil
}

// retryWorkflowStep retries a failed step (workflow.Client.RetryStep).
func (s *Server) retryWorkflowStep(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	step := r.PathValue("step")
	if !stepNamePattern.MatchString(step) {
		return 0, nil, paramProblem("step", "step must be a step's name: 1-64 letters, digits, '_', '.', ':' or '-', got "+strconv.Quote(clipText(step, 100)))
	}
	if _, err := s.cfg.Workflows.RetryStep(r.Context(), tenantFilter(p, r), id, step); err != nil {
		if errors.Is(err, workflow.ErrStepNotRetryable) {
			return 0, nil, problem(CodeNotRetryable, err.Error()+"; only a failed step of a running or failed run, whose job's DLQ entry is unreplayed, can be retried")
		}
		if errors.Is(err, workflow.ErrNotFound) {
			return 0, nil, problem(CodeNotFound, err.Error())
		}
		return 0, nil, err
	}
	run, err := s.getRun(r, p, id)
	if err != nil {
		return 0, nil, workflowError(err, id)
	}
	return http.StatusOK, run, nil
}

var stepNamePattern = regexp.MustCompile(workflow.StepNamePattern)
