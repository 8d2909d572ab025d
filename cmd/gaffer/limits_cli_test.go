package main

import (
	"strings"
	"testing"
)

// The limits and tenants commands against a real server.
func TestLimitsCLI(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	admin := strings.TrimSpace(e.ok("tokens", "create", "--name", "a", "--tenant", "*", "--scopes", "admin"))
	_, base := e.server("limits-1")
	e.env = append(e.env, "GAFFER_URL="+base, "GAFFER_TOKEN="+admin)

	if out := e.ok("limits", "set", "mail-per-tenant", "--queue", "mail", "--key", "tenant", "--concurrency", "4", "--rate", "30/1m"); !strings.Contains(out, "4 running, 30 per 1m0s (burst 30)") {
		t.Fatalf("limits set: %s", out)
	}
	out := e.ok("limits", "list")
	for _, want := range []string{"mail-per-tenant", "queue=mail", "http-per-host", "host(args.url)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("limits list lacks %q:\n%s", want, out)
		}
	}
	if out := e.ok("limits", "get", "mail-per-tenant"); !strings.Contains(out, "30 per 1m0s") || !strings.Contains(out, "queue=mail") {
		t.Fatalf("limits get: %s", out)
	}
	e.fails(2, "--rate: want N/PERIOD", "limits", "set", "x", "--rate", "fast")
	e.fails(1, "invalid_field", "limits", "set", "x", "--concurrency", "0")
	if out := e.ok("tenants", "weight", "acme", "3"); !strings.Contains(out, "weight 3") {
		t.Fatalf("tenants weight: %s", out)
	}
	if out := e.ok("tenants", "list"); !strings.Contains(out, "acme") {
		t.Fatalf("tenants list: %s", out)
	}
	e.fails(2, "whole number", "tenants", "weight", "acme", "heavy")
	e.ok("limits", "delete", "mail-per-tenant")
	e.fails(1, "not_found", "limits", "delete", "mail-per-tenant")
}
