package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// searchFlags are the flags that search jobs by tags and args fields
// (docs/shaping.md, "Tags and search"): jobs list, and the bulk actions.
type searchFlags struct {
	tags    *[]string
	anyTag  *bool
	argsEqs *[]string
}

func addSearchFlags(fs *flagSet, verb string) *searchFlags {
	return &searchFlags{
		tags:    fs.Strings("tag", verb+" the jobs carrying this tag (all of them when repeated)"),
		anyTag:  fs.Bool("any-tag", "-", false, "with several --tag: jobs carrying any one of them, not all"),
		argsEqs: fs.Strings("arg", verb+" the jobs whose args hold VALUE at PATH: PATH=VALUE, e.g. customer=42 or order.region=eu (VALUE is JSON when it parses, else a string; looked for among the newest 10,000 jobs the other flags select)"),
	}
}

// given reports whether a search flag was given.
func (s *searchFlags) given() bool { return len(*s.tags) > 0 || len(*s.argsEqs) > 0 }

// args splits the --arg flags into paths and values.
func (s *searchFlags) args() ([][2]string, error) {
	var out [][2]string
	for _, a := range *s.argsEqs {
		path, value, ok := strings.Cut(a, "=")
		if !ok || path == "" {
			return nil, usageError(fmt.Sprintf("--arg takes PATH=VALUE, e.g. customer=42; got %q", a))
		}
		out = append(out, [2]string{path, value})
	}
	return out, nil
}

// query adds the search to GET /v1/jobs's parameters.
func (s *searchFlags) query(q url.Values) error {
	for _, t := range *s.tags {
		q.Add("tag", t)
	}
	if *s.anyTag {
		q.Set("tags_match", "any")
	}
	args, err := s.args()
	if err != nil {
		return err
	}
	for _, a := range args {
		q.Set("args."+a[0], a[1])
	}
	return nil
}

// filter adds the search to a bulk action's filter.
func (s *searchFlags) filter(f map[string]any) error {
	if len(*s.tags) > 0 {
		f["tags"] = *s.tags
	}
	if *s.anyTag {
		f["tags_match"] = "any"
	}
	args, err := s.args()
	if err != nil {
		return err
	}
	if len(args) > 0 {
		m := map[string]json.RawMessage{}
		for _, a := range args {
			v := []byte(a[1])
			if !json.Valid(v) {
				v, _ = json.Marshal(a[1])
			}
			m[a[0]] = v
		}
		f["args"] = m
	}
	return nil
}

// tagsCell is a job's tags in a table cell.
func tagsCell(tags []string) string {
	if len(tags) == 0 {
		return "-"
	}
	return strings.Join(tags, ",")
}
