package apidoc

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

type inner struct {
	When time.Time `json:"when"`
}

type shadowing struct {
	inner
	When string `json:"when"`
}

type sample struct {
	Always   string          `json:"always"`
	Maybe    string          `json:"maybe,omitempty"`
	Nullable *time.Time      `json:"nullable"`
	Absent   *time.Time      `json:"absent,omitempty"`
	Raw      json.RawMessage `json:"raw"`
	Hidden   string          `json:"-"`
	inner
}

func TestSchemasOfGoTypes(t *testing.T) {
	componentNames["apidoc.sample"] = "Sample"
	componentNames["apidoc.shadowing"] = "Shadowing"
	t.Cleanup(func() { delete(componentNames, "apidoc.sample"); delete(componentNames, "apidoc.shadowing") })

	s := newSchemas()
	if _, err := s.of(sample{}, response); err != nil {
		t.Fatal(err)
	}
	got := s.components["Sample"].Value
	var props []string
	for p := range got.Properties {
		props = append(props, p)
	}
	slices.Sort(props)
	if want := []string{"absent", "always", "maybe", "nullable", "raw", "when"}; !slices.Equal(props, want) {
		t.Errorf("properties %v, want %v", props, want)
	}
	// A response requires what encoding/json always writes.
	if want := []string{"always", "nullable", "raw", "when"}; !slices.Equal(got.Required, want) {
		t.Errorf("required %v, want %v", got.Required, want)
	}
	if !got.Properties["nullable"].Value.Nullable || got.Properties["absent"].Value.Nullable || !got.Properties["raw"].Value.Nullable {
		t.Error("a pointer is nullable only without omitempty; raw JSON is any value, null too")
	}
	if got.AdditionalProperties.Has == nil || *got.AdditionalProperties.Has {
		t.Error("objects are closed")
	}

	// The same type as a request body: another component name would be
	// needed, since what it requires differs.
	if _, err := s.of(sample{}, request); err == nil || !strings.Contains(err.Error(), "both a request and a response") {
		t.Errorf("one type both ways: %v", err)
	}

	// openapi3gen cannot tell which of two same-named members wins.
	if _, err := newSchemas().of(shadowing{}, response); err == nil || !strings.Contains(err.Error(), `two fields are named "when"`) {
		t.Errorf("shadowing: %v", err)
	}
}

func TestNotesMustNameWhatExists(t *testing.T) {
	s := newSchemas()
	s.components["Thing"] = openapi3.NewSchemaRef("", openapi3.NewObjectSchema().WithProperty("a", openapi3.NewStringSchema()))
	for key, want := range map[string]string{
		"Nothing.a": "no component Nothing",
		"Thing.b":   "Thing has no member b",
		"Thing":     "no member c to require",
	} {
		err := s.annotate(map[string][]edit{key: {required("c")}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("note %q: %v, want %q", key, err, want)
		}
	}
}

func TestBuildNamesEveryComponent(t *testing.T) {
	if _, err := JSON(); err != nil {
		t.Fatal(err)
	}
	delete(componentNames, "api.queueState")
	t.Cleanup(func() { componentNames["api.queueState"] = "QueueState" })
	if _, err := Build(); err == nil || !strings.Contains(err.Error(), "api.queueState has no component name") {
		t.Fatalf("a type without a name: %v", err)
	}
}
