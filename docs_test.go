package gaffer_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// normalized are text's non-blank lines with their whitespace collapsed,
// so that gofmt's alignment in the examples does not matter.
func normalized(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

func containsRun(hay, needle []string) bool {
	for i := 0; i+len(needle) <= len(hay); i++ {
		match := true
		for j := range needle {
			if hay[i+j] != needle[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// TestDocSnippetsAreCompiled fails when a Go snippet in README.md or
// docs/*.md is not, line for line, part of docs_examples_test.go, whose
// examples the build compiles: a documented program that no longer
// compiles (an API renamed, a type moved) fails CI instead of a reader.
func TestDocSnippetsAreCompiled(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("docs_examples_test.go")
	if err != nil {
		t.Fatal(err)
	}
	examples := normalized(string(src))
	docs, _ := filepath.Glob("docs/*.md")
	snippets := 0
	for _, f := range append([]string{"README.md"}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goBlock.FindAllStringSubmatch(string(b), -1) {
			snippets++
			if !containsRun(examples, normalized(m[1])) {
				t.Errorf("%s: this Go snippet is not in docs_examples_test.go, so nothing compiles it:\n%s", f, m[1])
			}
		}
	}
	if snippets < 8 {
		t.Fatalf("found %d Go snippets in the docs; the pattern no longer finds them", snippets)
	}
}
