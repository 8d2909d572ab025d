package api

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gafferhq/gaffer/job"
)

// tagsAndArgsParams reads GET /v1/jobs's tag, tags_match and args.PATH
// parameters into f (docs/shaping.md, "Tags and search").
func tagsAndArgsParams(q url.Values, f *job.Filter) *Problem {
	for _, t := range q["tag"] {
		if t != "" {
			f.Tags = append(f.Tags, t)
		}
	}
	switch v := q.Get("tags_match"); v {
	case "", "all":
	case "any":
		f.TagsAny = true
	default:
		return paramProblem("tags_match", "tags_match must be all or any, got "+strconv.Quote(v))
	}
	var names []string
	for name := range q {
		if strings.HasPrefix(name, "args.") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		m, err := job.ArgsMatch(strings.TrimPrefix(name, "args."), q.Get(name))
		if err != nil {
			return paramProblem(boundedEscape(name, maxParamNameLen), err.Error())
		}
		f.Args = append(f.Args, m)
	}
	return nil
}

// bulkArgs is a bulk filter's args, {"PATH": value}: as args.PATH=value
// in GET /v1/jobs.
func bulkArgs(args map[string]json.RawMessage, f *job.Filter) *Problem {
	if args == nil {
		return nil
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m, err := job.ArgsMatch(k, string(args[k]))
		if err != nil {
			return fieldProblem("filter.args", "filter.args: "+err.Error())
		}
		f.Args = append(f.Args, m)
	}
	return nil
}
