package api

import (
	"errors"
	"net/http"
	"sort"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// limitBody is a limit as PUT: every field but the name (in the path).
type limitBody struct {
	Queue       string  `json:"queue"`
	Kind        string  `json:"kind"`
	Tenant      string  `json:"tenant"`
	Key         string  `json:"key"`
	Concurrency int     `json:"concurrency"`
	Rate        int     `json:"rate"`
	Period      *string `json:"period"`
	Burst       int     `json:"burst"`
}

// limitView is a limit with its usage on the wire.
type limitView struct {
	job.LimitUsage
	Period string `json:"period,omitempty"`
}

func viewLimit(l job.LimitUsage) limitView {
	return limitView{LimitUsage: l, Period: formatDuration(l.Period)}
}

func limitError(err error, name string) error {
	if errors.Is(err, job.ErrLimitNotFound) {
		return notFoundProblem("limit", name)
	}
	return err
}

func (s *Server) listLimits(r *http.Request, _ auth.Principal, _ []byte) (int, any, error) {
	all, err := s.cfg.Jobs.Limits(r.Context())
	if err != nil {
		return 0, nil, err
	}
	views := make([]limitView, len(all))
	for i, l := range all {
		views[i] = viewLimit(l)
	}
	return http.StatusOK, list[limitView]{Data: views}, nil
}

func (s *Server) getLimit(r *http.Request, _ auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	l, err := s.cfg.Jobs.Limit(r.Context(), name)
	if err != nil {
		return 0, nil, limitError(err, name)
	}
	return http.StatusOK, viewLimit(l), nil
}

func (s *Server) putLimit(r *http.Request, _ auth.Principal, body []byte) (int, any, error) {
	name := r.PathValue("name")
	var b limitBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	period, pr := parseDuration("period", b.Period)
	if pr != nil {
		return 0, nil, pr
	}
	created, err := s.cfg.Jobs.SetLimit(r.Context(), job.Limit{Name: name, Queue: b.Queue, Kind: b.Kind, Tenant: b.Tenant, Key: b.Key,
		Concurrency: b.Concurrency, Rate: b.Rate, Period: period, Burst: b.Burst})
	if err != nil {
		return 0, nil, err
	}
	l, err := s.cfg.Jobs.Limit(r.Context(), name)
	if err != nil {
		return 0, nil, limitError(err, name)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return status, viewLimit(l), nil
}

func (s *Server) deleteLimit(r *http.Request, _ auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	if err := s.cfg.Jobs.DeleteLimit(r.Context(), name); err != nil {
		return 0, nil, limitError(err, name)
	}
	return http.StatusNoContent, nil, nil
}

type tenantView struct {
	Tenant string `json:"tenant"`
	Weight int    `json:"weight"`
}

type tenantBody struct {
	Weight int `json:"weight"`
}

func (s *Server) listTenantWeights(r *http.Request, _ auth.Principal, _ []byte) (int, any, error) {
	weights, err := s.cfg.Jobs.TenantWeights(r.Context())
	if err != nil {
		return 0, nil, err
	}
	out := make([]tenantView, 0, len(weights))
	for t, w := range weights {
		out = append(out, tenantView{Tenant: t, Weight: w})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return http.StatusOK, list[tenantView]{Data: out}, nil
}

func (s *Server) putTenantWeight(r *http.Request, _ auth.Principal, body []byte) (int, any, error) {
	tenant := r.PathValue("tenant")
	var b tenantBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	if err := s.cfg.Jobs.SetTenantWeight(r.Context(), tenant, b.Weight); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, tenantView{Tenant: tenant, Weight: b.Weight}, nil
}
