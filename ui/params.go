package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// Every value a dashboard request carries — each path parameter, query
// value and form field — is checked in one place, before the page or
// action reads it (get and post call check): UTF-8 text without control
// characters, within a bound, and, for the parameters named below,
// matching their pattern. A value PostgreSQL cannot hold (NUL, bytes
// that are not UTF-8) never reaches it, and every route's path
// parameters need a rule here, or registering it panics.

// textRule is what one parameter's value must be.
type textRule struct {
	pattern *regexp.Regexp // nil: any text
	maxLen  int
}

var (
	nameRule = textRule{regexp.MustCompile(job.NamePattern), 64}
	idRule   = textRule{regexp.MustCompile(`^[0-9]{1,19}$`), 19} // positive: pathID and idParam say so
	cronRule = textRule{regexp.MustCompile(cron.NamePattern), 128}
)

// pathRules are the rules of the path parameters the routes name.
var pathRules = map[string]textRule{
	"id":     idRule,
	"node":   {nil, 255}, // a node's id is its operator's word
	"queue":  nameRule,
	"tenant": nameRule,
	"name":   cronRule,
	"limit":  nameRule,
	"step":   {regexp.MustCompile(workflow.StepNamePattern), 64},
}

// queryRules are the rules of the query parameters the pages read by
// name; any other query value or form field is text of at most
// maxFieldLen bytes.
var queryRules = map[string]textRule{
	"tenant":       nameRule,
	"after_tenant": nameRule,
	"queue":        nameRule,
	"after":        cronRule,
	"cron_entry":   cronRule,
	"sequence":     {nil, job.MaxKeyLen},
	"before":       idRule,
	"workflow_run": idRule,
	"kind":         {regexp.MustCompile(job.KindPattern), job.MaxKindLen},
	"state":        {regexp.MustCompile(`^[a-z]+$`), 32},
}

// formRules are the rules of the form fields that hold JSON (a cron
// entry's args, a signal's payload): text with line breaks, up to
// maxJSONField bytes (what the 1 MiB form holds, less the rest of it);
// the form's action checks the JSON and the payload's own bounds.
var formRules = map[string]textRule{
	"job.args": {nil, maxJSONField},
	"payload":  {nil, maxJSONField},
}

// lineBreaks are the control characters a JSON form field may hold
// (formRules): its text is checked with them as spaces.
var lineBreaks = strings.NewReplacer("\r", " ", "\n", " ", "\t", " ")

const maxJSONField = 512 << 10

// maxFieldLen bounds a query value or form field without a rule of its
// own (an error text to search for, a drain deadline, a return path).
const maxFieldLen = 1024

var wildcard = regexp.MustCompile(`\{([^}.$]+)(?:\.\.\.)?\}`)

// routeParams are the path parameters of a route's pattern, with their
// rules; it panics on one without a rule.
func routeParams(pattern string) []string {
	var names []string
	for _, m := range wildcard.FindAllStringSubmatch(pattern, -1) {
		if _, ok := pathRules[m[1]]; !ok {
			panic("ui: route " + pattern + ": path parameter {" + m[1] + "} has no rule in pathRules")
		}
		names = append(names, m[1])
	}
	return names
}

// check reports what is wrong with v as the value of name, or "".
func (r textRule) check(name, v string) string {
	if len(v) > r.maxLen {
		return fmt.Sprintf("%s must be at most %d bytes, got %d", name, r.maxLen, len(v))
	}
	if !utf8.ValidString(v) {
		return fmt.Sprintf("%s must be UTF-8 text, got %s", name, quoteBounded(v))
	}
	for _, c := range v {
		if unicode.IsControl(c) {
			return fmt.Sprintf("%s must not hold control characters, got %U in %s", name, c, quoteBounded(v))
		}
	}
	if r.pattern != nil && v != "" && !r.pattern.MatchString(v) {
		return fmt.Sprintf("%s must match %s, got %q", name, r.pattern, v)
	}
	return ""
}

// quoteBounded is s quoted with escapes for all but printable ASCII, cut
// after 64 bytes: a value fit to repeat on a page or in a log line.
func quoteBounded(s string) string {
	more := ""
	if len(s) > 64 {
		s, more = s[:64], "..."
	}
	return strconv.QuoteToASCII(s) + more
}

// checkParams reports what is wrong with r's parameters (path names
// the route's path parameters), or "": the first value at fault, the same
// every time. A POST's form must be parsed already.
func checkParams(r *http.Request, path []string) string {
	for _, name := range path {
		v := r.PathValue(name)
		if msg := pathRules[name].check(name, v); msg != "" {
			return msg
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "the query string is malformed: " + quoteBounded(err.Error())
	}
	if msg := checkValues(q, queryRules); msg != "" {
		return msg
	}
	return checkValues(r.PostForm, formRules)
}

func checkValues(vs url.Values, rules map[string]textRule) string {
	names := make([]string, 0, len(vs))
	for name := range vs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rule, ok := rules[name]
		if !ok {
			rule = textRule{maxLen: maxFieldLen}
			if msg := rule.check("a parameter's name", name); msg != "" {
				return msg
			}
		}
		for _, v := range vs[name] {
			if _, isJSON := formRules[name]; ok && isJSON {
				v = lineBreaks.Replace(v)
			}
			if msg := rule.check(name, v); msg != "" {
				return msg
			}
		}
	}
	return ""
}
