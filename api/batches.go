package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// batchJobBody is a job enqueued into a batch.
type batchJobBody struct {
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	Queue       string          `json:"queue"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	Timeout     *string         `json:"timeout"`
	FairnessKey string          `json:"fairness_key"`
	LimitKey    string          `json:"limit_key"`
}

// batchCallbackBody is a batch's callback job.
type batchCallbackBody struct {
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args"`
	Queue       string          `json:"queue"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	Timeout     *string         `json:"timeout"`
}

type openBatchBody struct {
	Tenant   string            `json:"tenant"`
	Callback batchCallbackBody `json:"callback"`
	// Jobs are enqueued into the batch at once; Close closes it after
	// them (a batch in one call).
	Jobs  []batchJobBody `json:"jobs"`
	Close bool           `json:"close"`
}

type addBatchJobsBody struct {
	Jobs []batchJobBody `json:"jobs"`
}

type addBatchJobsResponse struct {
	IDs []int64 `json:"ids"`
}

// maxBatchJobsPerCall bounds the jobs one request adds to a batch.
const maxBatchJobsPerCall = 10000

func batchJobs(tenant string, batch int64, bodies []batchJobBody) ([]job.Request, error) {
	if len(bodies) > maxBatchJobsPerCall {
		return nil, fieldProblem("jobs", fmt.Sprintf("jobs: at most %d a call, got %d", maxBatchJobsPerCall, len(bodies)))
	}
	out := make([]job.Request, len(bodies))
	for i, b := range bodies {
		field := fmt.Sprintf("jobs[%d].", i)
		if pr := reservedKind(field+"kind", b.Kind); pr != nil {
			return nil, pr
		}
		timeout, pr := parseDuration(field+"timeout", b.Timeout)
		if pr != nil {
			return nil, pr
		}
		out[i] = job.Request{Kind: b.Kind, Args: b.Args, Tenant: tenant, Queue: b.Queue, Priority: b.Priority,
			MaxAttempts: b.MaxAttempts, Timeout: timeout, FairnessKey: b.FairnessKey, LimitKey: b.LimitKey, Batch: batch}
		if _, err := out[i].Check(); err != nil {
			var ve *job.ValidationError
			if errors.As(err, &ve) {
				return nil, fieldProblem(field+ve.Field, field+ve.Error())
			}
			return nil, err
		}
	}
	return out, nil
}

func batchError(err error, id int64) error {
	switch {
	case errors.Is(err, job.ErrBatchNotFound):
		return notFoundProblem("batch", id)
	case errors.Is(err, job.ErrBatchClosed):
		return problem(CodeConflict, fmt.Sprintf("batch %d is closed: it takes no more jobs", id))
	}
	return err
}

// openBatch opens a batch, and with jobs and close fills and closes it,
// all in the request's transaction: a refusal anywhere writes nothing.
func (s *Server) openBatch(r *http.Request, p auth.Principal, body []byte, tx pgx.Tx) (int, any, error) {
	var b openBatchBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	tenant, pr := writeTenant(p, b.Tenant)
	if pr != nil {
		return 0, nil, pr
	}
	if pr := reservedKind("callback.kind", b.Callback.Kind); pr != nil {
		return 0, nil, pr
	}
	timeout, pr := parseDuration("callback.timeout", b.Callback.Timeout)
	if pr != nil {
		return 0, nil, pr
	}
	// The jobs are checked before anything is written.
	if _, err := batchJobs(tenant, 1, b.Jobs); err != nil {
		return 0, nil, err
	}
	ctx := r.Context()
	batch, err := s.cfg.Jobs.OpenBatchTx(ctx, tx, job.BatchRequest{Tenant: tenant, Kind: b.Callback.Kind, Queue: b.Callback.Queue,
		Args: b.Callback.Args, Priority: b.Callback.Priority, MaxAttempts: b.Callback.MaxAttempts, Timeout: timeout})
	if err != nil {
		return 0, nil, err
	}
	if len(b.Jobs) > 0 {
		reqs, err := batchJobs(tenant, batch.ID, b.Jobs)
		if err != nil {
			return 0, nil, err
		}
		if _, err := s.cfg.Jobs.EnqueueManyTx(enqueueContext(r), tx, reqs); err != nil {
			return 0, nil, batchError(err, batch.ID)
		}
		batch.Total = int64(len(reqs))
		batch.Counts[job.Pending] = int64(len(reqs))
	}
	if b.Close {
		closed, err := s.cfg.Jobs.CloseBatchTx(ctx, tx, tenant, batch.ID)
		if err != nil {
			return 0, nil, batchError(err, batch.ID)
		}
		closed.Counts[job.Pending] = batch.Counts[job.Pending]
		batch = closed
	}
	return http.StatusCreated, batch, nil
}

// batchTenant is the tenant whose batch id is: the token's, or for a
// spanning token the batch's own ("" reads any).
func batchTenant(p auth.Principal, r *http.Request) string { return tenantFilter(p, r) }

func (s *Server) addBatchJobs(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	var b addBatchJobsBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	if len(b.Jobs) == 0 {
		return 0, nil, fieldProblem("jobs", "jobs: at least one job")
	}
	batch, err := s.cfg.Jobs.GetBatch(r.Context(), batchTenant(p, r), id)
	if err != nil {
		return 0, nil, batchError(err, id)
	}
	reqs, err := batchJobs(batch.Tenant, id, b.Jobs)
	if err != nil {
		return 0, nil, err
	}
	ids, err := s.cfg.Jobs.EnqueueMany(enqueueContext(r), reqs)
	if err != nil {
		return 0, nil, batchError(err, id)
	}
	return http.StatusCreated, addBatchJobsResponse{IDs: ids}, nil
}

func (s *Server) getBatch(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	b, err := s.cfg.Jobs.GetBatch(r.Context(), batchTenant(p, r), id)
	if err != nil {
		return 0, nil, batchError(err, id)
	}
	return http.StatusOK, b, nil
}

func (s *Server) closeBatch(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	b, err := s.cfg.Jobs.CloseBatch(r.Context(), batchTenant(p, r), id)
	if err != nil {
		return 0, nil, batchError(err, id)
	}
	return http.StatusOK, b, nil
}

func (s *Server) cancelBatch(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id, pr := pathID(r, "id")
	if pr != nil {
		return 0, nil, pr
	}
	b, err := s.cfg.Jobs.CancelBatch(r.Context(), batchTenant(p, r), id)
	if err != nil {
		return 0, nil, batchError(err, id)
	}
	return http.StatusOK, b, nil
}

func (s *Server) listBatches(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	limit, pr := limitParam(r)
	if pr != nil {
		return 0, nil, pr
	}
	before, pr := idCursor(r)
	if pr != nil {
		return 0, nil, pr
	}
	// One more than asked: whether a next page exists.
	bs, err := s.cfg.Jobs.ListBatches(r.Context(), job.BatchFilter{Tenant: tenantFilter(p, r), State: r.URL.Query().Get("state"),
		BeforeID: before, Limit: limit + 1})
	if err != nil {
		return 0, nil, err
	}
	more := len(bs) > limit
	if more {
		bs = bs[:limit]
	}
	return http.StatusOK, page[*job.Batch]{items: bs, more: more, id: func(b *job.Batch) int64 { return b.ID }}, nil
}

var batchStateEnum = `{"enum":["open","closed","cancelled","finished"],"maxLength":9}`

var batchRoutes = []Route{
	{Method: "POST", Path: "/v1/batches", Scope: auth.ScopeJobsWrite, OperationID: "openBatch",
		Summary: "Open a batch with a callback job; optionally enqueue jobs into it and close it in the same call",
		Body:    openBatchBody{}, Responses: []Response{{201, "The batch", job.Batch{}}},
		Problems: []string{CodeConflict, CodeDestinationNotAllowed}, atomic: (*Server).openBatch},
	{Method: "GET", Path: "/v1/batches", Scope: auth.ScopeJobsRead, OperationID: "listBatches", Summary: "List batches, newest first",
		Params:    []Param{query("state", "", batchStateEnum, ""), limitQuery, cursorQuery, tenantQuery},
		Responses: []Response{{200, "Batches", list[job.Batch]{}}}, plain: (*Server).listBatches},
	{Method: "GET", Path: "/v1/batches/{id}", Scope: auth.ScopeJobsRead, OperationID: "getBatch",
		Summary: "A batch: its state, its jobs' counts by state, its callback job",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{200, "The batch", job.Batch{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).getBatch},
	{Method: "POST", Path: "/v1/batches/{id}/jobs", Scope: auth.ScopeJobsWrite, OperationID: "addBatchJobs",
		Summary: "Enqueue jobs into an open batch",
		Params:  []Param{idPath, tenantQuery}, Body: addBatchJobsBody{}, Responses: []Response{{201, "The jobs' ids, in order", addBatchJobsResponse{}}},
		Problems: []string{CodeNotFound, CodeConflict}, plain: (*Server).addBatchJobs},
	{Method: "POST", Path: "/v1/batches/{id}/close", Scope: auth.ScopeJobsWrite, OperationID: "closeBatch",
		Summary: "Close a batch: it takes no more jobs; its callback is enqueued once every job of it is final",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{200, "The batch", job.Batch{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).closeBatch},
	{Method: "POST", Path: "/v1/batches/{id}/cancel", Scope: auth.ScopeJobsWrite, OperationID: "cancelBatch",
		Summary: "Cancel a batch: it is closed, its unfinished jobs cancelled; its callback still fires once",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{200, "The batch", job.Batch{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).cancelBatch},
}

func init() { routeTable = append(routeTable, batchRoutes...) }
