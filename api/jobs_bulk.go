package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// bulkFilter selects jobs as GET /v1/jobs does.
type bulkFilter struct {
	State       []string `json:"state"`
	Queue       string   `json:"queue"`
	Kind        string   `json:"kind"`
	CronEntry   string   `json:"cron_entry"`
	WorkflowRun int64    `json:"workflow_run"`
	// Timers selects also Gaffer's workflow timer jobs (gaffer.sleep,
	// gaffer.signal), left out otherwise unless kind or workflow_run names
	// them, as GET /v1/jobs does.
	Timers bool `json:"timers"`
	// Tags and TagsMatch select by tags, Args by args fields
	// ({"customer": 42, "order.region": "eu"}), as GET /v1/jobs's tag,
	// tags_match and args.PATH do: args among the newest 10,000 jobs the
	// other fields select.
	Tags      []string                   `json:"tags"`
	TagsMatch string                     `json:"tags_match"`
	Args      map[string]json.RawMessage `json:"args"`
}

// bulkRequest is the body of POST /v1/jobs/cancel, /retry and /delete.
type bulkRequest struct {
	// IDs are the jobs to act on (at most 1,000); with a filter, only
	// those of them that match it.
	IDs []int64 `json:"ids"`
	// Filter selects the jobs to act on; {} selects every job of the
	// tenant (all tenants' for a spanning token without tenant).
	Filter *bulkFilter `json:"filter"`
	// Tenant confines a spanning token's call to one tenant; a tenant's
	// token may only name its own.
	Tenant string `json:"tenant"`
	// DryRun counts the jobs the action would act on and changes nothing.
	DryRun bool `json:"dry_run"`
	// Limit is the most jobs acted on (or counted) in this call, 1 to
	// 10,000 (0: 10,000).
	Limit int `json:"limit"`
}

func (s *Server) bulkCancelJobs(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	return s.bulkJobs(r, p, body, job.BulkCancel)
}

func (s *Server) bulkRetryJobs(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	return s.bulkJobs(r, p, body, job.BulkRetry)
}

func (s *Server) bulkDeleteJobs(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	return s.bulkJobs(r, p, body, job.BulkDelete)
}

func (s *Server) bulkJobs(r *http.Request, p auth.Principal, body []byte, action job.BulkAction) (int, any, error) {
	var req bulkRequest
	if pr := decodeStrict(body, &req); pr != nil {
		return 0, nil, pr
	}
	if req.IDs == nil && req.Filter == nil {
		return 0, nil, fieldProblem("ids", "give the ids of the jobs to "+string(action)+" (at most "+strconv.Itoa(job.MaxBulkIDs)+
			"), or a filter selecting them ({} for every job); the request named neither")
	}
	if req.IDs != nil && len(req.IDs) == 0 {
		return 0, nil, fieldProblem("ids", "ids is empty: name at least one job, or leave ids out and give a filter")
	}
	tenant := p.Tenant
	if p.Spans() {
		tenant = req.Tenant
		if tenant != "" {
			if err := job.ValidateName("tenant", tenant); err != nil {
				return 0, nil, asProblem(err)
			}
		}
	} else if req.Tenant != "" && req.Tenant != p.Tenant {
		return 0, nil, problem(CodeForbidden, fmt.Sprintf("this token acts for tenant %q, not %q", p.Tenant, clipText(req.Tenant, 100)))
	}
	br := job.BulkRequest{Action: action, IDs: req.IDs, DryRun: req.DryRun, Limit: req.Limit, Filter: job.Filter{Tenant: tenant}}
	if f := req.Filter; f != nil {
		br.Filter.Queue, br.Filter.Kind, br.Filter.CronEntry, br.Filter.WorkflowRun = f.Queue, f.Kind, f.CronEntry, f.WorkflowRun
		br.Filter.NoTimers = !f.Timers && f.Kind == "" && f.WorkflowRun == 0
		for _, st := range f.State {
			br.Filter.States = append(br.Filter.States, job.State(st))
		}
		br.Filter.Tags = f.Tags
		switch f.TagsMatch {
		case "", "all":
		case "any":
			br.Filter.TagsAny = true
		default:
			return 0, nil, fieldProblem("filter.tags_match", "filter.tags_match must be all or any, got "+strconv.Quote(clipText(f.TagsMatch, 40)))
		}
		if len(f.Args) > job.MaxArgsFilters {
			return 0, nil, fieldProblem("filter.args", fmt.Sprintf("filter.args: at most %d fields, got %d", job.MaxArgsFilters, len(f.Args)))
		}
		if pr := bulkArgs(f.Args, &br.Filter); pr != nil {
			return 0, nil, pr
		}
	}
	res, err := s.cfg.Jobs.Bulk(r.Context(), br)
	if ve := (*job.ValidationError)(nil); errors.As(err, &ve) {
		field := ve.Field
		switch field {
		case "state", "queue", "kind", "cron_entry", "workflow_run", "args":
			field = "filter." + field
		default:
			if strings.HasPrefix(field, "tag") {
				field = "filter.tags" + strings.TrimPrefix(field, "tag")
			}
		}
		return 0, nil, fieldProblem(field, field+": "+ve.Message)
	}
	if err != nil {
		return 0, nil, err
	}
	if res.Retried == nil && action == job.BulkRetry {
		res.Retried = []job.BulkRetried{}
	}
	return http.StatusOK, res, nil
}
