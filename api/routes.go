package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/webhook"
	"github.com/gafferhq/gaffer/workflow"
)

// Route is one endpoint of the API. The server registers exactly the
// routes Routes returns and the OpenAPI document (openapi.json, written
// by api/cmd/openapi-gen) describes exactly those, so a route cannot be
// served without being documented.
type Route struct {
	// Method and Path make the route's net/http pattern; each {name}
	// segment of Path is a path parameter.
	Method, Path string
	// Scope is the token scope the route needs (admin implies every
	// scope); "" for a route served without a token.
	Scope string
	// Operator: only a token spanning tenants may call the route, for it
	// acts on every tenant at once (weights, pausing a queue); a tenant's
	// token is refused whatever its scopes. Routes a tenant's admin or
	// cluster:read token may call are confined by their handlers instead
	// (auth.Principal.Owns). docs/security.md tabulates every route.
	Operator    bool
	OperationID string
	Summary     string
	// Params are the route's parameters: one for each {name} of Path,
	// then query parameters and headers.
	Params []Param
	// Body is a value of the request body's Go type, nil for a route that
	// reads no body; BodyOptional: the body may be left out.
	Body         any
	BodyOptional bool
	// Responses are the route's successful answers.
	Responses []Response
	// Problems are the problem codes the route answers with: its
	// handler's, and (from Routes) those of the checks serve runs first.
	Problems []string

	plain  func(*Server, *http.Request, auth.Principal, []byte) (int, any, error)
	atomic func(*Server, *http.Request, auth.Principal, []byte, pgx.Tx) (int, any, error)
	public func(*Server, http.ResponseWriter, *http.Request)
}

// Pattern is the route's net/http pattern, "METHOD /path".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// Param is a route's path, query or header parameter.
type Param struct {
	Name string
	// In is "path", "query" or "header".
	In          string
	Description string
	// Type is a value of the parameter's Go type: "", 0, int64(0), false
	// or time.Time{}.
	Type any
	// Schema holds JSON Schema keywords the type cannot say (bounds, a
	// pattern, an enum), as a JSON object; "" for none.
	Schema string
	// Required is implied for a path parameter.
	Required bool
	// Lenient: the handler reads the value strictly and ignores one it
	// cannot use, never refusing the request (the W3C trace context).
	// Every other parameter is checked before the handler runs (see
	// routeParams.check): UTF-8 without control characters, within its
	// bound (a string's Schema must state maxLength), and by its type,
	// pattern, enum and bounds.
	Lenient bool
	// Example is a value the route takes, for the OpenAPI document; every
	// path parameter that is not an integer has one.
	Example string
	// Repeat is the most times a query parameter may be given (0: once);
	// each value is checked.
	Repeat int
	// Prefix: Name ends in "." and names every query parameter it
	// begins (args.customer for "args."), each checked by the rule. The
	// OpenAPI document cannot name them; the route's description does.
	Prefix bool
}

// Response is a route's successful answer.
type Response struct {
	Status      int
	Description string
	// Body is a value of the body's Go type; nil for an answer without
	// one (204).
	Body any
}

// Routes returns every route the server serves, in the order it
// registers them, with their complete problem codes and parameters
// (Idempotency-Key for POSTs).
func Routes() []Route {
	out := make([]Route, len(routeTable))
	for i, r := range routeTable {
		r.Params = slices.Clone(r.Params)
		if r.Method == http.MethodPost && r.Scope != "" {
			r.Params = append(r.Params, idempotencyKeyHeader)
		}
		r.Problems = append(servedProblems(r), r.Problems...)
		slices.Sort(r.Problems)
		r.Problems = slices.Compact(r.Problems)
		out[i] = r
	}
	return out
}

// servedProblems are the codes of the checks serve runs before a route's
// handler, and of the errors any handler may meet: keep them in step
// with serve, readBody, decodeStrict and idempotent.
func servedProblems(r Route) []string {
	if r.Scope == "" {
		return nil
	}
	codes := []string{CodeUnauthorized, CodeForbidden, CodeRateLimited, CodeInvalidParameter, CodeInternal, CodeUnavailable}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		// serve reads any body these methods carry.
		codes = append(codes, CodeUnsupportedMedia, CodeBodyTooLarge, CodeInvalidJSON)
	}
	if r.Body != nil {
		codes = append(codes, CodeInvalidJSON, CodeUnknownField, CodeInvalidField)
	}
	if r.Method == http.MethodPost {
		// Idempotency-Key: reused, or its first request unfinished (one
		// that breaks its rule is invalid_parameter, as every parameter).
		codes = append(codes, CodeInvalidField, CodeIdempotencyReuse, CodeIdempotencyBusy)
	}
	return codes
}

