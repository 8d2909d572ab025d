package api

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// list is the envelope of every list response.
type list[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func paramProblem(name, detail string) *Problem {
	p := problem(CodeInvalidParameter, detail)
	p.Field = name
	return p
}

// paramError turns a listing's *job.ValidationError, which names the
// query parameter at fault, into its problem; other errors pass through.
func paramError(err error) error {
	if ve := (*job.ValidationError)(nil); errors.As(err, &ve) {
		return paramProblem(ve.Field, ve.Error())
	}
	return err
}

// limitParam reads ?limit= (1-1000, default 100).
func limitParam(r *http.Request) (int, *Problem) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, paramProblem("limit", fmt.Sprintf("limit must be an integer from 1 to 1000, got %q", v))
	}
	return n, nil
}

// Cursors are opaque to clients: base64 of an internal position.
func encodeCursor(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func cursorParam(r *http.Request) (string, *Problem) {
	v := r.URL.Query().Get("cursor")
	if v == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", paramProblem("cursor", "cursor is not one this API returned")
	}
	return string(b), nil
}

func idCursor(r *http.Request) (int64, *Problem) {
	c, p := cursorParam(r)
	if p != nil || c == "" {
		return 0, p
	}
	id, err := strconv.ParseInt(c, 10, 64)
	if err != nil || id <= 0 {
		return 0, paramProblem("cursor", "cursor is not one this API returned")
	}
	return id, nil
}

func pathID(r *http.Request, name string) (int64, *Problem) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, paramProblem(name, fmt.Sprintf("%s must be a positive integer, got %q", name, v))
	}
	return id, nil
}

func timeParam(r *http.Request, name string) (time.Time, *Problem) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, paramProblem(name, fmt.Sprintf("%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", name, v))
	}
	return t, nil
}

func parseDuration(field string, v *string) (time.Duration, *Problem) {
	if v == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(*v))
	if err != nil {
		return 0, fieldProblem(field, fmt.Sprintf("%s must be a duration such as \"30s\" or \"5m\", got %q", field, *v))
	}
	return d, nil
}

func parseTime(field string, v *string) (time.Time, *Problem) {
	if v == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		return time.Time{}, fieldProblem(field, fmt.Sprintf("%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", field, *v))
	}
	return t, nil
}

func formatDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}
