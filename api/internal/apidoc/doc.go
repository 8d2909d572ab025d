// Package apidoc builds the API's OpenAPI document from the Go that
// serves it: the routes of api.Routes (methods, paths, scopes,
// parameters, status codes, problem codes) and the Go types of their
// bodies, turned into schemas by kin-openapi's openapi3gen, with the
// notes in notes.go for what a Go type cannot say.
//
// It runs at build time only (api/cmd/openapi-gen writes
// api/openapi.json, which the server embeds), so the gaffer binary does
// not carry kin-openapi. It must never be imported by non-test code
// outside the generator.
package apidoc
