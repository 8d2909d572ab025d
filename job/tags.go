package job

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gafferhq/gaffer/store"
)

// Bounds of tags and of a search by args (docs/shaping.md, "Tags and
// search").
const (
	// MaxTags is the most tags a job carries, and the most a Filter
	// names; MaxTagLen the longest tag, in bytes.
	MaxTags   = 16
	MaxTagLen = 64
	// MaxArgsFilters is the most args conditions a Filter holds;
	// MaxArgsPathLen the longest path of one (its dotted keys) and
	// MaxArgsValueLen its longest value, both in bytes.
	MaxArgsFilters  = 8
	MaxArgsPathLen  = 128
	MaxArgsValueLen = 256
)

// TagPattern is what a tag matches: 1 to 64 letters, digits and
// _ . : / = + @ -. No comma or space, so a list of tags reads without
// quoting.
const TagPattern = `^[A-Za-z0-9_.:/=+@-]{1,64}$`

var tagPattern = regexp.MustCompile(TagPattern)

// ValidateTags checks tags as field names them ("tags" for an enqueue,
// "tag" for a filter): at most MaxTags, each matching TagPattern. The
// error names the tag at fault (field[i]).
func ValidateTags(field string, tags []string) error {
	if len(tags) > MaxTags {
		return &ValidationError{Field: field, Message: fmt.Sprintf("at most %d tags, got %d", MaxTags, len(tags))}
	}
	for i, t := range tags {
		if !tagPattern.MatchString(t) {
			return &ValidationError{Field: fmt.Sprintf("%s[%d]", field, i),
				Message: fmt.Sprintf("a tag is 1 to %d bytes of letters, digits and _ . : / = + @ -; got %q", MaxTagLen, clip([]byte(t), 80))}
		}
	}
	return nil
}

// normalTags is tags without repeats, in their first order; nil for none.
func normalTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// ArgsMatch is the args condition "the value at path is value", as
// Filter.Args holds it: path is dot-separated keys (customer, or
// customer.id), value JSON text (42, "42", true, {"a":1}) or, when it is
// not valid JSON, a string. ArgsMatch("customer.id", "42") is
// {"customer":{"id":42}}: a job matches when its args contain it (jsonb
// @>), so an array in args matches a value among its elements.
func ArgsMatch(path, value string) (json.RawMessage, error) {
	field := "args." + clip([]byte(path), 40)
	if path == "" || len(path) > MaxArgsPathLen || !validText(path) {
		return nil, &ValidationError{Field: field, Message: fmt.Sprintf("an args path is 1 to %d bytes of UTF-8 text: keys separated by dots", MaxArgsPathLen)}
	}
	if len(value) > MaxArgsValueLen || !validText(value) {
		return nil, &ValidationError{Field: field, Message: fmt.Sprintf("the value is at most %d bytes of UTF-8 text", MaxArgsValueLen)}
	}
	var v any = value
	if json.Valid([]byte(value)) {
		v = json.RawMessage(value)
	}
	keys := strings.Split(path, ".")
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i] == "" {
			return nil, &ValidationError{Field: field, Message: "an args path has no empty key (customer.id, not customer..id)"}
		}
		v = map[string]any{keys[i]: v}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &ValidationError{Field: field, Message: "the value is not valid JSON: " + err.Error()}
	}
	if err := CheckJSONText(b); err != nil {
		return nil, &ValidationError{Field: field, Message: err.Error()}
	}
	return b, nil
}

// validateArgsFilters checks a Filter's Args: at most MaxArgsFilters JSON
// objects, each at most MaxArgsPathLen+MaxArgsValueLen bytes and more.
func validateArgsFilters(args []json.RawMessage) error {
	if len(args) > MaxArgsFilters {
		return &ValidationError{Field: "args", Message: fmt.Sprintf("at most %d args conditions, got %d", MaxArgsFilters, len(args))}
	}
	for i, a := range args {
		var obj map[string]json.RawMessage
		if len(a) > 2*(MaxArgsPathLen+MaxArgsValueLen) || json.Unmarshal(a, &obj) != nil || obj == nil || CheckJSONText(a) != nil {
			return &ValidationError{Field: fmt.Sprintf("args[%d]", i),
				Message: fmt.Sprintf("must be a JSON object of at most %d bytes (ArgsMatch makes one)", 2*(MaxArgsPathLen+MaxArgsValueLen))}
		}
	}
	return nil
}

// SearchPage is a page of jobs Client.Search found.
type SearchPage struct {
	Jobs []*Job
	// More: jobs may follow; the next page is the jobs before Next.
	More bool
	Next int64
	// WindowCut: the filter's Search and Args were looked for only among
	// the SearchWindow newest jobs its other fields select (before
	// BeforeID), and older ones may match too; Next goes on after them.
	WindowCut bool
}

// Search is ListPage saying where the next page starts, including when
// the search window cut a windowed filter (Search, Args) short: a page
// may then hold fewer jobs than its limit, even none, and still have
// More. Paging on with BeforeID = Next until More is false visits every
// match.
func (c *Client) Search(ctx context.Context, f Filter) (SearchPage, error) {
	if err := f.Validate(); err != nil {
		return SearchPage{}, err
	}
	p, err := c.store.SearchJobs(ctx, f.store())
	if err != nil {
		return SearchPage{}, err
	}
	out := SearchPage{Jobs: make([]*Job, len(p.Jobs)), More: p.More, WindowCut: p.WindowEnd != 0}
	for i, r := range p.Jobs {
		out.Jobs[i] = FromRow(r)
	}
	switch {
	case p.WindowEnd != 0:
		out.Next = p.WindowEnd
	case p.More && len(p.Jobs) > 0:
		out.Next = p.Jobs[len(p.Jobs)-1].ID
	}
	return out, nil
}

// storeTags is f's tags for the store.
func (f Filter) storeTags(sf *store.JobFilter) {
	sf.Tags, sf.TagsAny, sf.Args = normalTags(f.Tags), f.TagsAny, f.Args
}
