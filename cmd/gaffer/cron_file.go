package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// A schedules file, for gaffer cron apply: YAML (or JSON, which YAML
// reads too) of the form
//
//	entries:
//	  - name: nightly-report
//	    schedule: "30 2 * * *"
//	    timezone: America/New_York
//	    job: {kind: report.build, queue: reports, args: {full: true}, timeout: 10m}
//	    missed: once
//
// Each entry holds the fields of PUT /v1/cron/{name}'s body, and its name.

// fileEntry is one entry of a schedules file, as the PUT body it becomes.
type fileEntry struct {
	Name string
	Line int
	Body map[string]any
}

// fileProblem is one thing wrong with a schedules file.
type fileProblem struct {
	Entry string // the entry's name, or "#3" when it has none
	Line  int
	Field string
	Msg   string
}

func (p fileProblem) String() string {
	var b strings.Builder
	if p.Entry != "" {
		fmt.Fprintf(&b, "entry %s", p.Entry)
	}
	switch {
	case p.Line > 0 && b.Len() > 0:
		fmt.Fprintf(&b, " (line %d)", p.Line)
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d", p.Line)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Fields an entry and its job may have; their kinds.
var (
	entryFields = map[string]string{"name": "string", "schedule": "string", "timezone": "string", "job": "job",
		"missed": "string", "missed_cap": "int", "overlap": "string", "paused": "bool"}
	jobFields = map[string]string{"kind": "string", "queue": "string", "args": "json", "priority": "int",
		"max_attempts": "int", "timeout": "string"}
)

// parseSchedules reads a schedules file. It returns every problem it
// finds, not only the first: unknown or repeated fields, wrong types, a
// missing or repeated name.
func parseSchedules(src []byte) ([]fileEntry, []fileProblem) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		msg := err.Error()
		if strings.Contains(msg, "cannot start any token") {
			msg += ` (a value starting with @, such as "@daily" or "@at …", must be quoted in YAML)`
		}
		return nil, []fileProblem{{Msg: msg}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, []fileProblem{{Msg: `the file must be a mapping with an "entries" list (entries: [...])`}}
	}
	var list *yaml.Node
	var problems []fileProblem
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch {
		case k.Value != "entries":
			problems = append(problems, fileProblem{Line: k.Line, Msg: fmt.Sprintf("unknown top-level field %q; the file holds only \"entries\"", k.Value)})
		case list != nil:
			problems = append(problems, fileProblem{Line: k.Line, Msg: `"entries" given twice`})
		case v.Kind != yaml.SequenceNode:
			problems = append(problems, fileProblem{Line: v.Line, Field: "entries", Msg: "must be a list"})
			list = v
		default:
			list = v
		}
	}
	if list == nil {
		return nil, append(problems, fileProblem{Msg: `no "entries" list (write "entries: []" to mean none)`})
	}
	if list.Kind != yaml.SequenceNode {
		return nil, problems
	}
	var out []fileEntry
	seen := map[string]int{}
	for i, n := range list.Content {
		e, ps := parseEntry(i, resolveAlias(n))
		problems = append(problems, ps...)
		if e.Name != "" {
			if line, dup := seen[e.Name]; dup {
				problems = append(problems, fileProblem{Entry: strconv.Quote(e.Name), Line: e.Line, Field: "name", Msg: fmt.Sprintf("given twice (also at line %d)", line)})
			}
			seen[e.Name] = e.Line
		}
		if len(ps) == 0 {
			out = append(out, e)
		}
	}
	return out, problems
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// parseEntry reads the i'th entry (0-based).
func parseEntry(i int, n *yaml.Node) (fileEntry, []fileProblem) {
	e := fileEntry{Line: n.Line, Body: map[string]any{}}
	label := fmt.Sprintf("#%d", i+1)
	if n.Kind != yaml.MappingNode {
		return e, []fileProblem{{Entry: label, Line: n.Line, Msg: "must be a mapping of fields (name, schedule, job, …)"}}
	}
	// The name first, so that every problem can say which entry it is in.
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == "name" {
			if v := resolveAlias(n.Content[j+1]); v.Kind == yaml.ScalarNode && v.Tag == "!!str" && v.Value != "" {
				e.Name, label = v.Value, strconv.Quote(v.Value)
			}
		}
	}
	problems := readFields(n, entryFields, label, "", e.Body)
	if e.Name == "" {
		problems = append(problems, fileProblem{Entry: label, Line: n.Line, Field: "name", Msg: "is required (a string)"})
	}
	if _, ok := e.Body["schedule"]; !ok {
		problems = append(problems, fileProblem{Entry: label, Line: n.Line, Field: "schedule", Msg: "is required"})
	}
	if _, ok := e.Body["job"]; !ok {
		problems = append(problems, fileProblem{Entry: label, Line: n.Line, Field: "job", Msg: "is required (at least its kind)"})
	}
	delete(e.Body, "name")
	return e, problems
}

