package apidoc

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"
)

// direction is which way a body travels. A response field is required
// when encoding/json always writes it (no omitempty); which fields a
// request needs is the server's rule, which the notes say.
type direction int

const (
	request direction = iota
	response
)

// schemas turns Go types into the document's schemas with openapi3gen:
// every named struct becomes a component (named by componentNames),
// everything else is inlined.
type schemas struct {
	components openapi3.Schemas
	gen        map[direction]*openapi3gen.Generator
	// owner is the direction each component was made for: a type used
	// both ways would need two sets of required fields under one name.
	owner map[string]direction
	// unnamed maps placeholder names to the Go types that have no name.
	unnamed map[string]string
	errs    []error
}

func newSchemas() *schemas {
	s := &schemas{components: openapi3.Schemas{}, gen: map[direction]*openapi3gen.Generator{}, owner: map[string]direction{}, unnamed: map[string]string{}}
	for _, d := range []direction{request, response} {
		s.gen[d] = openapi3gen.NewGenerator(
			openapi3gen.CreateComponentSchemas(openapi3gen.ExportComponentSchemasOptions{ExportComponentSchemas: true, ExportTopLevelSchema: true}),
			openapi3gen.CreateTypeNameGenerator(s.componentName(d)),
			openapi3gen.SchemaCustomizer(s.customizer(d)),
			openapi3gen.ThrowErrorOnCycle(),
		)
	}
	return s
}

// of returns the schema of v's Go type, travelling in direction d.
func (s *schemas) of(v any, d direction) (*openapi3.SchemaRef, error) {
	ref, err := s.gen[d].NewSchemaRefForValue(v, s.components)
	if err != nil {
		return nil, fmt.Errorf("schema of %T: %w", v, err)
	}
	if len(s.errs) > 0 {
		return nil, fmt.Errorf("schema of %T: %w", v, s.errs[0])
	}
	return ref, nil
}

// componentName names the components of structs travelling in
// direction d. Every struct a body holds must have a name in
// componentNames, so that renaming a Go type cannot rename a schema
// clients know by accident. (openapi3gen also makes a component of an
// embedded struct's field that an outer one shadows, which no schema
// refers to: such a type gets a placeholder name, and prune drops it.)
func (s *schemas) componentName(d direction) openapi3gen.TypeNameGenerator {
	return func(t reflect.Type) string {
		key := t.String()
		if strings.Contains(key, "[") {
			return key // a generic envelope (list[T]): inlined, never a component
		}
		name, ok := componentNames[key]
		if !ok {
			name = unnamed + strings.NewReplacer(".", "_").Replace(key)
			s.unnamed[name] = key
			return name
		}
		if o, seen := s.owner[name]; seen && o != d {
			s.errs = append(s.errs, fmt.Errorf("component %s (%s) is both a request and a response body: give each its own Go type", name, key))
		}
		s.owner[name] = d
		return name
	}
}

// unnamed starts the placeholder name of a type not in componentNames.
const unnamed = "Unnamed_"

var componentRef = regexp.MustCompile(`"#/components/schemas/([^"]+)"`)

