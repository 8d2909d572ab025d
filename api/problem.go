package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
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
// holds as many remote workers as it may.
const (
	CodeLeaseLost      = "lease_lost"
	CodeWorkerGone     = "worker_gone"
	CodeTooManyWorkers = "too_many_workers"
)

// CodeDestinationNotAllowed: an http job's URL is, by its spelling alone,
// a destination the node refuses to call (loopback, private, the
// cluster's own endpoints…; see webhook and internal/egress).
const CodeDestinationNotAllowed = "destination_not_allowed"

var titles = map[string]string{
	CodeInvalidJSON: "Request body is not valid JSON", CodeUnknownField: "Unknown field",
	CodeInvalidField: "Invalid field", CodeInvalidParameter: "Invalid query parameter",
	CodeBodyTooLarge: "Request body too large", CodeUnsupportedMedia: "Unsupported media type",
	CodeUnauthorized: "Authentication required", CodeForbidden: "Insufficient scope",
	CodeNotFound: "Not found", CodeMethodNotAllowed: "Method not allowed", CodeConflict: "Conflict",
	CodeAlreadyExists: "Already exists", CodeAlreadyReplayed: "DLQ entry already replayed",
	CodeJobFinished: "Job already finished", CodeNotRetryable: "Job cannot be retried",
	CodeIdempotencyReuse: "Idempotency key reused with a different request",
	CodeIdempotencyBusy:  "A request with this idempotency key is in progress", CodeRateLimited: "Too many requests",
	CodeInternal: "Internal error", CodeUnavailable: "Service unavailable",
	CodeDestinationNotAllowed: "Destination not allowed",
	CodeLeaseLost:             "Lease lost", CodeWorkerGone: "Remote worker gone", CodeTooManyWorkers: "Too many remote workers",
}

func problem(status int, code, detail string) *Problem {
	return &Problem{Type: "https://gaffer.dev/problems/" + code, Title: titles[code], Status: status, Code: code, Detail: detail}
}

func fieldProblem(field, detail string) *Problem {
	p := problem(http.StatusBadRequest, CodeInvalidField, detail)
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
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &ve) && ve.Code != "" && titles[ve.Code] != "":
		// A refusal the check that made it names (an http job's
		// destination): 400 with its own code.
		pr := problem(http.StatusBadRequest, ve.Code, ve.Error())
		pr.Field = ve.Field
		return pr
	case errors.As(err, &ve):
		return fieldProblem(ve.Field, ve.Error())
	case errors.As(err, &se):
		return fieldProblem(se.Field, se.Error())
	}
	return problem(http.StatusInternalServerError, CodeInternal, "the server failed to handle the request; see its log")
}

func notFoundProblem(what string, id any) *Problem {
	return problem(http.StatusNotFound, CodeNotFound, fmt.Sprintf("no %s %v", what, id))
}
