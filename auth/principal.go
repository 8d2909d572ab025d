package auth

import "slices"

// Scopes a token can hold. admin implies the others. cluster:read sees
// the cluster's own views (nodes, leader, limits, weights); worker lets a
// remote worker register, claim its tenant's jobs and record their
// outcomes (a spanning admin token's worker may work every tenant's).
//
// cluster:read and admin are the operator's when the token spans tenants
// (tenant "*"). A token of one tenant holding them is confined to that
// tenant (G9): it sees the nodes, which carry nothing of any tenant, and
// of what carries tenant data only its own tenant's limits (with their
// usage keys), remote workers and weight; it creates, changes and deletes
// only limits of its own tenant and drains only its own remote workers.
// Everything that acts on every tenant at once — shared limits, weights,
// pausing queues, draining nodes — needs a spanning token (Spans). The
// checks are made on each request, so a token made before they existed
// is confined too. docs/security.md has the table of every route.
const (
	ScopeJobsRead    = "jobs:read"
	ScopeJobsWrite   = "jobs:write"
	ScopeClusterRead = "cluster:read"
	ScopeWorker      = "worker"
	ScopeAdmin       = "admin"
)

// Scopes lists every scope, for messages and validation.
var Scopes = []string{ScopeJobsRead, ScopeJobsWrite, ScopeClusterRead, ScopeWorker, ScopeAdmin}

// AllTenants is the tenant of an admin token that spans tenants.
const AllTenants = "*"

// Principal is the authenticated caller.
type Principal struct {
	TokenID string
	Tenant  string // a tenant, or AllTenants
	Scopes  []string
}

// Allows reports whether the principal holds scope (admin holds every
// scope).
func (p Principal) Allows(scope string) bool {
	return slices.Contains(p.Scopes, scope) || slices.Contains(p.Scopes, ScopeAdmin)
}

// ReadTenant is the tenant reads are confined to: the token's own, or for
// a token spanning tenants the one requested ("" = every tenant).
func (p Principal) ReadTenant(requested string) string {
	if p.Tenant != AllTenants {
		return p.Tenant
	}
	return requested
}

// Spans reports whether the principal acts for every tenant: an
// operator's token.
func (p Principal) Spans() bool { return p.Tenant == AllTenants }

// Owns reports whether something belonging to tenant (a limit's tenant, a
// remote worker's; "" for one every tenant shares) is the principal's to
// see and change: everything is a spanning token's, and only its own
// tenant's things are a tenant's token's.
func (p Principal) Owns(tenant string) bool { return p.Spans() || tenant == p.Tenant }
