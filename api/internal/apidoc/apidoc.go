package apidoc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
)

// OpenAPIVersion is the version of the specification the document
// follows. In 3.0 a security requirement of an http scheme lists no
// scopes, so each operation states its scope in words and in
// x-gaffer-scope.
const OpenAPIVersion = "3.0.3"

// ScopeExtension is the operation member naming the token scope the
// operation needs.
const ScopeExtension = "x-gaffer-scope"

// OperatorExtension is the operation member, true, of a route only a
// token spanning tenants may call (api.Route.Operator).
const OperatorExtension = "x-gaffer-operator"

// securityScheme is the name of the bearer token scheme.
const securityScheme = "bearerToken"

// JSON returns the document as committed and served: indented, ending in
// a newline, and valid by kin-openapi's validator.
func JSON() ([]byte, error) {
	doc, err := Build()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	loaded, err := openapi3.NewLoader().LoadFromData(out)
	if err != nil {
		return nil, fmt.Errorf("load the generated document: %w", err)
	}
	if err := loaded.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the generated document is invalid: %w", err)
	}
	return append(out, '\n'), nil
}

// Build returns the OpenAPI document of api.Routes. Its schema
// references are unresolved: marshal it, or load JSON's output.
func Build() (*openapi3.T, error) {
	s := newSchemas()
	doc := &openapi3.T{
		OpenAPI: OpenAPIVersion,
		Info:    &openapi3.Info{Title: "Gaffer API", Version: "1.0.0", Description: description},
		Servers: openapi3.Servers{{URL: "/"}},
		Paths:   openapi3.NewPaths(),
		Components: &openapi3.Components{
			Schemas:   s.components,
			Responses: openapi3.ResponseBodies{},
			SecuritySchemes: openapi3.SecuritySchemes{securityScheme: {Value: &openapi3.SecurityScheme{
				Type: "http", Scheme: "bearer",
				Description: "An API token (gaffer tokens create). Each operation needs one scope, named in its description and x-gaffer-scope; " +
					auth.ScopeAdmin + " implies every other.",
			}}},
		},
	}
	types := api.ProblemTypes()
	for _, r := range api.Routes() {
		op, err := operation(s, doc.Components.Responses, r, types)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Pattern(), err)
		}
		doc.AddOperation(r.Path, r.Method, op)
	}
	if _, err := s.of(api.Problem{}, response); err != nil {
		return nil, err
	}
	if err := s.prune(doc); err != nil {
		return nil, err
	}
	codes := make([]string, 0, len(types))
	for c := range types {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	if err := s.annotate(notes); err != nil {
		return nil, err
	}
	// Every code, those only the unrouted answers give (404, 405) too.
	enum(codes...)(s.components["Problem"].Value.Properties["code"].Value)
	return doc, nil
}

const description = `Jobs, cron, dead letters, workflows and cluster control.

Authenticate with Authorization: Bearer <token>. A token carries scopes — jobs:read, jobs:write, cluster:read (nodes and the cluster's state), worker, and admin, which implies the others — and belongs to one tenant (admin tokens may span tenants: tenant "*"). Each operation names the scope it needs. A tenant's cluster:read or admin token is confined to its tenant: it sees and changes only its own tenant's limits and remote workers, and operations marked x-gaffer-operator (weights, pausing queues) need a token spanning tenants.

Every error is application/problem+json with a stable code; each response lists the codes it may carry. A path no operation has answers 404 not_found; a path served with other methods answers 405 method_not_allowed with an Allow header.`

var wildcard = regexp.MustCompile(`\{([^}]+)\}`)

// operation describes r; its problem answers go to problems, one
// component per status and set of codes, which routes share.
func operation(s *schemas, problems openapi3.ResponseBodies, r api.Route, types map[string]api.ProblemType) (*openapi3.Operation, error) {
	op := &openapi3.Operation{OperationID: r.OperationID, Summary: r.Summary, Responses: openapi3.NewResponsesWithCapacity(len(r.Responses))}
	if r.Scope == "" {
		op.Security = &openapi3.SecurityRequirements{} // no token needed
		op.Description = "Needs no token."
	} else {
		op.Security = &openapi3.SecurityRequirements{{securityScheme: []string{}}}
		op.Description = "Needs a token with scope " + r.Scope + " (or admin)."
		if r.Scope == auth.ScopeAdmin {
			op.Description = "Needs a token with scope admin."
		}
		op.Extensions = map[string]any{ScopeExtension: r.Scope}
		if r.Operator {
			op.Description += " Only a token spanning tenants (tenant \"*\"): a tenant's token is refused with 403, whatever its scopes."
			op.Extensions[OperatorExtension] = true
		}
	}

	var inPath []string
	for _, m := range wildcard.FindAllStringSubmatch(r.Path, -1) {
		inPath = append(inPath, m[1])
	}
	var declared []string
	for _, p := range r.Params {
		if p.Prefix {
			// OpenAPI names each parameter; these the description names.
			op.Description = strings.TrimSpace(op.Description + " Query parameters " + p.Name + "*: " + p.Description + ".")
			continue
		}
		param, err := parameter(s, p)
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", p.Name, err)
		}
		if p.In == "path" {
			declared = append(declared, p.Name)
		}
		op.Parameters = append(op.Parameters, &openapi3.ParameterRef{Value: param})
	}
	if !slices.Equal(inPath, declared) {
		return nil, fmt.Errorf("path parameters %v, but the path has %v", declared, inPath)
	}

	if r.Body != nil {
		ref, err := s.of(r.Body, request)
		if err != nil {
			return nil, err
		}
		op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(!r.BodyOptional).WithJSONSchemaRef(ref)}
	}

	for _, res := range r.Responses {
		out := openapi3.NewResponse().WithDescription(res.Description)
		if res.Body != nil {
			ref, err := s.of(res.Body, response)
			if err != nil {
				return nil, err
			}
			out.WithJSONSchemaRef(ref)
		}
		if r.Method == http.MethodPost && r.Scope != "" {
			out.Headers = openapi3.Headers{"Idempotent-Replayed": header("true when this is the stored answer to an earlier request with the same Idempotency-Key",
				openapi3.NewStringSchema().WithEnum("true"), false)}
		}
		op.Responses.Set(strconv.Itoa(res.Status), &openapi3.ResponseRef{Value: out})
	}

	byStatus := map[int][]string{}
	for _, c := range r.Problems {
		t, ok := types[c]
		if !ok {
			return nil, fmt.Errorf("problem code %q is not in api.ProblemTypes", c)
		}
		byStatus[t.Status] = append(byStatus[t.Status], c)
	}
	for status, codes := range byStatus {
		key := strconv.Itoa(status)
		if op.Responses.Value(key) != nil {
			return nil, fmt.Errorf("status %d is both a success and a problem", status)
		}
		slices.Sort(codes)
		name := key + "-" + strings.Join(codes, "-")
		problems[name] = &openapi3.ResponseRef{Value: problemResponse(status, codes)}
		op.Responses.Set(key, &openapi3.ResponseRef{Ref: "#/components/responses/" + name})
	}
	return op, nil
}

