package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// Args keep what the file wrote: a date stays text, 1.50 stays 1.50;
// numbers JSON cannot spell are converted; aliases are followed; a JSON
// file reads the same as YAML.
func TestScheduleFileArgs(t *testing.T) {
	t.Parallel()
	cases := []struct{ args, want string }{
		{`{since: 2027-01-01, at: 2027-01-01T09:00:00Z, ratio: 1.50, n: 007}`, `{"since":"2027-01-01","at":"2027-01-01T09:00:00Z","ratio":1.50,"n":7}`},
		{`{hex: 0x1f, plus: +1, half: .5, neg: -2, big: 12345678901234567890}`, `{"hex":31,"plus":1,"half":0.5,"neg":-2,"big":12345678901234567890}`},
		{`{yes: true, no: false, none: null, tilde: ~, quoted: "true", list: [1, "two", {three: 3}]}`, `{"yes":true,"no":false,"none":null,"tilde":null,"quoted":"true","list":[1,"two",{"three":3}]}`},
		{`"just text"`, `"just text"`},
		{`{1: one}`, `{"1":"one"}`},
	}
	for _, c := range cases {
		entries, problems := parseSchedules([]byte("entries:\n  - name: e\n    schedule: \"@daily\"\n    job:\n      kind: k\n      args: " + c.args + "\n"))
		if len(problems) > 0 {
			t.Errorf("%s: %v", c.args, problems)
			continue
		}
		got, _ := json.Marshal(entries[0].Body["job"].(map[string]any)["args"])
		if string(got) != c.want {
			t.Errorf("args %s\n got  %s\n want %s", c.args, got, c.want)
		}
	}
	// Anchors and aliases: one template for two entries.
	yml := "base: &job {kind: k, args: {x: 1}}\n"
	if _, problems := parseSchedules([]byte(yml)); len(problems) == 0 {
		t.Error("an unknown top-level key was accepted")
	}
	entries, problems := parseSchedules([]byte("entries:\n  - name: a\n    schedule: \"@daily\"\n    job: &job {kind: k, args: {x: 1}}\n  - name: b\n    schedule: \"@hourly\"\n    job: *job\n"))
	if len(problems) > 0 || len(entries) != 2 || entries[1].Body["job"].(map[string]any)["kind"] != "k" {
		t.Fatalf("aliases: %+v %v", entries, problems)
	}
	// JSON.
	entries, problems = parseSchedules([]byte(`{"entries": [{"name": "j", "schedule": "@at 2030-01-01T00:00:00Z", "job": {"kind": "k", "args": {"a": [1, 2.50]}}, "paused": true}]}`))
	if len(problems) > 0 || len(entries) != 1 || entries[0].Body["paused"] != true {
		t.Fatalf("JSON file: %+v %v", entries, problems)
	}
	if got, _ := json.Marshal(entries[0].Body["job"].(map[string]any)["args"]); string(got) != `{"a":[1,2.50]}` {
		t.Fatalf("JSON args: %s", got)
	}
}

// Hostile files: duplicate keys, NaN, keys that are not values, a
// billion laughs.
func TestScheduleFileRefusals(t *testing.T) {
	t.Parallel()
	laughs := "entries:\n  - name: e\n    schedule: \"@daily\"\n    job:\n      kind: k\n      args:\n        a: &a [x, x, x, x, x, x, x, x, x, x]\n        b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n        c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n        d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n        e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n        f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
	for name, c := range map[string]struct{ text, want string }{
		"duplicate arg key":  {"entries:\n  - name: e\n    schedule: \"@daily\"\n    job: {kind: k, args: {a: 1, a: 2}}\n", `key "a" given twice`},
		"duplicate field":    {"entries:\n  - name: e\n    schedule: \"@daily\"\n    schedule: \"@hourly\"\n    job: {kind: k}\n", "schedule: given twice"},
		"nan":                {"entries:\n  - name: e\n    schedule: \"@daily\"\n    job: {kind: k, args: {a: .nan}}\n", "not a number JSON can hold"},
		"mapping as key":     {"entries:\n  - name: e\n    schedule: \"@daily\"\n    job: {kind: k, args: {? {a: 1} : x}}\n", "a key must be a plain value"},
		"billion laughs":     {laughs, "too large"},
		"entry not a map":    {"entries:\n  - just a string\n", "entry #1 (line 2): must be a mapping"},
		"job not a map":      {"entries:\n  - name: e\n    schedule: \"@daily\"\n    job: k\n", "job: must be a mapping"},
		"tenant in the file": {"entries:\n  - name: e\n    tenant: acme\n    schedule: \"@daily\"\n    job: {kind: k}\n", "tenant: unknown field"},
	} {
		_, problems := parseSchedules([]byte(c.text))
		var all []string
		for _, p := range problems {
			all = append(all, p.String())
		}
		if !strings.Contains(strings.Join(all, "\n"), c.want) {
			t.Errorf("%s: problems %q, want one containing %q", name, all, c.want)
		}
	}
}
