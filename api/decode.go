package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

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
	if pr := checkNumbers(body); pr != nil {
		return pr
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

// checkNumbers refuses a number no float64 holds (1e999, or 400 digits):
// PostgreSQL's jsonb would keep it exactly and serve it back, and Go,
// JavaScript and Python clients then read it as infinity or not at all.
// Checked on the whole body, so args, results, progress, outputs, signal
// payloads and http bodies all are; the problem's field is where the
// number is ("args.size", "jobs[2].result.n"), bounded in length. A
// number too small for a float64 reads as 0 everywhere and is kept.
// Syntax errors are left for the decoder to report.
func checkNumbers(body []byte) *Problem {
	type frame struct {
		object  bool
		wantKey bool   // object: the next token is a member name
		key     string // object: the current member's name
		index   int    // array: the current element's index
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.object {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.index)
			}
		}
		return clipText(b.String(), maxFieldPath)
	}
	// done ends a value in the innermost container.
	done := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].wantKey = k, false
				continue
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{object: true, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				done()
			}
		case json.Number:
			if _, err := strconv.ParseFloat(string(t), 64); err != nil {
				field := path()
				return fieldProblem(field, fmt.Sprintf("%s: the number %s is beyond the range of a 64-bit float (about ±1.8e308), "+
					"which clients in Go, JavaScript and Python cannot read back as a number", field, clipText(string(t), 40)))
			}
			done()
		default:
			done()
		}
	}
}

// maxFieldPath bounds a field path a problem names: member names are the
// tenant's.
const maxFieldPath = 200

// clipText shortens s to at most n bytes, on a character boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
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
