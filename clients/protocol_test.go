package clients

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The clients' protocol tables are checked against the OpenAPI document,
// which is generated from the API's Go types (go generate ./api): a
// client cannot call an endpoint the API lacks, nor send or read a field
// its schema lacks. Each client builds its requests and reads its answers
// only through its table (it refuses any other field when it runs, which
// the process tests in clients_test.go exercise), and names no /v1 path
// outside it, so checking the table checks the client.

// clientSources are the files holding each client's protocol table.
var clientSources = map[string]string{
	"python":     "python/gaffer_worker.py",
	"typescript": "typescript/gaffer.mjs",
}

// protocolEntry is one operation of a client's table: an endpoint
// (Method, Path) or a schema it reads (Schema, e.g. the problem answer).
type protocolEntry struct {
	Method string   `json:"method"`
	Path   string   `json:"path"`
	Schema string   `json:"schema"`
	Send   []string `json:"send"`
	Read   []string `json:"read"`
	// Codes are problem codes the client acts on.
	Codes []string `json:"codes"`
}

const (
	tableBegin = "gaffer:protocol begin"
	tableEnd   = "gaffer:protocol end"
)

// protocolTable cuts a client's table out of its source: the JSON object
// between the begin and end markers. rest is the source without it.
func protocolTable(src string) (table map[string]protocolEntry, rest string, err error) {
	i, j := strings.Index(src, tableBegin), strings.Index(src, tableEnd)
	if i < 0 || j < i {
		return nil, "", fmt.Errorf("no %q ... %q block", tableBegin, tableEnd)
	}
	block := src[i+len(tableBegin) : j]
	open, close := strings.Index(block, "{"), strings.LastIndex(block, "}")
	if open < 0 || close < open {
		return nil, "", fmt.Errorf("the protocol block holds no object")
	}
	dec := json.NewDecoder(strings.NewReader(block[open : close+1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&table); err != nil {
		return nil, "", fmt.Errorf("the protocol block is not JSON of the expected shape: %w", err)
	}
	return table, src[:i] + src[j:], nil
}

// openAPI is the part of the document the check reads.
type openAPI struct {
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas map[string]*schema `json:"schemas"`
	} `json:"components"`
}

type operation struct {
	RequestBody *struct {
		Content map[string]struct {
			Schema *schema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content map[string]struct {
			Schema *schema `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

type schema struct {
	Ref        string             `json:"$ref"`
	Properties map[string]*schema `json:"properties"`
	Items      *schema            `json:"items"`
	AllOf      []*schema          `json:"allOf"`
	OneOf      []*schema          `json:"oneOf"`
	AnyOf      []*schema          `json:"anyOf"`
	Enum       []any              `json:"enum"`
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	b, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPI
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	return &doc
}

func (d *openAPI) deref(s *schema) *schema {
	for s != nil && s.Ref != "" {
		s = d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	return s
}

// property finds a property of s by name, through $ref and the
// combinators.
func (d *openAPI) property(s *schema, name string) *schema {
	s = d.deref(s)
	if s == nil {
		return nil
	}
	if p, ok := s.Properties[name]; ok {
		return p
	}
	for _, sub := range slices.Concat(s.AllOf, s.OneOf, s.AnyOf) {
		if p := d.property(sub, name); p != nil {
			return p
		}
	}
	return nil
}

// resolve follows a table's field path ("jobs[].lease_token": the
// property lease_token of the items of the property jobs) in s.
func (d *openAPI) resolve(s *schema, path string) error {
	for _, seg := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(seg, "[]")
		p := d.property(s, name)
		if p == nil {
			return fmt.Errorf("no field %q", name)
		}
		if list {
			p = d.deref(p)
			if p.Items == nil {
				return fmt.Errorf("field %q is not a list", name)
			}
			p = p.Items
		}
		s = p
	}
	return nil
}

// checkProtocol returns every way a client's source disagrees with the
// document.
func checkProtocol(doc *openAPI, src string) []string {
	table, rest, err := protocolTable(src)
	if err != nil {
		return []string{err.Error()}
	}
	var bad []string
	badf := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	for _, op := range slices.Sorted(func(yield func(string) bool) {
		for k := range table {
			if !yield(k) {
				return
			}
		}
	}) {
		e := table[op]
		var sendTo, readFrom []*schema
		switch {
		case e.Schema != "" && e.Path == "":
			s, ok := doc.Components.Schemas[e.Schema]
			if !ok {
				badf("%s: the document has no schema %s", op, e.Schema)
				continue
			}
			readFrom = []*schema{s}
		case e.Path != "" && e.Schema == "":
			o, ok := doc.Paths[e.Path][strings.ToLower(e.Method)]
			if !ok {
				badf("%s: the document has no %s %s", op, e.Method, e.Path)
				continue
			}
			if o.RequestBody != nil {
				if c, ok := o.RequestBody.Content["application/json"]; ok {
					sendTo = append(sendTo, c.Schema)
				}
			}
			for status, r := range o.Responses {
				if c, ok := r.Content["application/json"]; ok && strings.HasPrefix(status, "2") {
					readFrom = append(readFrom, c.Schema)
				}
			}
		default:
			badf("%s: give either method and path, or schema", op)
			continue
		}
		if len(e.Send) > 0 && len(sendTo) == 0 {
			badf("%s: sends %v, but %s %s takes no JSON body", op, e.Send, e.Method, e.Path)
		}
		for _, f := range e.Send {
			for _, s := range sendTo {
				if err := doc.resolve(s, f); err != nil {
					badf("%s: sends %s, which the request schema lacks: %v", op, f, err)
				}
			}
		}
		if len(e.Read) > 0 && len(readFrom) == 0 {
			badf("%s: reads %v, but %s %s answers no JSON body", op, e.Read, e.Method, e.Path)
		}
		for _, f := range e.Read {
			for _, s := range readFrom {
				if err := doc.resolve(s, f); err != nil {
					badf("%s: reads %s, which the answer's schema lacks: %v", op, f, err)
				}
			}
		}
		if len(e.Codes) > 0 {
			code := doc.property(doc.Components.Schemas["Problem"], "code")
			for _, c := range e.Codes {
				if code == nil || !slices.Contains(code.Enum, any(c)) {
					badf("%s: acts on problem code %q, which Problem.code does not list", op, c)
				}
			}
		}
	}
	// Every endpoint the client calls is in its table.
	for _, m := range regexp.MustCompile("[\"'`](/v1/[^\"'`]*)").FindAllStringSubmatch(rest, -1) {
		badf("the source names the path %s outside its protocol table", m[1])
	}
	return bad
}

func TestClientsMatchOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, file := range clientSources {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if bad := checkProtocol(doc, string(src)); len(bad) > 0 {
				t.Errorf("%s disagrees with api/openapi.json (the API's contract; regenerate it with go generate ./api, or fix the client):\n  %s",
					file, strings.Join(bad, "\n  "))
			}
		})
	}
}

// The check itself: each kind of drift turns it red.
func TestProtocolCheckCatchesDrift(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, file := range clientSources {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		for _, c := range []struct{ what, from, to, want string }{
			{"a renamed field sent", `"send": ["attempt", "lease_token", "percent"`, `"send": ["attempt", "lease_tokn", "percent"`, "progress: sends lease_tokn"},
			{"a renamed field read", `"jobs[].cancel_requested"`, `"jobs[].cancel_request"`, "heartbeat: reads jobs[].cancel_request"},
			{"an unknown path", `"/v1/work/claim"`, `"/v1/work/claims"`, "claim: the document has no POST /v1/work/claims"},
			{"a wrong method", `"method": "DELETE"`, `"method": "POST"`, "leave: the document has no POST /v1/workers/{id}"},
			{"an unknown problem code", `"lease_lost", "worker_gone"`, `"lease_expired", "worker_gone"`, `problem: acts on problem code "lease_expired"`},
			{"a path outside the table", tableEnd, tableEnd + "\n" + `x = "/v1/jobs"`, "names the path /v1/jobs outside"},
		} {
			if !strings.Contains(src, c.from) {
				t.Fatalf("%s: %s: %q not in the source: update this test", name, c.what, c.from)
			}
			bad := checkProtocol(doc, strings.Replace(src, c.from, c.to, 1))
			if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("%s: %s: the check said %q, want a complaint containing %q", name, c.what, bad, c.want)
			}
		}
	}
}