func parameter(s *schemas, p api.Param) (*openapi3.Parameter, error) {
	if p.Type == nil {
		return nil, fmt.Errorf("no Type")
	}
	ref, err := s.of(p.Type, request)
	if err != nil {
		return nil, err
	}
	if ref.Ref != "" || reflect.TypeOf(p.Type).Kind() == reflect.Struct && ref.Value.Format != "date-time" {
		return nil, fmt.Errorf("type %T is not a scalar", p.Type)
	}
	schema := ref.Value
	if p.Schema != "" {
		dec := json.NewDecoder(strings.NewReader(p.Schema))
		dec.DisallowUnknownFields()
		var extra struct {
			Minimum   *float64 `json:"minimum"`
			Maximum   *float64 `json:"maximum"`
			MaxLength *uint64  `json:"maxLength"`
			Pattern   string   `json:"pattern"`
			Enum      []string `json:"enum"`
		}
		if err := dec.Decode(&extra); err != nil {
			return nil, fmt.Errorf("Schema %s: %w", p.Schema, err)
		}
		schema.Min, schema.Max, schema.MaxLength, schema.Pattern = extra.Minimum, extra.Maximum, extra.MaxLength, extra.Pattern
		if extra.Enum != nil {
			enum(extra.Enum...)(schema)
		}
	}
	var param *openapi3.Parameter
	switch p.In {
	case "path":
		param = openapi3.NewPathParameter(p.Name)
	case "query":
		param = openapi3.NewQueryParameter(p.Name).WithRequired(p.Required)
		// The API takes ?name= (empty) as no value: the default.
		param.AllowEmptyValue = true
	case "header":
		param = openapi3.NewHeaderParameter(p.Name).WithRequired(p.Required)
	default:
		return nil, fmt.Errorf("In %q is not path, query or header", p.In)
	}
	if p.Example != "" {
		param.Example = p.Example
	}
	if p.Repeat > 1 {
		// ?tag=a&tag=b: an array, each element by the schema.
		schema = openapi3.NewArraySchema().WithItems(schema).WithMaxItems(int64(p.Repeat))
		explode := true
		param.Style, param.Explode = openapi3.SerializationForm, &explode
	}
	return param.WithDescription(p.Description).WithSchema(schema), nil
}

func header(description string, schema *openapi3.Schema, required bool) *openapi3.HeaderRef {
	return &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{Description: description, Required: required,
		Schema: openapi3.NewSchemaRef("", schema)}}}
}

// problemResponse is an error answer whose code is one of codes.
func problemResponse(status int, codes []string) *openapi3.Response {
	schema := &openapi3.Schema{
		AllOf:      openapi3.SchemaRefs{openapi3.NewSchemaRef("#/components/schemas/Problem", nil)},
		Properties: openapi3.Schemas{"code": openapi3.NewSchemaRef("", openapi3.NewStringSchema())},
	}
	enum(codes...)(schema.Properties["code"].Value)
	var text bytes.Buffer
	text.WriteString(http.StatusText(status) + ": ")
	text.WriteString(strings.Join(codes, ", "))
	res := openapi3.NewResponse().WithDescription(text.String())
	res.Content = openapi3.Content{"application/problem+json": openapi3.NewMediaType().WithSchema(schema)}
	switch status {
	case http.StatusUnauthorized:
		res.Headers = openapi3.Headers{"WWW-Authenticate": header("Bearer realm=\"gaffer\", with error=\"invalid_token\" for a bad token",
			openapi3.NewStringSchema(), true)}
	case http.StatusTooManyRequests:
		res.Headers = openapi3.Headers{"Retry-After": header("seconds to wait", openapi3.NewIntegerSchema().WithMin(0), true)}
	}
	return res
}