// prune drops the components doc does not refer to, and fails on a
// referred one without a name.
func (s *schemas) prune(doc *openapi3.T) error {
	used := map[string]bool{}
	var mark func(v any) error
	mark = func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		for _, m := range componentRef.FindAllSubmatch(b, -1) {
			name := string(m[1])
			if used[name] {
				continue
			}
			used[name] = true
			if c, ok := s.components[name]; ok {
				if err := mark(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := mark(doc.Paths); err != nil {
		return err
	}
	if err := mark(doc.Components.Responses); err != nil {
		return err
	}
	for name := range s.components {
		switch {
		case !used[name]:
			delete(s.components, name)
		case s.unnamed[name] != "":
			return fmt.Errorf("the Go type %s has no component name in apidoc.componentNames", s.unnamed[name])
		}
	}
	return nil
}

var (
	timeType       = reflect.TypeFor[time.Time]()
	rawMessageType = reflect.TypeFor[json.RawMessage]()
)

// customizer completes what openapi3gen makes of each type: objects are
// closed (the server refuses unknown fields, and sends none), response
// objects require what is always sent, a pointer is nullable only when
// encoding/json can write its nil (no omitempty), and raw JSON is any
// value, null included.
func (s *schemas) customizer(d direction) openapi3gen.SchemaCustomizerFn {
	return func(name string, t reflect.Type, tag reflect.StructTag, schema *openapi3.Schema) error {
		if schema.Nullable && omitted(tag) {
			schema.Nullable = false
		}
		if t == rawMessageType {
			schema.Nullable = true
			schema.Description = "any JSON value"
		}
		if t.Kind() != reflect.Struct || t == timeType {
			return nil
		}
		fields, err := jsonFields(t)
		if err != nil {
			return err
		}
		schema.Type = &openapi3.Types{openapi3.TypeObject}
		schema.AdditionalProperties = openapi3.AdditionalProperties{Has: openapi3.Ptr(false)}
		var names, required []string
		for _, f := range fields {
			names = append(names, f.name)
			if d == response && !f.omitEmpty {
				required = append(required, f.name)
			}
		}
		var made []string
		for p := range schema.Properties {
			made = append(made, p)
		}
		slices.Sort(names)
		slices.Sort(made)
		if !slices.Equal(names, made) {
			return fmt.Errorf("%s: openapi3gen made properties %v, encoding/json writes %v", t, made, names)
		}
		schema.Required = required
		return nil
	}
}

// omitted reports whether encoding/json may leave the field out.
func omitted(tag reflect.StructTag) bool {
	_, opts, _ := strings.Cut(tag.Get("json"), ",")
	o := strings.Split(opts, ",")
	return slices.Contains(o, "omitempty") || slices.Contains(o, "omitzero")
}

// jsonField is a member of a struct's JSON object.
type jsonField struct {
	name      string
	omitEmpty bool
}

// jsonFields lists the members encoding/json writes for struct t,
// embedded structs' promoted fields included. A name given twice (an
// outer field shadowing a promoted one) is an error: openapi3gen sorts
// the fields by name, unstably, and would document either of the two.
func jsonFields(root reflect.Type) ([]jsonField, error) {
	var out []jsonField
	seen := map[string]bool{}
	var walk func(t reflect.Type) error
	walk = func(t reflect.Type) error {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				if err := walk(ft); err != nil {
					return err
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if seen[name] {
				return fmt.Errorf("%s: two fields are named %q in JSON; write the type without shadowing", root, name)
			}
			seen[name] = true
			out = append(out, jsonField{name: name, omitEmpty: omitted(f.Tag)})
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return out, nil
}

// edit is a note on a schema: what its Go type cannot say.
type edit func(*openapi3.Schema)

func desc(text string) edit { return func(s *openapi3.Schema) { s.Description = text } }

func enum[T ~string](values ...T) edit {
	return func(s *openapi3.Schema) {
		s.Enum = nil
		for _, v := range values {
			s.Enum = append(s.Enum, string(v))
		}
	}
}

func between(min, max float64) edit {
	return func(s *openapi3.Schema) { s.Min, s.Max = openapi3.Ptr(min), openapi3.Ptr(max) }
}

func atLeast(min float64) edit { return func(s *openapi3.Schema) { s.Min = openapi3.Ptr(min) } }

func maxLength(n uint64) edit { return func(s *openapi3.Schema) { s.MaxLength = openapi3.Ptr(n) } }

func pattern(p string) edit { return func(s *openapi3.Schema) { s.Pattern = p } }

func dateTime() edit { return func(s *openapi3.Schema) { s.Format = "date-time" } }

func object() edit { return func(s *openapi3.Schema) { s.Type = &openapi3.Types{openapi3.TypeObject} } }

// items applies edits to an array's items.
func items(edits ...edit) edit {
	return func(s *openapi3.Schema) {
		for _, e := range edits {
			e(s.Items.Value)
		}
	}
}

// arrayLen bounds an array's length.
func arrayLen(min, max uint64) edit {
	return func(s *openapi3.Schema) { s.MinItems, s.MaxItems = min, openapi3.Ptr(max) }
}

// required names a request object's required members.
func required(names ...string) edit { return func(s *openapi3.Schema) { s.Required = names } }

// annotate applies the notes to the components, failing on a note about
// a component or member that does not exist: a renamed field cannot
// leave its note behind unseen.
func (s *schemas) annotate(notes map[string][]edit) error {
	for key, edits := range notes {
		comp, member, hasMember := strings.Cut(key, ".")
		ref, ok := s.components[comp]
		if !ok || ref.Value == nil {
			return fmt.Errorf("note %q: no component %s", key, comp)
		}
		target := ref.Value
		if hasMember {
			prop, ok := target.Properties[member]
			if !ok {
				return fmt.Errorf("note %q: %s has no member %s", key, comp, member)
			}
			if prop.Value == nil || prop.Ref != "" {
				return fmt.Errorf("note %q: %s.%s is a reference to another component; note that one", key, comp, member)
			}
			target = prop.Value
		}
		for _, e := range edits {
			e(target)
		}
		for _, r := range target.Required {
			if _, ok := target.Properties[r]; !ok {
				return fmt.Errorf("note %q: %s has no member %s to require", key, comp, r)
			}
		}
	}
	return nil
}
