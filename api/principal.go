package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// tenantFilter is the tenant the caller's reads are confined to: its own,
// or for a spanning token the ?tenant= it asks for ("" = every tenant).
func tenantFilter(p auth.Principal, r *http.Request) string {
	return p.ReadTenant(r.URL.Query().Get("tenant"))
}

// writeTenant is the tenant a write acts for: the token's, or for a
// spanning token the one the request names (default "default").
func writeTenant(p auth.Principal, requested string) (string, *Problem) {
	if p.Tenant == auth.AllTenants {
		if requested == "" {
			return job.DefaultTenant, nil
		}
		if err := job.ValidateName("tenant", requested); err != nil {
			return "", asProblem(err)
		}
		return requested, nil
	}
	if requested != "" && requested != p.Tenant {
		return "", problem(CodeForbidden, fmt.Sprintf("this token acts for tenant %q, not %q", p.Tenant, requested))
	}
	return p.Tenant, nil
}

type principalKey struct{}

func principalFrom(ctx context.Context) auth.Principal {
	p, _ := ctx.Value(principalKey{}).(auth.Principal)
	return p
}

// bearer extracts the token from an Authorization header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// operatorOnly is the answer to a tenant's token on what only a token
// spanning tenants may do, whatever the token's scopes (G9).
func operatorOnly(p auth.Principal) *Problem {
	return problem(CodeForbidden, fmt.Sprintf("only an operator's token spanning tenants (gaffer tokens create --tenant '*') may do this; "+
		"this token acts for tenant %q, and its admin or cluster:read reaches only that tenant's limits and remote workers", p.Tenant))
}
