package clients

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// gaffer.d.mts is written by hand beside gaffer.mjs (JavaScript with
// JSDoc types, so that it runs without a build step): it must declare
// every name the module exports, and nothing the module lacks.
func TestTypeScriptDeclarationsMatchModule(t *testing.T) {
	mjs, err := os.ReadFile("typescript/gaffer.mjs")
	if err != nil {
		t.Fatal(err)
	}
	dts, err := os.ReadFile("typescript/gaffer.d.mts")
	if err != nil {
		t.Fatal(err)
	}
	names := func(re *regexp.Regexp, src []byte) []string {
		var out []string
		for _, m := range re.FindAllSubmatch(src, -1) {
			out = append(out, string(m[1]))
		}
		slices.Sort(out)
		return out
	}
	exported := names(regexp.MustCompile(`(?m)^export (?:async )?(?:const|class|function) (\w+)`), mjs)
	declared := names(regexp.MustCompile(`(?m)^export declare (?:const|class|function) (\w+)`), dts)
	if len(exported) == 0 || !slices.Equal(exported, declared) {
		t.Fatalf("gaffer.mjs exports %v, gaffer.d.mts declares %v", exported, declared)
	}
}
