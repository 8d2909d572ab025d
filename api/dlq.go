package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/dlq"
)

// dlqFilterBody is the filter of a replay-by-filter or purge request.
type dlqFilterBody struct {
	Tenant        string  `json:"tenant"`
	Queue         string  `json:"queue"`
	Kind          string  `json:"kind"`
	FailedAfter   *string `json:"failed_after"`
	FailedBefore  *string `json:"failed_before"`
	ErrorContains string  `json:"error"`
	Limit         int     `json:"limit"`
}

func (b dlqFilterBody) filter(p auth.Principal) (dlq.Filter, *Problem) {
	tenant := p.Tenant
	if p.Tenant == auth.AllTenants {
		tenant = b.Tenant
	} else if b.Tenant != "" && b.Tenant != p.Tenant {
		return dlq.Filter{}, problem(CodeForbidden, "this token acts for tenant "+strconv.Quote(p.Tenant))
	}
	after, pr := parseTime("failed_after", b.FailedAfter)
	if pr != nil {
		return dlq.Filter{}, pr
	}
	before, pr := parseTime("failed_before", b.FailedBefore)
	if pr != nil {
		return dlq.Filter{}, pr
	}
	if b.Limit < 0 || b.Limit > 100000 {
		return dlq.Filter{}, fieldProblem("limit", "limit must be between 0 (all) and 100000")
	}
	return dlq.Filter{Tenant: tenant, Queue: b.Queue, Kind: b.Kind, FailedAfter: after, FailedBefore: before,
		ErrorContains: b.ErrorContains, Limit: b.Limit}, nil
}

func (s *Server) listDLQ(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	q := r.URL.Query()
	f := dlq.Filter{Tenant: tenantFilter(p, r), Queue: q.Get("queue"), Kind: q.Get("kind"), ErrorContains: q.Get("error")}
	var pr *Problem
	if f.FailedAfter, pr = timeParam(r, "failed_after"); pr != nil {
		return 0, nil, pr
	}
	if f.FailedBefore, pr = timeParam(r, "failed_before"); pr != nil {
		return 0, nil, pr
	}
	switch v := q.Get("replayed"); v {
	case "":
	case "true", "false":
		b := v == "true"
		f.Replayed = &b
	default:
		return 0, nil, paramProblem("replayed", "replayed must be true or false, got "+strconv.Quote(v))
	}
	if f.Limit, pr = limitParam(r); pr != nil {
		return 0, nil, pr
	}
	if f.BeforeID, pr = idCursor(r); pr != nil {
		return 0, nil, pr
	}
	f.MaxBytes = s.cfg.MaxResponseBytes
	entries, more, err := s.cfg.DLQ.ListPage(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page[dlq.Entry]{items: entries, more: more, id: func(e dlq.Entry) int64 { return e.ID }}, nil
}

func (s *Server) getDLQ(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	e, err := s.cfg.DLQ.Get(r.Context(), tenantFilter(p, r), id)
	if errors.Is(err, dlq.ErrNotFound) {
		return 0, nil, notFoundProblem("DLQ entry", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, e, nil
}

func (s *Server) replayDLQ(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	rep, err := s.cfg.DLQ.Replay(r.Context(), tenantFilter(p, r), id)
	switch {
	case errors.Is(err, dlq.ErrNotFound):
		return 0, nil, notFoundProblem("DLQ entry", id)
	case errors.Is(err, dlq.ErrAlreadyReplayed):
		return 0, nil, problem(CodeAlreadyReplayed, "entry "+strconv.FormatInt(id, 10)+" is no longer in the DLQ: "+err.Error())
	case err != nil:
		return 0, nil, err
	}
	return http.StatusCreated, rep, nil
}

type replayedResponse struct {
	Replayed []dlq.Replay `json:"replayed"`
}

func (s *Server) replayDLQMatching(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var b dlqFilterBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	f, pr := b.filter(p)
	if pr != nil {
		return 0, nil, pr
	}
	rs, err := s.cfg.DLQ.ReplayMatching(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	if rs == nil {
		rs = []dlq.Replay{}
	}
	return http.StatusOK, replayedResponse{Replayed: rs}, nil
}

type purgedResponse struct {
	Deleted int64 `json:"deleted"`
}

func (s *Server) purgeDLQ(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var b dlqFilterBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	f, pr := b.filter(p)
	if pr != nil {
		return 0, nil, pr
	}
	n, err := s.cfg.DLQ.Purge(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, purgedResponse{Deleted: n}, nil
}

func (s *Server) deleteDLQ(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	err := s.cfg.DLQ.Delete(r.Context(), tenantFilter(p, r), id)
	if errors.Is(err, dlq.ErrNotFound) {
		return 0, nil, notFoundProblem("DLQ entry", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}
