package job_test

import (
	"fmt"
	"strings"
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

func TestCheckJSONTextRefusesDuplicateNames(t *testing.T) {
	t.Parallel()
	many := func(dup bool) string { // more members than are compared one by one
		s := "{"
		for i := range 40 {
			s += fmt.Sprintf(`"k%d":%d,`, i, i)
		}
		if dup {
			return s + `"k7":0}`
		}
		return s + `"k40":0}`
	}
	ok := []string{
		`{"a":1,"b":2}`, `[{"a":1},{"a":1}]`, `{"a":{"a":1}}`, `{"a":"a","b":"a"}`, `{"a":[{"a":1,"b":{"a":2}}],"b":1}`,
		`{"a\"":1,"a":2}`, `{"{":"}","}":"{"}`, `{"A":1,"a":2}`, many(false),
	}
	bad := map[string]string{
		`{"a":1,"a":2}`:                    `"a"`,
		`{"a":1,"\u0061":2}`:               `"a"`,
		`{"x":{"b":1,"b":1}}`:              `"b"`,
		`[1,{"c":[],"d":0,"c":null}]`:      `"c"`,
		`{"a":{"q":1},"b":2,"a":3}`:        `"a"`,
		`{"é":1,"\u00e9":2}`:               `"é"`,
		many(true):                         `"k7"`,
		`{"a":[1,2,{"z":{}}],"a":"again"}`: `"a"`,
	}
	for _, s := range ok {
		if err := job.CheckJSONText([]byte(s)); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
	for s, name := range bad {
		err := job.CheckJSONText([]byte(s))
		if err == nil || !strings.Contains(err.Error(), name+" twice") {
			t.Errorf("%s: got %v, want an error naming %s twice", s, err, name)
		}
	}
	// A million members in one object is checked in linear time, not
	// quadratic (which would take minutes here).
	var b strings.Builder
	b.WriteString("{")
	for i := range 1_000_000 {
		fmt.Fprintf(&b, `"%d":0,`, i)
	}
	b.WriteString(`"0":1}`)
	if err := job.CheckJSONText([]byte(b.String())); err == nil {
		t.Error("a duplicate at the end of a million members was accepted")
	}
}
