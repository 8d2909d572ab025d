package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// Problem is an RFC 9457 problem document with a stable machine code.
// Every API error is one, served as application/problem+json.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Code is stable: clients branch on it, not on the text.
	Code string `json:"code"`
	// Field names the request field at fault, when there is one.
	Field string `json:"field,omitempty"`
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// Problem codes.
const (
	CodeInvalidJSON      = "invalid_json"
	CodeUnknownField     = "unknown_field"
	CodeInvalidField     = "invalid_field"
	CodeInvalidParameter = "invalid_parameter"
	CodeBodyTooLarge     = "body_too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeAlreadyExists    = "already_exists"
	CodeAlreadyReplayed  = "already_replayed"
	CodeJobFinished      = "job_finished"
	CodeNotRetryable     = "not_retryable"
	CodeIdempotencyReuse = "idempotency_key_reused"
	CodeIdempotencyBusy  = "idempotency_key_in_progress"
	CodeRateLimited      = "rate_limited"
	CodeInternal         = "internal_error"
	CodeUnavailable      = "unavailable"
)

// Remote worker codes (409): the attempt a write names no longer owns
// its job; the worker left or was lost (register again); the tenant
// holds as many remote workers as it may. And (429) a claim found nothing
// and may not wait: the tenant has as many claims waiting on the node as
// it may.
const (
	CodeLeaseLost      = "lease_lost"
	CodeWorkerGone     = "worker_gone"
	CodeTooManyWorkers = "too_many_workers"
	CodeTooManyWaiting = "too_many_waiting_claims"
)

// CodeDestinationNotAllowed: an http job's URL is, by its spelling alone,
// a destination the node refuses to call (loopback, private, the
// cluster's own endpoints…; see webhook and internal/egress).
const CodeDestinationNotAllowed = "destination_not_allowed"

// CodeStepInputsOverBudget: a workflow step could receive more inputs
// (its dependencies' results) than a step's budget,
// workflow.MaxStepInputBytes.
const CodeStepInputsOverBudget = workflow.CodeStepInputsOverBudget

// CodeReservedKind: the kind is one of Gaffer's own (job.ReservedKindPrefix,
// a workflow's sleep and signal steps), which no tenant enqueues or works.
const CodeReservedKind = "reserved_kind"

// Cron quota codes (400): the entry asked for is more than its tenant's
// quota allows (cron.Quota); the detail names the limit and its value.
const (
	CodeCronTooFrequent  = "cron_too_frequent"       // a schedule firing more often than min_interval
	CodeCronTooMany      = "cron_too_many_entries"   // the tenant holds max_entries entries
	CodeCronRateExceeded = "cron_fire_rate_exceeded" // the tenant's entries would fire more than max_fires_per_minute
)

