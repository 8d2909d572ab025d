package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gafferhq/gaffer/job"
)

// list is the envelope of every list response.
type list[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// searchList is a list that may be a search (GET /v1/jobs with args.*
// filters): SearchWindowCut says the search looked only through the
// newest 10,000 jobs the other filters select (older than the cursor),
// and older ones may match; next_cursor goes on after them.
type searchList[T any] struct {
	Data            []T    `json:"data"`
	NextCursor      string `json:"next_cursor,omitempty"`
	SearchWindowCut bool   `json:"search_window_cut,omitempty"`
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

// Every parameter a request carries is checked in one place, serve,
// before its handler runs, against its Param in the route table: the same
// text the OpenAPI document states. So a handler reads only text that is
// valid UTF-8, holds no control character (NUL among them: PostgreSQL
// refuses it, and invalid UTF-8, in text), is no longer than its bound,
// and matches its pattern, enum or type — and a new route cannot forget
// the checks, nor take a query parameter it does not declare.

// Bounds of the parameters whose type says them.
const (
	maxIntParamLen  = 20 // -9223372036854775808
	maxBoolParamLen = 5  // false
	maxTimeParamLen = 64 // RFC 3339 with nanoseconds and an offset, and room
	// maxParamNameLen bounds the name of an unknown query parameter as a
	// problem repeats it.
	maxParamNameLen = 64
)

// paramRule is a Param compiled: what serve checks its value against.
type paramRule struct {
	Param
	maxLen   int
	pattern  *regexp.Regexp
	enum     []string
	min, max *float64
}

// schemaKeywords are the JSON Schema keywords a Param's Schema may hold;
// api/internal/apidoc writes the same into the OpenAPI document.
type schemaKeywords struct {
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	MaxLength *int     `json:"maxLength"`
	Pattern   string   `json:"pattern"`
	Enum      []string `json:"enum"`
}

// compileParam makes p's rule. A string parameter must state its
// maxLength: every value a tenant sends has a bound.
func compileParam(p Param) (paramRule, error) {
	r := paramRule{Param: p}
	var k schemaKeywords
	if p.Schema != "" {
		dec := json.NewDecoder(strings.NewReader(p.Schema))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&k); err != nil {
			return r, fmt.Errorf("parameter %s: Schema %s: %w", p.Name, p.Schema, err)
		}
	}
	r.min, r.max, r.enum = k.Minimum, k.Maximum, k.Enum
	if k.Pattern != "" {
		re, err := regexp.Compile(k.Pattern)
		if err != nil {
			return r, fmt.Errorf("parameter %s: pattern: %w", p.Name, err)
		}
		r.pattern = re
	}
	switch p.Type.(type) {
	case string:
		if k.MaxLength == nil {
			return r, fmt.Errorf("parameter %s: a string parameter needs a maxLength in its Schema", p.Name)
		}
		r.maxLen = *k.MaxLength
	case int, int64:
		r.maxLen = maxIntParamLen
	case bool:
		r.maxLen = maxBoolParamLen
	case time.Time:
		r.maxLen = maxTimeParamLen
	default:
		return r, fmt.Errorf("parameter %s: type %T", p.Name, p.Type)
	}
	return r, nil
}

// check reports what is wrong with v as the value of r, or "". Its
// answer repeats v only once v is known to be short, printable text.
func (r paramRule) check(v string) string {
	if len(v) > r.maxLen {
		return fmt.Sprintf("%s must be at most %d bytes, got %d", r.Name, r.maxLen, len(v))
	}
	if !utf8.ValidString(v) {
		return fmt.Sprintf("%s must be UTF-8 text, got the bytes %s", r.Name, boundedQuote(v, r.maxLen))
	}
	for _, c := range v {
		if unicode.IsControl(c) {
			return fmt.Sprintf("%s must not hold control characters, got %U in %s", r.Name, c, boundedQuote(v, r.maxLen))
		}
	}
	if r.enum != nil && !slices.Contains(r.enum, v) {
		return fmt.Sprintf("%s must be one of %s, got %q", r.Name, strings.Join(r.enum, ", "), v)
	}
	if r.pattern != nil && !r.pattern.MatchString(v) {
		return fmt.Sprintf("%s must match %s, got %q", r.Name, r.pattern, v)
	}
	switch r.Type.(type) {
	case int, int64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || r.min != nil && float64(n) < *r.min || r.max != nil && float64(n) > *r.max {
			return fmt.Sprintf("%s must be an integer%s, got %q", r.Name, r.bounds(), v)
		}
	case bool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Sprintf("%s must be true or false, got %q", r.Name, v)
		}
	case time.Time:
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return fmt.Sprintf("%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", r.Name, v)
		}
	}
	return ""
}

func (r paramRule) bounds() string {
	switch {
	case r.min != nil && r.max != nil:
		return fmt.Sprintf(" from %v to %v", *r.min, *r.max)
	case r.min != nil:
		return fmt.Sprintf(" of at least %v", *r.min)
	case r.max != nil:
		return fmt.Sprintf(" of at most %v", *r.max)
	}
	return ""
}