// readFields reads mapping n's fields, of the kinds allowed, into out.
func readFields(n *yaml.Node, allowed map[string]string, label, prefix string, out map[string]any) []fileProblem {
	var problems []fileProblem
	bad := func(line int, field, msg string) {
		problems = append(problems, fileProblem{Entry: label, Line: line, Field: prefix + field, Msg: msg})
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], resolveAlias(n.Content[j+1])
		kind, ok := allowed[k.Value]
		switch {
		case !ok:
			bad(k.Line, k.Value, "unknown field")
			continue
		case out[k.Value] != nil:
			bad(k.Line, k.Value, "given twice")
			continue
		}
		switch kind {
		case "string":
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				bad(v.Line, k.Value, "must be a string")
				continue
			}
			out[k.Value] = v.Value // as written: "2027-01-01" stays text
		case "int":
			var x int
			if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Decode(&x) != nil {
				bad(v.Line, k.Value, fmt.Sprintf("must be a whole number, got %q", v.Value))
				continue
			}
			out[k.Value] = x
		case "bool":
			var x bool
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&x) != nil {
				bad(v.Line, k.Value, fmt.Sprintf("must be true or false, got %q", v.Value))
				continue
			}
			out[k.Value] = x
		case "json":
			raw, err := toJSON(v, 0, new(int))
			if err != nil {
				bad(v.Line, k.Value, err.Error())
				continue
			}
			out[k.Value] = json.RawMessage(raw)
		case "job":
			if v.Kind != yaml.MappingNode {
				bad(v.Line, k.Value, "must be a mapping (kind, queue, args, priority, max_attempts, timeout)")
				continue
			}
			job := map[string]any{}
			problems = append(problems, readFields(v, jobFields, label, k.Value+".", job)...)
			out[k.Value] = job
		}
	}
	return problems
}

// Bounds on one args value: a file is data, and an alias can make a
// small file a large tree.
const (
	maxArgsDepth = 64
	maxArgsNodes = 100_000
)

// toJSON turns a YAML value into JSON text. Scalars keep what was
// written (a date stays the text "2027-01-01", 1.0 stays 1.0); numbers
// that JSON cannot spell (0x1f, +1, .5) are converted; infinities and
// NaN, and mapping keys that are not scalars, are refused.
func toJSON(n *yaml.Node, depth int, nodes *int) ([]byte, error) {
	n = resolveAlias(n)
	if *nodes++; *nodes > maxArgsNodes || depth > maxArgsDepth {
		return nil, errors.New("too large or too deeply nested")
	}
	switch n.Kind {
	case yaml.MappingNode:
		var b strings.Builder
		b.WriteByte('{')
		seen := map[string]bool{}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k := resolveAlias(n.Content[j])
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key must be a plain value", k.Line)
			}
			if seen[k.Value] {
				return nil, fmt.Errorf("line %d: key %q given twice", k.Line, k.Value)
			}
			seen[k.Value] = true
			v, err := toJSON(n.Content[j+1], depth+1, nodes)
			if err != nil {
				return nil, err
			}
			key, _ := json.Marshal(k.Value)
			if j > 0 {
				b.WriteByte(',')
			}
			b.Write(key)
			b.WriteByte(':')
			b.Write(v)
		}
		b.WriteByte('}')
		return []byte(b.String()), nil
	case yaml.SequenceNode:
		parts := make([]string, len(n.Content))
		for j, c := range n.Content {
			v, err := toJSON(c, depth+1, nodes)
			if err != nil {
				return nil, err
			}
			parts[j] = string(v)
		}
		return []byte("[" + strings.Join(parts, ",") + "]"), nil
	case yaml.ScalarNode:
		return scalarJSON(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML value", n.Line)
}

func scalarJSON(n *yaml.Node) ([]byte, error) {
	switch n.Tag {
	case "!!null":
		return []byte("null"), nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, err
		}
		return json.Marshal(b)
	case "!!int", "!!float":
		if json.Valid([]byte(n.Value)) {
			return []byte(n.Value), nil // a JSON number as it is
		}
		var f float64
		if n.Tag == "!!int" {
			var i int64
			if err := n.Decode(&i); err != nil {
				return nil, fmt.Errorf("line %d: %q is not a number JSON can hold", n.Line, n.Value)
			}
			return []byte(strconv.FormatInt(i, 10)), nil
		}
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("line %d: %q is not a number JSON can hold", n.Line, n.Value)
		}
		return []byte(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	// Strings, timestamps and anything else: the text as written.
	return json.Marshal(n.Value)
}
