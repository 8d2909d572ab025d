package job_test

import (
	"testing"

	"github.com/gafferhq/gaffer/job"
)

func TestCheckJSONText(t *testing.T) {
	t.Parallel()
	ok := []string{
		`{}`, `{"a":"b"}`, `"\u00e9"`, `"\ud83d\ude00"`, `"\\ud800"`, `"\\\\"`, `"é 😀"`, `["\n\t\"\/"]`, `"\uFFFD"`,
	}
	bad := []string{
		"\"\xff\"", "{\"a\":\"\xc3\x28\"}", "\"a\x00\"", `"\u0000"`, `"\ud800"`, `"\udc00"`, `"\ud800x"`,
		`"\ud800\u0041"`, `"\ud83d\\ude00"`, `{"k":"\uDBFF"}`,
	}
	for _, s := range ok {
		if err := job.CheckJSONText([]byte(s)); err != nil {
			t.Errorf("%q refused: %v", s, err)
		}
	}
	for _, s := range bad {
		if err := job.CheckJSONText([]byte(s)); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
