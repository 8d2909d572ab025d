package api_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The curl examples of docs/shaping.md's "Tags and search" run as
// written against the API, in order: the enqueue makes a tagged job, each
// search finds it, and the bulk cancel cancels it.
func TestShapingTagExamplesRun(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/shaping.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Tags and search")
	if !ok {
		t.Fatal("docs/shaping.md has no section Tags and search")
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("no sh block in the section")
	}
	var calls []string
	for _, cmd := range strings.Split(strings.ReplaceAll(block[1], "\\\n", ""), "\n") {
		if cmd = strings.TrimSpace(cmd); strings.HasPrefix(cmd, "curl ") {
			calls = append(calls, cmd)
		}
	}
	if len(calls) != 4 {
		t.Fatalf("%d curl commands in the section, want 4 (this test knows what each does)", len(calls))
	}
	e := newEnv(t)
	urlArg := regexp.MustCompile(`"\$GAFFER(/[^"]+)"`)
	bodyArg := regexp.MustCompile(`-d '([^']*)'`)
	for i, cmd := range calls {
		method := "GET"
		if strings.Contains(cmd, "-X POST") {
			method = "POST"
		}
		path := urlArg.FindStringSubmatch(cmd)
		if path == nil {
			t.Fatalf("curl %d: no $GAFFER URL in %s", i, cmd)
		}
		var body any
		if b := bodyArg.FindStringSubmatch(cmd); b != nil {
			body = b[1]
		}
		r := e.do(e.writer, method, path[1], body)
		if r.Status != 200 && r.Status != 201 {
			t.Fatalf("%s: %d %s", cmd, r.Status, r.Body)
		}
		var out struct {
			Data  []struct{ Tags []string }
			Acted int
		}
		r.decode(t, &out)
		switch i {
		case 1, 2:
			if len(out.Data) != 1 || len(out.Data[0].Tags) != 2 {
				t.Errorf("%s: found %s, want the job enqueued", cmd, r.Body)
			}
		case 3:
			if out.Acted != 1 {
				t.Errorf("%s: %s, want the job cancelled", cmd, r.Body)
			}
		}
	}
}
