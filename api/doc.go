// Package api is the HTTP API every node serves under /v1: JSON in and
// out, every error an RFC 9457 problem with a stable code.
//
// The route table (routes.go) is the API's one contract. The server
// registers exactly its routes — each behind authentication, its scope,
// the token's rate limit, the checks of every parameter against its
// declared rule (params.go: a query parameter the route does not declare
// is refused, so a handler reads no unchecked value), the body checks
// and, for POSTs, Idempotency-Key (serve) — and the OpenAPI document is generated from
// the same table and the Go types of the bodies (internal/apidoc,
// cmd/openapi-gen), committed as openapi.json and served at
// /v1/openapi.json. A request no route matches answers 404, or 405 with
// Allow when its path is served with other methods.
//
// The package owns the wire: request bodies, views of the domain types,
// problem codes and their statuses. It must never hold domain rules —
// those belong to the clients it calls (job, cron, dlq, workflow,
// cluster, webhook) — nor import the OpenAPI libraries, which only the
// generator and the tests use.
package api
