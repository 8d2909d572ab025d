package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// Webhook secrets are a tenant's own: created (the text shown once, never
// listed), rotated, deleted only by its tokens; bad input writes nothing.
func TestWebhookSecretEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var created struct {
		ID, Tenant, Secret string
	}
	r := e.do(e.writer, "POST", "/v1/webhook-secrets", nil)
	if r.Status != 201 {
		t.Fatalf("rotate: %d %s", r.Status, r.Body)
	}
	r.decode(t, &created)
	if created.Tenant != "default" || !strings.HasPrefix(created.Secret, "whsec_") || created.ID == "" {
		t.Fatalf("created %+v", created)
	}
	list := func(token, query string) string {
		r := e.do(token, "GET", "/v1/webhook-secrets"+query, nil)
		if r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		return string(r.Body)
	}
	if got := list(e.reader, ""); !strings.Contains(got, created.ID) || strings.Contains(got, "whsec_") {
		t.Fatalf("list shows %s", got)
	}
	// Another tenant sees none of them and cannot delete them, not even
	// by asking for the tenant.
	if got := list(e.acme, "?tenant=default"); strings.Contains(got, created.ID) {
		t.Fatalf("acme lists default's secret: %s", got)
	}
	e.expectProblem(e.do(e.acme, "DELETE", "/v1/webhook-secrets/"+created.ID+"?tenant=default", nil), 404, "not_found")
	e.expectProblem(e.do(e.acme, "POST", "/v1/webhook-secrets", `{"tenant":"default"}`), 403, "forbidden")
	// An admin spanning tenants picks the tenant.
	if got := list(e.admin, "?tenant=default"); !strings.Contains(got, created.ID) {
		t.Fatalf("admin's list of default: %s", got)
	}
	// Bad input: nothing written.
	before := e.count(`SELECT count(*) FROM gaffer.webhook_secrets`)
	e.expectProblem(e.do(e.writer, "POST", "/v1/webhook-secrets", `{"grace":"forever"}`), 400, "invalid_field")
	e.expectProblem(e.do(e.writer, "POST", "/v1/webhook-secrets", `{"grace":"-1h"}`), 400, "invalid_field")
	e.expectProblem(e.do(e.writer, "POST", "/v1/webhook-secrets", `{"grace":"9000h"}`), 400, "invalid_field")
	e.expectProblem(e.do(e.writer, "POST", "/v1/webhook-secrets", `{"secret":"mine"}`), 400, "unknown_field")
	e.expectProblem(e.do(e.reader, "POST", "/v1/webhook-secrets", nil), 403, "forbidden")
	if after := e.count(`SELECT count(*) FROM gaffer.webhook_secrets`); after != before {
		t.Fatalf("%d secrets after refused requests, was %d", after, before)
	}
	// Rotation keeps the old one signing; at most 5 live.
	for range 4 {
		if r := e.do(e.writer, "POST", "/v1/webhook-secrets", `{"grace":"1h"}`); r.Status != 201 {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
	}
	e.expectProblem(e.do(e.writer, "POST", "/v1/webhook-secrets", nil), 409, "conflict")
	var secrets struct {
		Data []struct {
			ID        string
			ExpiresAt *string `json:"expires_at"`
		}
	}
	json.Unmarshal([]byte(list(e.writer, "")), &secrets)
	if len(secrets.Data) != 5 || secrets.Data[0].ExpiresAt != nil || secrets.Data[4].ExpiresAt == nil {
		t.Fatalf("secrets after rotations: %+v", secrets.Data)
	}
	if r := e.do(e.writer, "DELETE", "/v1/webhook-secrets/"+created.ID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	e.expectProblem(e.do(e.writer, "DELETE", "/v1/webhook-secrets/"+created.ID, nil), 404, "not_found")
}