// boundedQuote is s quoted with Go escapes (control characters, and
// bytes that are not UTF-8, shown as escapes; all but ASCII too), cut
// after max bytes of s: a value a tenant sent, fit to be repeated in a
// problem or a log line.
func boundedQuote(s string, max int) string { return `"` + boundedEscape(s, max) + `"` }

// boundedEscape is boundedQuote without the quotes.
func boundedEscape(s string, max int) string {
	more := ""
	if len(s) > max {
		s, more = s[:max], "..."
	}
	q := strconv.QuoteToASCII(s)
	return q[1:len(q)-1] + more
}

// routeParams are the rules of one route's parameters.
type routeParams struct {
	path, header []paramRule
	query        map[string]paramRule
	// prefixed are the rules of parameters named by their prefix
	// (Param.Prefix); at most maxPrefixed of them may be given in all.
	prefixed   []paramRule
	queryNames string // for the problem naming an unknown parameter
}

// maxPrefixed bounds how many parameters a request gives by prefix;
// maxPrefixedNameLen the name of each.
const (
	maxPrefixed        = 8
	maxPrefixedNameLen = 160
)

// queryRule is the rule of the query parameter name.
func (rp routeParams) queryRule(name string) (paramRule, bool) {
	if r, ok := rp.query[name]; ok {
		return r, true
	}
	for _, r := range rp.prefixed {
		if strings.HasPrefix(name, r.Name) && len(name) > len(r.Name) {
			return r, true
		}
	}
	return paramRule{}, false
}

// compileParams makes the rules of rt's parameters. Headers a handler
// reads leniently (the trace context) are left to it.
func compileParams(rt Route) (routeParams, error) {
	out := routeParams{query: map[string]paramRule{}}
	var names []string
	for _, p := range rt.Params {
		if p.Lenient {
			continue
		}
		r, err := compileParam(p)
		if err != nil {
			return out, err
		}
		switch p.In {
		case "path":
			out.path = append(out.path, r)
		case "query":
			if p.Prefix {
				out.prefixed = append(out.prefixed, r)
				names = append(names, p.Name+"*")
				break
			}
			out.query[p.Name] = r
			names = append(names, p.Name)
		case "header":
			out.header = append(out.header, r)
		}
	}
	out.queryNames = strings.Join(names, ", ")
	if out.queryNames == "" {
		out.queryNames = "none"
	}
	return out, nil
}

// check refuses r when a parameter breaks its rule, naming the parameter:
// a path parameter, a query parameter (one the route does not take, or
// one given twice, among them), or a checked header.
func (rp routeParams) check(r *http.Request) *Problem {
	for _, rule := range rp.path {
		if msg := rule.check(r.PathValue(rule.Name)); msg != "" {
			return paramProblem(rule.Name, msg)
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// r.URL.Query() drops what it cannot parse (a ';' separator, a
		// bad escape): the filter would silently go and the whole list
		// come back.
		return problem(CodeInvalidParameter, "the query string is malformed: "+boundedQuote(err.Error(), 200))
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // the first one at fault, the same every time
	prefixed := 0
	for _, name := range names {
		rule, ok := rp.queryRule(name)
		if !ok {
			return paramProblem(boundedEscape(name, maxParamNameLen), fmt.Sprintf("unknown query parameter %s; this route takes: %s",
				boundedQuote(name, maxParamNameLen), rp.queryNames))
		}
		if rule.Prefix {
			if prefixed++; prefixed > maxPrefixed {
				return paramProblem(boundedEscape(name, maxParamNameLen), fmt.Sprintf("at most %d parameters %s*", maxPrefixed, rule.Name))
			}
			if len(name) > maxPrefixedNameLen || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
				return paramProblem(boundedEscape(name, maxParamNameLen), fmt.Sprintf("a parameter's name is at most %d bytes of UTF-8 text without control characters", maxPrefixedNameLen))
			}
		}
		vs := q[name]
		if most := max(rule.Repeat, 1); len(vs) > most {
			if most == 1 {
				return paramProblem(name, fmt.Sprintf("%s is given %d times; give it once", name, len(vs)))
			}
			return paramProblem(name, fmt.Sprintf("%s is given %d times; give it at most %d times", name, len(vs), most))
		}
		for _, v := range vs {
			// An empty value is no value: the handler's default.
			if v == "" {
				continue
			}
			if msg := rule.check(v); msg != "" {
				return paramProblem(name, msg)
			}
		}
	}
	for _, rule := range rp.header {
		vs := r.Header.Values(rule.Name)
		if len(vs) > 1 {
			return paramProblem(rule.Name, fmt.Sprintf("the %s header is given %d times; give it once", rule.Name, len(vs)))
		}
		if len(vs) == 1 && vs[0] != "" {
			if msg := rule.check(vs[0]); msg != "" {
				return paramProblem(rule.Name, msg)
			}
		}
	}
	return nil
}
