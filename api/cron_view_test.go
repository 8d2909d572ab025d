package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
)

// fillAll sets every exported field of v, recursively, to a value that
// is not its zero.
func fillAll(t *testing.T, v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)))
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(`{"a":1}`))
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillAll(t, v.Elem())
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillAll(t, v.Field(i))
			}
		}
	case v.Kind() == reflect.String:
		v.SetString("x")
	case v.CanInt():
		v.SetInt(int64(time.Second))
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	default:
		t.Fatalf("fillAll: no value for %s", v.Type())
	}
}

func members(t *testing.T, v any) map[string]json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// cronView spells out cron.Entry's members (embedding the entry would
// give two next_run_at and two job members, which the OpenAPI generator
// cannot tell apart). It must carry every one, as the entry has it, so
// that a member added to the entry reaches the API and its document.
func TestCronViewHasEveryEntryMember(t *testing.T) {
	var e cron.Entry
	fillAll(t, reflect.ValueOf(&e).Elem())
	e.Done, e.Paused = false, false // a done or paused entry's next_run_at is null
	entry, view := members(t, e), members(t, viewCron(e))
	var job map[string]json.RawMessage
	if err := json.Unmarshal(view["job"], &job); err != nil || string(job["timeout"]) != `"1s"` {
		t.Fatalf("view's job %s: %v", view["job"], err)
	}
	delete(job, "timeout") // the view's own: the entry's job has it as a duration, not in JSON
	jobText, _ := json.Marshal(job)
	view["job"] = jobText
	for k, v := range entry {
		if k != "job" && string(view[k]) != string(v) {
			t.Errorf("member %s: view %s, entry %s", k, view[k], v)
		}
	}
	var entryJob map[string]json.RawMessage
	json.Unmarshal(entry["job"], &entryJob)
	entryJobText, _ := json.Marshal(entryJob)
	if string(entryJobText) != string(jobText) {
		t.Errorf("job: view %s, entry %s", jobText, entryJobText)
	}
	for k := range view {
		if _, ok := entry[k]; !ok {
			t.Errorf("member %s is the view's only", k)
		}
	}
}