// Parameters more than one route takes.
var (
	idempotencyKeyHeader = Param{Name: "Idempotency-Key", In: "header", Type: "", Schema: `{"maxLength":255}`,
		Description: "Same key and request: the first response again (header Idempotent-Replayed: true). Same key, another request: 422."}
	tenantQuery = Param{Name: "tenant", In: "query", Type: "", Schema: nameSchema, Description: "tokens spanning tenants only: restrict to this tenant"}
	limitQuery  = Param{Name: "limit", In: "query", Type: 0, Schema: `{"minimum":1,"maximum":1000}`, Description: "default 100"}
	cursorQuery = Param{Name: "cursor", In: "query", Type: "", Schema: textSchema(`^[A-Za-z0-9_-]+$`, maxCursorLen), Description: "next_cursor from the previous page"}
	idPath      = Param{Name: "id", In: "path", Type: int64(0), Schema: `{"minimum":1}`}
	// A cron entry's name.
	cronNamePath  = Param{Name: "name", In: "path", Type: "", Schema: textSchema(cron.NamePattern, 128), Example: "nightly-report"}
	limitNamePath = Param{Name: "name", In: "path", Type: "", Schema: nameSchema, Example: "mail-per-tenant"}
	// A sequence's key: any text up to the bound ('/' escaped as %2F).
	sequenceKeyPath = Param{Name: "key", In: "path", Type: "", Schema: textSchema("", job.MaxKeyLen), Example: "customer-42",
		Description: "the sequence's key, URL-escaped ('/' as %2F)"}
	// A node's id is its operator's word (--node-id, default
	// hostname-<6 hex>): any text up to the bound.
	nodePath   = Param{Name: "id", In: "path", Type: "", Schema: textSchema("", 255), Example: "web-1-3fa2c9"}
	workerPath = Param{Name: "id", In: "path", Type: "", Schema: textSchema(`^rw_[0-9a-f]{16}$`, 19), Example: "rw_5f0c2a9e7b14d3c8",
		Description: "the id registration returned"}
	queuePath  = Param{Name: "queue", In: "path", Type: "", Schema: nameSchema, Example: "mail"}
	queueQuery = Param{Name: "queue", In: "query", Type: "", Schema: nameSchema}
	kindQuery  = Param{Name: "kind", In: "query", Type: "", Schema: textSchema(job.KindPattern, job.MaxKindLen)}
	// The W3C Trace Context headers are read strictly and never refused
	// (see enqueueContext).
	traceparentHeader = Param{Name: "traceparent", In: "header", Type: "", Schema: `{"maxLength":55}`, Lenient: true,
		Description: "W3C Trace Context of the caller, stored with the job (its traceparent field); every attempt's span links to it, " +
			"an http job passes it on, and a remote worker's claim carries it. Only one exact version-00 value is read " +
			"(00-, 32 lowercase hex digits of trace id, -, 16 of parent id, -, 2 of flags; neither id all zeros): " +
			"anything else, or the header twice, is ignored and the job is enqueued outside any trace, never refused."}
	tracestateHeader = Param{Name: "tracestate", In: "header", Type: "", Lenient: true,
		Description: "W3C Trace Context vendor state, kept with a valid traceparent (several headers are one list). " +
			"An invalid one is dropped, the traceparent kept; at most 512 bytes are stored, whole entries, " +
			"dropping those over 128 bytes first, then from the end."}
)

// maxCursorLen bounds a cursor: base64 of the longest position a list
// returns (a cron entry's tenant, a NUL and its name: 193 bytes, 258 in
// base64), with room.
const maxCursorLen = 512

// nameSchema is a queue's, tenant's or limit's name (job.ValidateName).
var nameSchema = textSchema(job.NamePattern, 64)

