package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// getSequence answers where a sequence of the caller's tenant stands (a
// token spanning tenants names one with ?tenant=, default "default").
func (s *Server) getSequence(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	tenant, pr := writeTenant(p, r.URL.Query().Get("tenant"))
	if pr != nil {
		return 0, nil, pr
	}
	key := r.PathValue("key")
	st, err := s.cfg.Jobs.Sequence(r.Context(), tenant, key)
	if errors.Is(err, job.ErrNotFound) {
		return 0, nil, sequenceNotFound(key)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, st, nil
}

// resumeSequence lets a halted sequence go on (job.Client.ResumeSequence).
func (s *Server) resumeSequence(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	tenant, pr := writeTenant(p, r.URL.Query().Get("tenant"))
	if pr != nil {
		return 0, nil, pr
	}
	key := r.PathValue("key")
	_, err := s.cfg.Jobs.ResumeSequence(r.Context(), tenant, key)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return 0, nil, sequenceNotFound(key)
	case errors.Is(err, job.ErrNotHalted):
		return 0, nil, problem(CodeConflict, "sequence "+strconv.Quote(clipText(key, 100))+" is not halted: its jobs run in turn")
	case err != nil:
		return 0, nil, err
	}
	st, err := s.cfg.Jobs.Sequence(r.Context(), tenant, key)
	if errors.Is(err, job.ErrNotFound) {
		// Nothing was waiting: the resumed sequence has nothing left.
		return http.StatusOK, job.SequenceStatus{Tenant: tenant, Key: key}, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, st, nil
}

func sequenceNotFound(key string) *Problem {
	return problem(CodeNotFound, "no sequence "+strconv.Quote(clipText(key, 100))+": a sequence exists while it has jobs not yet ended, or is halted")
}
