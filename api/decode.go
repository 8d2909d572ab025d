package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/gafferhq/gaffer/job"
)

// readBody reads a JSON request body, at most max bytes: 415 for another
// media type, 413 when too large.
func readBody(r *http.Request, max int64) ([]byte, *Problem) {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return nil, problem(CodeUnsupportedMedia, fmt.Sprintf("Content-Type must be application/json, got %q", ct))
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, max))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, problem(CodeBodyTooLarge, fmt.Sprintf("request body must be at most %d bytes", max))
	}
	if err != nil {
		return nil, problem(CodeInvalidJSON, "could not read the request body: "+err.Error())
	}
	return body, nil
}

// decodeStrict decodes body into v: unknown fields, wrong types, trailing
// data and NUL characters are all errors that name what is wrong.
func decodeStrict(body []byte, v any) *Problem {
	// Checked on the whole body, so every string in it (args, a cron
	// template's args, workflow step args, an http body, a signal payload,
	// a unique key) is text that jsonb stores and a handler gets unchanged.
	if err := job.CheckJSONText(body); err != nil {
		return problem(CodeInvalidJSON, err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return problem(CodeInvalidJSON, "unexpected data after the JSON value")
	}
	return nil
}

func jsonProblem(err error) *Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return problem(CodeInvalidJSON, fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn))
	case errors.As(err, &typ):
		p := fieldProblem(typ.Field, fmt.Sprintf("%s: expected %s, got JSON %s", typ.Field, typ.Type, typ.Value))
		return p
	case errors.Is(err, io.EOF):
		return problem(CodeInvalidJSON, "the body is empty; a JSON object is required")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		p := problem(CodeUnknownField, fmt.Sprintf("unknown field %q", name))
		p.Field = name
		return p
	case errors.Is(err, io.ErrUnexpectedEOF):
		return problem(CodeInvalidJSON, "the JSON ends early")
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return fieldProblem(fe.field, fe.msg)
	}
	return problem(CodeInvalidJSON, err.Error())
}

// fieldError is returned by custom UnmarshalJSON methods.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }
