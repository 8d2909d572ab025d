package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gafferhq/gaffer/internal/store"
	"github.com/gafferhq/gaffer/job"
)

// Scopes a token can hold. admin implies the others. cluster:read sees
// the cluster's own views (nodes, leader, etcd), which show nothing of any
// tenant but are the operator's, not a tenant's, to see.
const (
	ScopeJobsRead    = "jobs:read"
	ScopeJobsWrite   = "jobs:write"
	ScopeClusterRead = "cluster:read"
	ScopeAdmin       = "admin"
)

// Scopes lists every scope, for messages and validation.
var Scopes = []string{ScopeJobsRead, ScopeJobsWrite, ScopeClusterRead, ScopeAdmin}

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

// tenantFilter is the tenant the caller's reads are confined to: its own,
// or for a spanning token the ?tenant= it asks for ("" = every tenant).
func (p Principal) tenantFilter(r *http.Request) string {
	return p.ReadTenant(r.URL.Query().Get("tenant"))
}

// writeTenant is the tenant a write acts for: the token's, or for a
// spanning token the one the request names (default "default").
func (p Principal) writeTenant(requested string) (string, *Problem) {
	if p.Tenant == AllTenants {
		if requested == "" {
			return job.DefaultTenant, nil
		}
		if err := job.ValidateName("tenant", requested); err != nil {
			return "", asProblem(err)
		}
		return requested, nil
	}
	if requested != "" && requested != p.Tenant {
		return "", problem(http.StatusForbidden, CodeForbidden, fmt.Sprintf("this token acts for tenant %q, not %q", p.Tenant, requested))
	}
	return p.Tenant, nil
}

// Tokens creates, checks and revokes API tokens. Tokens are stored as
// sha256 hashes; a check looks the hash up and compares it in constant
// time. Recently seen tokens are cached for 5 seconds, so a revocation
// takes effect within that long on every node. Unknown tokens are
// remembered for 10 seconds too (a negative cache), so that a client
// repeating a bad token costs one query, not one per request; a token
// created on this node is forgotten from it at once.
type Tokens struct {
	store    *store.Store
	cacheFor time.Duration
	badFor   time.Duration

	mu    sync.Mutex
	cache map[string]cachedToken
	bad   map[string]time.Time // hash → when the database did not know it
}

type cachedToken struct {
	tok store.Token
	at  time.Time
}

// tokenCacheSize bounds each cache: beyond it, the positive cache starts
// afresh and the negative cache drops what has expired (or, under a flood
// of distinct bad tokens, everything).
const tokenCacheSize = 10000

// NewTokens returns a token service on st.
func NewTokens(st *store.Store) *Tokens {
	return &Tokens{store: st, cacheFor: 5 * time.Second, badFor: 10 * time.Second,
		cache: map[string]cachedToken{}, bad: map[string]time.Time{}}
}

// ErrBadToken: the token is unknown or revoked.
var ErrBadToken = errors.New("invalid or revoked token")

// NewTokenRequest describes a token to create.
type NewTokenRequest struct {
	Name   string
	Tenant string   // a tenant, or AllTenants for an admin token
	Scopes []string // from Scopes
	// Secret, when set, is the token's text (e.g. a fixed dev token);
	// otherwise a random one is made.
	Secret string
}

// Create makes a token and returns its text — shown once, never stored —
// and its record.
func (t *Tokens) Create(ctx context.Context, req NewTokenRequest) (string, store.Token, error) {
	if req.Name == "" {
		return "", store.Token{}, &job.ValidationError{Field: "name", Message: "is required"}
	}
	if req.Tenant == "" {
		req.Tenant = job.DefaultTenant
	}
	if len(req.Scopes) == 0 {
		return "", store.Token{}, &job.ValidationError{Field: "scopes", Message: "at least one of " + strings.Join(Scopes, ", ") + " is required"}
	}
	for _, s := range req.Scopes {
		if !slices.Contains(Scopes, s) {
			return "", store.Token{}, &job.ValidationError{Field: "scopes", Message: fmt.Sprintf("unknown scope %q: use %s", s, strings.Join(Scopes, ", "))}
		}
	}
	if req.Tenant == AllTenants {
		if !slices.Contains(req.Scopes, ScopeAdmin) {
			return "", store.Token{}, &job.ValidationError{Field: "tenant", Message: `only admin tokens may span tenants ("*")`}
		}
	} else if err := job.ValidateName("tenant", req.Tenant); err != nil {
		return "", store.Token{}, err
	}
	text := req.Secret
	if text == "" {
		b := make([]byte, 24)
		rand.Read(b)
		text = "gft_" + base64.RawURLEncoding.EncodeToString(b)
	} else if len(text) < 16 {
		return "", store.Token{}, &job.ValidationError{Field: "secret", Message: "a token must be at least 16 characters"}
	}
	idb := make([]byte, 6)
	rand.Read(idb)
	sum := sha256.Sum256([]byte(text))
	rec, err := t.store.InsertToken(ctx, store.Token{ID: "tok_" + hex.EncodeToString(idb), Name: req.Name, Hash: sum[:],
		Tenant: req.Tenant, Scopes: req.Scopes})
	if err != nil {
		return "", store.Token{}, err
	}
	t.mu.Lock()
	delete(t.bad, string(sum[:]))
	t.mu.Unlock()
	return text, rec, nil
}

// Authenticate checks a bearer token's text.
func (t *Tokens) Authenticate(ctx context.Context, text string) (Principal, error) {
	sum := sha256.Sum256([]byte(text))
	key := string(sum[:])
	t.mu.Lock()
	c, ok := t.cache[key]
	badAt, bad := t.bad[key]
	t.mu.Unlock()
	if bad && time.Since(badAt) < t.badFor {
		return Principal{}, ErrBadToken
	}
	if !ok || time.Since(c.at) > t.cacheFor {
		tok, err := t.store.TokenByHash(ctx, sum[:])
		if errors.Is(err, store.ErrNotFound) {
			t.rememberBad(key)
			return Principal{}, ErrBadToken
		}
		if err != nil {
			return Principal{}, err
		}
		c = cachedToken{tok: tok, at: time.Now()}
		t.mu.Lock()
		if len(t.cache) > tokenCacheSize {
			t.cache = map[string]cachedToken{}
		}
		t.cache[key] = c
		t.mu.Unlock()
	}
	if subtle.ConstantTimeCompare(c.tok.Hash, sum[:]) != 1 || c.tok.RevokedAt != nil {
		return Principal{}, ErrBadToken
	}
	return Principal{TokenID: c.tok.ID, Tenant: c.tok.Tenant, Scopes: c.tok.Scopes}, nil
}

// rememberBad puts a hash the database does not know in the negative
// cache.
func (t *Tokens) rememberBad(key string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.bad) >= tokenCacheSize {
		for k, at := range t.bad {
			if now.Sub(at) >= t.badFor {
				delete(t.bad, k)
			}
		}
		if len(t.bad) >= tokenCacheSize {
			clear(t.bad)
		}
	}
	t.bad[key] = now
}

// List returns every token record.
func (t *Tokens) List(ctx context.Context) ([]store.Token, error) { return t.store.ListTokens(ctx) }

// Revoke revokes a token by id. Errors: store.ErrNotFound.
func (t *Tokens) Revoke(ctx context.Context, id string) error {
	if err := t.store.RevokeToken(ctx, id); err != nil {
		return err
	}
	t.mu.Lock()
	t.cache = map[string]cachedToken{}
	t.mu.Unlock()
	return nil
}

type principalKey struct{}

func principalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
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
