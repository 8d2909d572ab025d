package auth

import "slices"

// Scopes a token can hold. admin implies the others. cluster:read sees
// the cluster's own views (nodes, leader, etcd), which show nothing of any
// tenant but are the operator's, not a tenant's, to see. worker lets a
// remote worker register, claim its tenant's jobs and record their
// outcomes (a spanning admin token's worker may work every tenant's).
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