// textSchema is the Schema of a string parameter: the pattern it matches
// ("" for any text) and the most bytes it may have.
func textSchema(pattern string, maxLength int) string {
	b, err := json.Marshal(struct {
		Pattern   string `json:"pattern,omitempty"`
		MaxLength int    `json:"maxLength"`
	}{pattern, maxLength})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func query(name string, typ any, schema, description string) Param {
	return Param{Name: name, In: "query", Type: typ, Schema: schema, Description: description}
}

// workJobProblems are the codes of a remote worker's call for one job's
// attempt: the job is unknown to its tenant, the attempt lost its lease,
// or the worker is gone.
var workJobProblems = []string{CodeNotFound, CodeLeaseLost, CodeWorkerGone}

var runStateEnum = `{"enum":["running","completed","failed","cancelled"],"maxLength":9}`

// routeTable is the API, in the order it is registered.
var routeTable = []Route{
	{Method: "GET", Path: "/v1/openapi.json", OperationID: "getOpenAPI", Summary: "This document",
		Responses: []Response{{200, "The OpenAPI document", map[string]any{}}}, public: (*Server).serveOpenAPI},

	{Method: "POST", Path: "/v1/jobs", Scope: auth.ScopeJobsWrite, OperationID: "enqueueJob", Summary: "Enqueue a job",
		Params: []Param{traceparentHeader, tracestateHeader}, Body: enqueueRequest{},
		Responses: []Response{{201, "Enqueued", enqueueResponse{}},
			{200, "The unique key is held by an unfinished job: that job, nothing enqueued", enqueueResponse{}}},
		Problems: []string{CodeDestinationNotAllowed, CodeReservedKind, CodeUnknownKind, CodeNotFound, CodeConflict}, atomic: (*Server).enqueue},
	{Method: "GET", Path: "/v1/jobs", Scope: auth.ScopeJobsRead, OperationID: "listJobs", Summary: "List jobs, newest first",
		Params: []Param{query("state", "", textSchema(`^[a-z]+(,[a-z]+)*$`, 128), "comma-separated states"), queueQuery, kindQuery,
			query("cron_entry", "", textSchema(cron.NamePattern, 128), "the jobs a cron entry of this name made (scheduled and triggered)"),
			query("workflow_run", int64(0), `{"minimum":1}`, "the jobs of a workflow run's steps"),
			query("sequence", "", textSchema("", job.MaxKeyLen), "the jobs of one sequence (its key)"),
			query("batch", int64(0), `{"minimum":1}`, "the jobs enqueued into a batch"),
			query("timers", false, "", "list also the jobs Gaffer runs for workflows' sleep and signal steps (kinds gaffer.sleep, gaffer.signal), left out otherwise unless kind or workflow_run names them; a page leaves them out of the rows it read, so it may hold fewer items than limit, even none, and next_cursor goes on after the last row read"),
			{Name: "tag", In: "query", Type: "", Schema: textSchema(job.TagPattern, job.MaxTagLen), Repeat: job.MaxTags,
				Description: "jobs with this tag; repeat it for several (at most 16): a job must carry all of them, or with tags_match=any at least one. Indexed: searches every job of the tenant"},
			query("tags_match", "", `{"enum":["all","any"],"maxLength":3}`, "how several tag parameters combine: all (the default) or any"),
			{Name: "args.", In: "query", Type: "", Schema: fmt.Sprintf(`{"maxLength":%d}`, job.MaxArgsValueLen), Prefix: true,
				Description: "args.PATH=VALUE keeps the jobs whose args hold VALUE at PATH (dot-separated keys): VALUE is JSON when it parses as JSON (42, true, \"42\"), else a string"},
			limitQuery, cursorQuery, tenantQuery},
		Responses: []Response{{200, "Jobs", searchList[jobView]{}}}, plain: (*Server).listJobs},
	{Method: "GET", Path: "/v1/jobs/{id}", Scope: auth.ScopeJobsRead, OperationID: "getJob", Summary: "Get a job",
		Params: []Param{idPath, tenantQuery}, Responses: []Response{{200, "The job", jobView{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).getJob},
	{Method: "POST", Path: "/v1/jobs/{id}/cancel", Scope: auth.ScopeJobsWrite, OperationID: "cancelJob",
		Summary: "Cancel a job: at once if pending or retrying; a running job's handler is cancelled within a second",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{200, "The job after the request", jobView{}}},
		Problems: []string{CodeNotFound, CodeJobFinished}, plain: (*Server).cancelJob},
	{Method: "POST", Path: "/v1/jobs/{id}/retry", Scope: auth.ScopeJobsWrite, OperationID: "retryJob",
		Summary: "Run a job again now: a retrying job becomes due at once; a failed job's DLQ entry is replayed into one new job",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{200, "The job that will run", retryResponse{}}},
		Problems: []string{CodeNotFound, CodeNotRetryable}, plain: (*Server).retryJob},
	{Method: "POST", Path: "/v1/jobs/cancel", Scope: auth.ScopeJobsWrite, OperationID: "bulkCancelJobs",
		Summary: "Cancel many jobs, by ids (at most 1,000) or by filter, at most limit (10,000) per call; as POST /v1/jobs/{id}/cancel for each; more says whether jobs to cancel remain; dry_run only counts",
		Body:    bulkRequest{}, Responses: []Response{{200, "What the call did", job.BulkResult{}}}, plain: (*Server).bulkCancelJobs},
	{Method: "POST", Path: "/v1/jobs/retry", Scope: auth.ScopeJobsWrite, OperationID: "bulkRetryJobs",
		Summary: "Retry many jobs, by ids (at most 1,000) or by filter, at most limit (10,000) per call; as POST /v1/jobs/{id}/retry for each; more says whether jobs to retry remain; dry_run only counts",
		Body:    bulkRequest{}, Responses: []Response{{200, "What the call did", job.BulkResult{}}}, plain: (*Server).bulkRetryJobs},
	{Method: "POST", Path: "/v1/jobs/delete", Scope: auth.ScopeJobsWrite, OperationID: "bulkDeleteJobs",
		Summary: "Delete many jobs, by ids (at most 1,000) or by filter, at most limit (10,000) per call: never a running job, nor a job of a workflow run still running; a failed job's DLQ entry stays; more says whether jobs to delete remain; dry_run only counts",
		Body:    bulkRequest{}, Responses: []Response{{200, "What the call did", job.BulkResult{}}}, plain: (*Server).bulkDeleteJobs},

	{Method: "GET", Path: "/v1/dlq", Scope: auth.ScopeJobsRead, OperationID: "listDLQ", Summary: "List DLQ entries, newest first",
		Params: []Param{queueQuery, kindQuery,
			query("error", "", textSchema("", 255), "case-insensitive text in any attempt's error"),
			query("failed_after", time.Time{}, "", ""), query("failed_before", time.Time{}, "", ""), query("replayed", false, "", ""),
			limitQuery, cursorQuery, tenantQuery},
		Responses: []Response{{200, "Entries", list[dlq.Entry]{}}}, plain: (*Server).listDLQ},
	{Method: "GET", Path: "/v1/dlq/{id}", Scope: auth.ScopeJobsRead, OperationID: "getDLQEntry", Summary: "Get a DLQ entry",
		Params: []Param{idPath, tenantQuery}, Responses: []Response{{200, "The entry", dlq.Entry{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).getDLQ},
	{Method: "POST", Path: "/v1/dlq/{id}/replay", Scope: auth.ScopeJobsWrite, OperationID: "replayDLQEntry",
		Summary: "Replay one entry into one new job; a second replay is refused",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{201, "Replayed", dlq.Replay{}}},
		Problems: []string{CodeNotFound, CodeAlreadyReplayed}, plain: (*Server).replayDLQ},
	{Method: "POST", Path: "/v1/dlq/replay", Scope: auth.ScopeJobsWrite, OperationID: "replayDLQ",
		Summary: "Replay every unreplayed entry matching a filter",
		Body:    dlqFilterBody{}, Responses: []Response{{200, "Replayed", replayedResponse{}}}, plain: (*Server).replayDLQMatching},
	{Method: "POST", Path: "/v1/dlq/purge", Scope: auth.ScopeJobsWrite, OperationID: "purgeDLQ", Summary: "Delete every entry matching a filter",
		Body: dlqFilterBody{}, Responses: []Response{{200, "Deleted", purgedResponse{}}}, plain: (*Server).purgeDLQ},
	{Method: "DELETE", Path: "/v1/dlq/{id}", Scope: auth.ScopeJobsWrite, OperationID: "deleteDLQEntry", Summary: "Delete a DLQ entry",
		Params: []Param{idPath, tenantQuery}, Responses: []Response{{204, "Deleted", nil}},
		Problems: []string{CodeNotFound}, plain: (*Server).deleteDLQ},

	{Method: "POST", Path: "/v1/cron", Scope: auth.ScopeJobsWrite, OperationID: "createCron", Summary: "Create a cron entry",
		Body: cronCreateBody{}, Responses: []Response{{201, "Created", cronView{}}},
		Problems: []string{CodeAlreadyExists, CodeDestinationNotAllowed, CodeReservedKind, CodeCronTooFrequent, CodeCronTooMany, CodeCronRateExceeded}, plain: (*Server).createCron},
	{Method: "GET", Path: "/v1/cron", Scope: auth.ScopeJobsRead, OperationID: "listCron", Summary: "List cron entries",
		Params: []Param{limitQuery, cursorQuery, tenantQuery}, Responses: []Response{{200, "Entries", list[cronView]{}}}, plain: (*Server).listCron},
	{Method: "GET", Path: "/v1/cron/{name}", Scope: auth.ScopeJobsRead, OperationID: "getCron", Summary: "Get a cron entry",
		Params: []Param{cronNamePath, tenantQuery}, Responses: []Response{{200, "The entry", cronView{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).getCron},
	{Method: "PUT", Path: "/v1/cron/{name}", Scope: auth.ScopeJobsWrite, OperationID: "putCron",
		Summary: "Create or replace a cron entry's definition: idempotent (the same body twice changes nothing the second time, and says so)",
		Params: []Param{cronNamePath, query("tenant", "", nameSchema, `tokens spanning tenants only: the entry's tenant (default "default")`),
			query("dry_run", false, "", "check and report; write nothing")},
		Body: cronPutBody{},
		Responses: []Response{{201, "Created", cronPutResponse{}},
			{200, "Replaced, unchanged, or (dry_run) what would be", cronPutResponse{}}},
		Problems: []string{CodeDestinationNotAllowed, CodeReservedKind, CodeCronTooFrequent, CodeCronTooMany, CodeCronRateExceeded}, plain: (*Server).putCron},
	{Method: "PATCH", Path: "/v1/cron/{name}", Scope: auth.ScopeJobsWrite, OperationID: "updateCron",
		Summary: `Change a cron entry (pause with {"paused": true})`,
		Params:  []Param{cronNamePath, tenantQuery}, Body: cronPatchBody{}, Responses: []Response{{200, "The entry", cronView{}}},
		Problems: []string{CodeNotFound, CodeDestinationNotAllowed, CodeReservedKind, CodeCronTooFrequent, CodeCronRateExceeded}, plain: (*Server).updateCron},
	{Method: "DELETE", Path: "/v1/cron/{name}", Scope: auth.ScopeJobsWrite, OperationID: "deleteCron", Summary: "Delete a cron entry",
		Params: []Param{cronNamePath, tenantQuery}, Responses: []Response{{204, "Deleted", nil}},
		Problems: []string{CodeNotFound}, plain: (*Server).deleteCron},
	{Method: "GET", Path: "/v1/cron/{name}/next", Scope: auth.ScopeJobsRead, OperationID: "nextCron",
		Summary:   "The next n fire times (RFC 3339, UTC)",
		Params:    []Param{cronNamePath, query("n", 0, `{"minimum":1,"maximum":1000}`, "default 5"), tenantQuery},
		Responses: []Response{{200, "Times", nextResponse{}}}, Problems: []string{CodeNotFound}, plain: (*Server).nextCron},
	{Method: "GET", Path: "/v1/cron/{name}/history", Scope: auth.ScopeJobsRead, OperationID: "cronHistory",
		Summary: "Occurrence history, newest first",
		Params:  []Param{cronNamePath, limitQuery, cursorQuery, tenantQuery}, Responses: []Response{{200, "Occurrences", list[occurrenceView]{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).cronHistory},
	{Method: "POST", Path: "/v1/cron/{name}/trigger", Scope: auth.ScopeJobsWrite, OperationID: "triggerCron",
		Summary: "Enqueue the entry's job now",
		Params:  []Param{cronNamePath, tenantQuery}, Responses: []Response{{201, "Enqueued", triggerResponse{}}},
		Problems: []string{CodeNotFound}, atomic: (*Server).triggerCron},

	{Method: "POST", Path: "/v1/workflows", Scope: auth.ScopeJobsWrite, OperationID: "submitWorkflow",
		Summary: "Submit a workflow run: a DAG of steps",
		Body:    workflowBody{}, Responses: []Response{{201, "Started", workflow.Run{}}},
		Problems: []string{CodeDestinationNotAllowed, CodeStepInputsOverBudget}, atomic: (*Server).submitWorkflow},
	{Method: "GET", Path: "/v1/workflows", Scope: auth.ScopeJobsRead, OperationID: "listWorkflows", Summary: "List workflow runs, newest first",
		Params:    []Param{query("state", "", runStateEnum, ""), limitQuery, cursorQuery, tenantQuery},
		Responses: []Response{{200, "Runs", list[workflow.Run]{}}}, plain: (*Server).listWorkflows},
	{Method: "GET", Path: "/v1/workflows/{id}", Scope: auth.ScopeJobsRead, OperationID: "getWorkflow",
		Summary: "A run with its steps' states, attempts, results and timing",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{200, "The run", workflow.Run{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).getWorkflow},
	{Method: "POST", Path: "/v1/workflows/{id}/cancel", Scope: auth.ScopeJobsWrite, OperationID: "cancelWorkflow",
		Summary: "Cancel a run: steps not started are cancelled, running steps' handlers are cancelled",
		Params:  []Param{idPath, tenantQuery}, Responses: []Response{{200, "The run", workflow.Run{}}},
		Problems: []string{CodeNotFound, CodeConflict}, plain: (*Server).cancelWorkflow},
	{Method: "POST", Path: "/v1/workflows/{id}/signal", Scope: auth.ScopeJobsWrite, OperationID: "signalWorkflow",
		Summary: "Deliver a signal to a waiting signal step; the payload becomes its result",
		Params:  []Param{idPath, tenantQuery}, Body: signalBody{}, Responses: []Response{{200, "The run", workflow.Run{}}},
		Problems: []string{CodeNotFound, CodeConflict}, plain: (*Server).signalWorkflow},
	{Method: "POST", Path: "/v1/workflows/{id}/steps/{step}/retry", Scope: auth.ScopeJobsWrite, OperationID: "retryWorkflowStep",
		Summary:   "Run a failed step again: its job's DLQ entry is replayed into one new job; a failed run returns to running and the step's dependants run after it",
		Params:    []Param{idPath, {Name: "step", In: "path", Type: "", Schema: textSchema(workflow.StepNamePattern, 64), Example: "charge"}, tenantQuery},
		Responses: []Response{{200, "The run", workflow.Run{}}},
		Problems:  []string{CodeNotFound, CodeNotRetryable}, plain: (*Server).retryWorkflowStep},

	{Method: "GET", Path: "/v1/sequences/{key}", Scope: auth.ScopeJobsRead, OperationID: "getSequence",
		Summary: "Where a sequence stands: the job whose turn it is, the failed job that halted it, how many jobs wait (its jobs: GET /v1/jobs?sequence=)",
		Params:  []Param{sequenceKeyPath, tenantQuery}, Responses: []Response{{200, "The sequence", job.SequenceStatus{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).getSequence},
	{Method: "POST", Path: "/v1/sequences/{key}/resume", Scope: auth.ScopeJobsWrite, OperationID: "resumeSequence",
		Summary: "Let a halted sequence go on: the failed job that halted it stays failed, the oldest held job takes the turn",
		Params:  []Param{sequenceKeyPath, tenantQuery}, Responses: []Response{{200, "The sequence after", job.SequenceStatus{}}},
		Problems: []string{CodeNotFound, CodeConflict}, plain: (*Server).resumeSequence},

	{Method: "POST", Path: "/v1/webhook-secrets", Scope: auth.ScopeJobsWrite, OperationID: "rotateWebhookSecret",
		Summary: "Rotate the tenant's webhook signing secret: a new current secret (its text shown once); the previous one signs beside it for the grace period",
		Body:    rotateSecretBody{}, BodyOptional: true, Responses: []Response{{201, "The new secret", newSecretView{}}},
		Problems: []string{CodeConflict}, plain: (*Server).rotateWebhookSecret},
	{Method: "GET", Path: "/v1/webhook-secrets", Scope: auth.ScopeJobsRead, OperationID: "listWebhookSecrets",
		Summary: "The tenant's webhook secrets that still sign, newest first (without their text)",
		Params:  []Param{tenantQuery}, Responses: []Response{{200, "Secrets", list[webhook.Secret]{}}}, plain: (*Server).listWebhookSecrets},
	{Method: "DELETE", Path: "/v1/webhook-secrets/{id}", Scope: auth.ScopeJobsWrite, OperationID: "deleteWebhookSecret",
		Summary: "Stop a secret signing now",
		Params:  []Param{{Name: "id", In: "path", Type: "", Schema: textSchema(`^whs_[0-9a-f]{16}$`, 20), Example: "whs_0a1b2c3d4e5f6a7b"}, tenantQuery}, Responses: []Response{{204, "Deleted", nil}},
		Problems: []string{CodeNotFound}, plain: (*Server).deleteWebhookSecret},

	{Method: "GET", Path: "/v1/limits", Scope: auth.ScopeClusterRead, OperationID: "listLimits",
		Summary:   "Every limit with its usage now; a tenant's token sees only its own tenant's limits",
		Responses: []Response{{200, "Limits", list[limitView]{}}}, plain: (*Server).listLimits},
	{Method: "GET", Path: "/v1/limits/{name}", Scope: auth.ScopeClusterRead, OperationID: "getLimit", Summary: "A limit with its usage now",
		Params: []Param{limitNamePath}, Responses: []Response{{200, "The limit", limitView{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).getLimit},
	{Method: "PUT", Path: "/v1/limits/{name}", Scope: auth.ScopeAdmin, OperationID: "putLimit",
		Summary: "Create or replace a limit: cluster-wide, enforced by the claim. A tenant's admin token sets only limits of its own tenant " +
			"(tenant left out: its own) and replaces only its own tenant's; 409 conflict when the name is another's",
		Params: []Param{limitNamePath}, Body: limitBody{},
		Responses: []Response{{201, "Created", limitView{}}, {200, "Replaced", limitView{}}},
		Problems:  []string{CodeConflict}, plain: (*Server).putLimit},
	{Method: "DELETE", Path: "/v1/limits/{name}", Scope: auth.ScopeAdmin, OperationID: "deleteLimit",
		Summary: "Delete a limit (a tenant's admin token: only its own tenant's; others answer 404)",
		Params:  []Param{limitNamePath}, Responses: []Response{{204, "Deleted", nil}},
		Problems: []string{CodeNotFound}, plain: (*Server).deleteLimit},
	{Method: "GET", Path: "/v1/tenants", Scope: auth.ScopeClusterRead, OperationID: "listTenantWeights",
		Summary:   "Tenants whose weight in fair claiming is not the default 1 (a tenant's token: only its own)",
		Responses: []Response{{200, "Weights", list[tenantView]{}}}, plain: (*Server).listTenantWeights},
	{Method: "PUT", Path: "/v1/tenants/{tenant}", Scope: auth.ScopeAdmin, Operator: true, OperationID: "putTenantWeight",
		Summary: "Set a tenant's weight in fair claiming (1-1000, default 1)",
		Params:  []Param{{Name: "tenant", In: "path", Type: "", Schema: nameSchema, Example: "acme"}}, Body: tenantBody{},
		Responses: []Response{{200, "The weight", tenantView{}}}, plain: (*Server).putTenantWeight},

	{Method: "GET", Path: "/v1/queues", Scope: auth.ScopeJobsRead, OperationID: "listQueues",
		Summary:   "Queues with unfinished jobs, or ever paused, or worked by a live node; a tenant token sees only the queues where its tenant has unfinished jobs, with its own counts",
		Params:    []Param{tenantQuery},
		Responses: []Response{{200, "Queues", list[queueView]{}}}, plain: (*Server).listQueues},
	{Method: "POST", Path: "/v1/queues/{queue}/pause", Scope: auth.ScopeAdmin, Operator: true, OperationID: "pauseQueue", Summary: "Pause a queue cluster-wide",
		Params: []Param{queuePath}, Responses: []Response{{200, "Paused", queueState{}}}, plain: (*Server).pauseQueue},
	{Method: "POST", Path: "/v1/queues/{queue}/resume", Scope: auth.ScopeAdmin, Operator: true, OperationID: "resumeQueue", Summary: "Resume a queue",
		Params: []Param{queuePath}, Responses: []Response{{200, "Resumed", queueState{}}}, plain: (*Server).resumeQueue},

	{Method: "GET", Path: "/v1/nodes", Scope: auth.ScopeClusterRead, OperationID: "listNodes",
		Summary:   "Every node the cluster has seen, and remote workers (a tenant's token: only its own tenant's remote workers)",
		Responses: []Response{{200, "Nodes", list[nodeView]{}}}, plain: (*Server).listNodes},
	{Method: "POST", Path: "/v1/nodes/{id}/drain", Scope: auth.ScopeAdmin, OperationID: "drainNode",
		Summary: "Drain a node: it stops claiming, finishes its jobs until the deadline, releases the rest, and leaves. " +
			"A tenant's admin token drains only its own tenant's remote workers (a node: 403; another tenant's worker: 404)",
		Params: []Param{nodePath}, Body: drainBody{}, BodyOptional: true, Responses: []Response{{200, "The node", nodeView{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).drainNode},
	{Method: "POST", Path: "/v1/nodes/{id}/undrain", Scope: auth.ScopeAdmin, OperationID: "undrainNode",
		Summary: "Withdraw a drain before the node leaves (a tenant's admin token: only its own tenant's remote workers)",
		Params:  []Param{nodePath}, Responses: []Response{{200, "The node", nodeView{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).undrainNode},
	{Method: "GET", Path: "/v1/cluster", Scope: auth.ScopeClusterRead, OperationID: "getCluster",
		Summary:   "Leader, epoch, node counts, and what is degraded (a tenant's token counts only its own tenant's remote workers)",
		Responses: []Response{{200, "Cluster", clusterView{}}}, plain: (*Server).clusterStatus},

	{Method: "POST", Path: "/v1/workers", Scope: auth.ScopeWorker, OperationID: "registerWorker",
		Summary: "Register a remote worker: it then claims jobs of its tenant, queues and kinds",
		Body:    registerWorkerRequest{}, Responses: []Response{{201, "Registered", workerView{}}},
		Problems: []string{CodeTooManyWorkers, CodeReservedKind}, plain: (*Server).registerWorker},
	{Method: "DELETE", Path: "/v1/workers/{id}", Scope: auth.ScopeWorker, OperationID: "leaveWorker",
		Summary: "A remote worker stops: the jobs it still runs are released (run again at once, no attempt used up)",
		Params:  []Param{workerPath}, Responses: []Response{{200, "Left", leaveResponse{}}},
		Problems: []string{CodeNotFound}, plain: (*Server).leaveWorker},
	{Method: "POST", Path: "/v1/work/claim", Scope: auth.ScopeWorker, OperationID: "claimWork",
		Summary: "Claim up to max jobs, waiting up to wait for one when none is due; each under a new lease",
		Body:    claimRequest{}, Responses: []Response{{200, "Claimed (none when the wait ended empty, or a later claim of the worker replaced it)", claimResponse{}}},
		Problems: []string{CodeNotFound, CodeWorkerGone, CodeTooManyWaiting}, plain: (*Server).claimWork},
	{Method: "POST", Path: "/v1/work/heartbeat", Scope: auth.ScopeWorker, OperationID: "heartbeatWork",
		Summary: "Extend the leases of running attempts; each job has its outcome",
		Body:    heartbeatRequest{}, Responses: []Response{{200, "Outcomes", outcomesResponse{}}},
		Problems: []string{CodeNotFound, CodeWorkerGone}, plain: (*Server).heartbeatWork},
	{Method: "POST", Path: "/v1/work/complete", Scope: auth.ScopeWorker, OperationID: "completeWork",
		Summary: "Complete attempts with their results; each job has its outcome",
		Body:    completeRequest{}, Responses: []Response{{200, "Outcomes", outcomesResponse{}}},
		Problems: []string{CodeNotFound, CodeWorkerGone}, plain: (*Server).completeWork},
	{Method: "POST", Path: "/v1/work/jobs/{id}/heartbeat", Scope: auth.ScopeWorker, OperationID: "heartbeatJob",
		Summary: "Extend one attempt's lease; 409 lease_lost once it is no longer current",
		Params:  []Param{idPath}, Body: jobHeartbeatRequest{}, Responses: []Response{{200, "Extended", jobHeartbeatResponse{}}},
		Problems: workJobProblems, plain: (*Server).heartbeatJob},
	{Method: "POST", Path: "/v1/work/jobs/{id}/complete", Scope: auth.ScopeWorker, OperationID: "completeJob",
		Summary: "Complete one attempt; 409 lease_lost once it is no longer current",
		Params:  []Param{idPath}, Body: jobCompleteRequest{}, Responses: []Response{{200, "Completed", jobStateResponse{}}},
		Problems: workJobProblems, plain: (*Server).completeJob},
	{Method: "POST", Path: "/v1/work/jobs/{id}/fail", Scope: auth.ScopeWorker, OperationID: "failJob",
		Summary: "Fail one attempt: retried, or into the DLQ when permanent or the last; 409 lease_lost once it is no longer current",
		Params:  []Param{idPath}, Body: jobFailRequest{}, Responses: []Response{{200, "The job's state", jobStateResponse{}}},
		Problems: workJobProblems, plain: (*Server).failJob},
	{Method: "POST", Path: "/v1/work/jobs/{id}/snooze", Scope: auth.ScopeWorker, OperationID: "snoozeJob",
		Summary: "Put the job back to pending for delay without using up an attempt; 409 lease_lost once it is no longer current",
		Params:  []Param{idPath}, Body: jobSnoozeRequest{}, Responses: []Response{{200, "The job's state", jobStateResponse{}}},
		Problems: workJobProblems, plain: (*Server).snoozeJob},
	{Method: "POST", Path: "/v1/work/jobs/{id}/progress", Scope: auth.ScopeWorker, OperationID: "progressJob",
		Summary: "Report how far the attempt got; 409 lease_lost once it is no longer current",
		Params:  []Param{idPath}, Body: jobProgressRequest{}, Responses: []Response{{200, "Recorded", jobProgressResponse{}}},
		Problems: workJobProblems, plain: (*Server).progressJob},
}

// allowedMethods are the methods the mux serves r's path with, sorted as
// an Allow header lists them; none when no route has the path.
func (s *Server) allowedMethods(r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodDelete, http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodPost, http.MethodPut} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != noRoutePattern {
			allow = append(allow, m)
		}
	}
	return allow
}

// noRoutePattern catches every request under /v1 no route matches.
const noRoutePattern = "/v1/"

// noRoute answers a request no route matches: 405 with Allow when a
// route has its path with other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	if allow := s.allowedMethods(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeProblem(w, problem(CodeMethodNotAllowed, boundedEscape(r.Method, 16)+" "+boundedQuote(r.URL.Path, 256)+" is not served; allowed: "+strings.Join(allow, ", ")))
		return
	}
	writeProblem(w, problem(CodeNotFound, "no such endpoint: "+boundedEscape(r.Method, 16)+" "+boundedQuote(r.URL.Path, 256)))
}
