package ui

import (
	"encoding/json"
	"strings"

	"github.com/gafferhq/gaffer/job"
)

// searchTerms is the jobs page's search box read as a search: tag:NAME
// words are tags, args.PATH=VALUE words args conditions, the other words
// the text looked for in kinds and args (docs/dashboard.md).
type searchTerms struct {
	Tags []string
	Args []json.RawMessage
	Text string
}

func parseSearch(s string) (searchTerms, error) {
	var t searchTerms
	var text []string
	for _, w := range strings.Fields(s) {
		switch {
		case strings.HasPrefix(w, "tag:") && len(w) > len("tag:"):
			t.Tags = append(t.Tags, strings.TrimPrefix(w, "tag:"))
		case strings.HasPrefix(w, "args.") && strings.Contains(w, "="):
			path, value, _ := strings.Cut(strings.TrimPrefix(w, "args."), "=")
			m, err := job.ArgsMatch(path, value)
			if err != nil {
				return t, badInput("%s", err.Error())
			}
			t.Args = append(t.Args, m)
		default:
			text = append(text, w)
		}
	}
	t.Text = strings.Join(text, " ")
	return t, nil
}

// TagLink is the jobs list searching for one tag, with q's other
// filters.
func (q jobsQuery) TagLink(tag string) string {
	q.Search = "tag:" + tag
	return q.Link("/ui/jobs")
}