// problemTypes gives every code the status and title it is always
// answered with: a code means one status, so handlers name only the code,
// and the OpenAPI document lists each route's codes under their status.
var problemTypes = map[string]ProblemType{
	CodeInvalidJSON:           {http.StatusBadRequest, "Request body is not valid JSON"},
	CodeUnknownField:          {http.StatusBadRequest, "Unknown field"},
	CodeInvalidField:          {http.StatusBadRequest, "Invalid field"},
	CodeInvalidParameter:      {http.StatusBadRequest, "Invalid parameter"},
	CodeDestinationNotAllowed: {http.StatusBadRequest, "Destination not allowed"},
	CodeStepInputsOverBudget:  {http.StatusBadRequest, "Step inputs over budget"},
	CodeReservedKind:          {http.StatusBadRequest, "Reserved kind"},
	CodeUnknownKind:           {http.StatusBadRequest, "Unknown kind"},
	CodeCronTooFrequent:       {http.StatusBadRequest, "Schedule fires too often for the tenant's cron quota"},
	CodeCronTooMany:           {http.StatusBadRequest, "Too many cron entries for the tenant's cron quota"},
	CodeCronRateExceeded:      {http.StatusBadRequest, "Cron fire rate over the tenant's cron quota"},
	CodeUnauthorized:          {http.StatusUnauthorized, "Authentication required"},
	CodeForbidden:             {http.StatusForbidden, "Insufficient scope"},
	CodeNotFound:              {http.StatusNotFound, "Not found"},
	CodeMethodNotAllowed:      {http.StatusMethodNotAllowed, "Method not allowed"},
	CodeConflict:              {http.StatusConflict, "Conflict"},
	CodeAlreadyExists:         {http.StatusConflict, "Already exists"},
	CodeAlreadyReplayed:       {http.StatusConflict, "DLQ entry already replayed"},
	CodeJobFinished:           {http.StatusConflict, "Job already finished"},
	CodeNotRetryable:          {http.StatusConflict, "Job cannot be retried"},
	CodeIdempotencyBusy:       {http.StatusConflict, "A request with this idempotency key is in progress"},
	CodeBodyTooLarge:          {http.StatusRequestEntityTooLarge, "Request body too large"},
	CodeUnsupportedMedia:      {http.StatusUnsupportedMediaType, "Unsupported media type"},
	CodeIdempotencyReuse:      {http.StatusUnprocessableEntity, "Idempotency key reused with a different request"},
	CodeRateLimited:           {http.StatusTooManyRequests, "Too many requests"},
	CodeInternal:              {http.StatusInternalServerError, "Internal error"},
	CodeUnavailable:           {http.StatusServiceUnavailable, "Service unavailable"},
	CodeLeaseLost:             {http.StatusConflict, "Lease lost"},
	CodeWorkerGone:            {http.StatusConflict, "Remote worker gone"},
	CodeTooManyWorkers:        {http.StatusConflict, "Too many remote workers"},
	CodeTooManyWaiting:        {http.StatusTooManyRequests, "Too many waiting claims"},
}

// ProblemType is what a problem code always comes with.
type ProblemType struct {
	Status int
	Title  string
}

// ProblemTypes returns every problem code the API answers with, and its
// status and title.
func ProblemTypes() map[string]ProblemType {
	out := make(map[string]ProblemType, len(problemTypes))
	for c, t := range problemTypes {
		out[c] = t
	}
	return out
}

// problem is the problem of code, with its status and title.
func problem(code, detail string) *Problem {
	t, ok := problemTypes[code]
	if !ok {
		panic("api: problem code " + code + " has no entry in problemTypes")
	}
	return &Problem{Type: "https://gaffer.dev/problems/" + code, Title: t.Title, Status: t.Status, Code: code, Detail: detail}
}

func fieldProblem(field, detail string) *Problem {
	p := problem(CodeInvalidField, detail)
	p.Field = field
	return p
}

func writeProblem(w http.ResponseWriter, p *Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}

// asProblem maps domain errors to problems; anything unknown is a 500
// whose detail does not leak internals.
func asProblem(err error) *Problem {
	var p *Problem
	var ve *job.ValidationError
	var se *cron.ScheduleError
	var qe *cron.QuotaError
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &ve) && problemTypes[ve.Code].Status == http.StatusBadRequest:
		// A refusal the check that made it names (an http job's
		// destination): 400 with its own code.
		pr := problem(ve.Code, ve.Error())
		pr.Field = ve.Field
		return pr
	case errors.As(err, &ve):
		return fieldProblem(ve.Field, ve.Error())
	case errors.As(err, &se):
		return fieldProblem(se.Field, se.Error())
	case errors.As(err, &qe):
		code := map[string]string{cron.LimitInterval: CodeCronTooFrequent, cron.LimitEntries: CodeCronTooMany,
			cron.LimitFiresPerMinute: CodeCronRateExceeded}[qe.Limit]
		pr := problem(code, qe.Error())
		if qe.Limit != cron.LimitEntries {
			pr.Field = "schedule"
		}
		return pr
	}
	return problem(CodeInternal, "the server failed to handle the request; see its log")
}

func notFoundProblem(what string, id any) *Problem {
	return problem(CodeNotFound, fmt.Sprintf("no %s %v", what, id))
}
