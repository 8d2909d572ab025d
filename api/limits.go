package api

import (
	"errors"
	"fmt"
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

// listLimits answers a token spanning tenants with every limit, a
// tenant's token with its own tenant's only: a shared limit's usage keys
// are other tenants' args values and destinations, its counts their
// load (G9).
func (s *Server) listLimits(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	all, err := s.cfg.Jobs.Limits(r.Context())
	if err != nil {
		return 0, nil, err
	}
	views := []limitView{}
	for _, l := range all {
		if p.Owns(l.Tenant) {
			views = append(views, viewLimit(l))
		}
	}
	return http.StatusOK, list[limitView]{Data: views}, nil
}

// getLimit answers 404 for a limit the token does not own, as for one
// that does not exist.
func (s *Server) getLimit(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	l, err := s.cfg.Jobs.Limit(r.Context(), name)
	if err == nil && !p.Owns(l.Tenant) {
		err = fmt.Errorf("%w: %q", job.ErrLimitNotFound, name)
	}
	if err != nil {
		return 0, nil, limitError(err, name)
	}
	return http.StatusOK, viewLimit(l), nil
}

// putLimit: a tenant's admin token sets only limits of its own tenant
// (the body's tenant is its own, or left out and taken as its own), and
// replaces only a limit that is already its tenant's; a shared limit is
// the operator's.
func (s *Server) putLimit(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	name := r.PathValue("name")
	var b limitBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	period, pr := parseDuration("period", b.Period)
	if pr != nil {
		return 0, nil, pr
	}
	l := job.Limit{Name: name, Queue: b.Queue, Kind: b.Kind, Tenant: b.Tenant, Key: b.Key,
		Concurrency: b.Concurrency, Rate: b.Rate, Period: period, Burst: b.Burst}
	var created bool
	var err error
	if p.Spans() {
		created, err = s.cfg.Jobs.SetLimit(r.Context(), l)
	} else {
		if b.Tenant != "" && b.Tenant != p.Tenant {
			pr := problem(CodeForbidden, fmt.Sprintf("this token acts for tenant %q: it sets only that tenant's limits, not tenant %q's", p.Tenant, b.Tenant))
			pr.Field = "tenant"
			return 0, nil, pr
		}
		l.Tenant = p.Tenant
		created, err = s.cfg.Jobs.SetTenantLimit(r.Context(), l)
	}
	if errors.Is(err, job.ErrLimitTaken) {
		return 0, nil, problem(CodeConflict, fmt.Sprintf("a limit named %q exists and is not tenant %q's: choose another name", name, p.Tenant))
	}
	if err != nil {
		return 0, nil, err
	}
	view, err := s.cfg.Jobs.Limit(r.Context(), name)
	if err != nil {
		return 0, nil, limitError(err, name)
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return status, viewLimit(view), nil
}

// deleteLimit: a tenant's admin token deletes only its tenant's limits;
// any other answers 404, as it does not see them.
func (s *Server) deleteLimit(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	var err error
	if p.Spans() {
		err = s.cfg.Jobs.DeleteLimit(r.Context(), name)
	} else {
		err = s.cfg.Jobs.DeleteTenantLimit(r.Context(), p.Tenant, name)
	}
	if err != nil {
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

// listTenantWeights answers a tenant's token with its own weight only
// (when it is not the default): other tenants' names are theirs (G9).
func (s *Server) listTenantWeights(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	weights, err := s.cfg.Jobs.TenantWeights(r.Context())
	if err != nil {
		return 0, nil, err
	}
	out := make([]tenantView, 0, len(weights))
	for t, w := range weights {
		if p.Owns(t) {
			out = append(out, tenantView{Tenant: t, Weight: w})
		}
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
