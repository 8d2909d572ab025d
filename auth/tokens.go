package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tokens creates, checks and revokes API tokens. Tokens are stored as
// sha256 hashes; a check looks the hash up and compares it in constant
// time. Recently seen tokens are cached for 5 seconds, so a revocation
// takes effect within that long on every node. Unknown and revoked tokens
// are remembered for 10 seconds too (a negative cache), so that a client
// repeating a bad token costs one query, not one per request; a token
// created on this node is forgotten from it at once. Entries past their
// time are swept out as new ones come in, so a token that is revoked, or
// just no longer used, leaves the cache within seconds.
type Tokens struct {
	store    *store.Store
	cacheFor time.Duration
	badFor   time.Duration
	now      func() time.Time

	mu        sync.Mutex
	cache     map[string]cachedToken
	bad       map[string]time.Time // hash → when the database did not know it, or had it revoked
	lastSweep time.Time
}

type cachedToken struct {
	tok store.Token
	at  time.Time
}

// Token is a token's record; its text is never kept.
type Token struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Tenant    string     `json:"tenant"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

func tokenOf(r store.Token) Token {
	return Token{ID: r.ID, Name: r.Name, Tenant: r.Tenant, Scopes: r.Scopes, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
}

// tokenCacheSize bounds each cache: beyond it, the positive cache starts
// afresh and the negative cache drops what has expired (or, under a flood
// of distinct bad tokens, everything).
const tokenCacheSize = 10000

// NewTokens returns the tokens kept in pool's database.
func NewTokens(pool *pgxpool.Pool) *Tokens {
	return &Tokens{store: store.New(pool), cacheFor: 5 * time.Second, badFor: 10 * time.Second, now: time.Now,
		cache: map[string]cachedToken{}, bad: map[string]time.Time{}}
}

// ErrBadToken: the token is unknown or revoked.
var ErrBadToken = errors.New("invalid or revoked token")

// ErrNotFound: no token has that id.
var ErrNotFound = errors.New("token not found")

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
func (t *Tokens) Create(ctx context.Context, req NewTokenRequest) (string, Token, error) {
	if req.Name == "" {
		return "", Token{}, &job.ValidationError{Field: "name", Message: "is required"}
	}
	if req.Tenant == "" {
		req.Tenant = job.DefaultTenant
	}
	if len(req.Scopes) == 0 {
		return "", Token{}, &job.ValidationError{Field: "scopes", Message: "at least one of " + strings.Join(Scopes, ", ") + " is required"}
	}
	for _, s := range req.Scopes {
		if !slices.Contains(Scopes, s) {
			return "", Token{}, &job.ValidationError{Field: "scopes", Message: fmt.Sprintf("unknown scope %q: use %s", s, strings.Join(Scopes, ", "))}
		}
	}
	if req.Tenant == AllTenants {
		if !slices.Contains(req.Scopes, ScopeAdmin) {
			return "", Token{}, &job.ValidationError{Field: "tenant", Message: `only admin tokens may span tenants ("*")`}
		}
	} else if err := job.ValidateName("tenant", req.Tenant); err != nil {
		return "", Token{}, err
	}
	text := req.Secret
	if text == "" {
		b := make([]byte, 24)
		rand.Read(b)
		text = "gft_" + base64.RawURLEncoding.EncodeToString(b)
	} else if len(text) < 16 {
		return "", Token{}, &job.ValidationError{Field: "secret", Message: "a token must be at least 16 characters"}
	}
	idb := make([]byte, 6)
	rand.Read(idb)
	sum := sha256.Sum256([]byte(text))
	rec, err := t.store.InsertToken(ctx, store.Token{ID: "tok_" + hex.EncodeToString(idb), Name: req.Name, Hash: sum[:],
		Tenant: req.Tenant, Scopes: req.Scopes})
	if err != nil {
		return "", Token{}, err
	}
	t.mu.Lock()
	delete(t.bad, string(sum[:]))
	t.mu.Unlock()
	return text, tokenOf(rec), nil
}

// Authenticate checks a bearer token's text.
func (t *Tokens) Authenticate(ctx context.Context, text string) (Principal, error) {
	sum := sha256.Sum256([]byte(text))
	key := string(sum[:])
	t.mu.Lock()
	c, ok := t.cache[key]
	badAt, bad := t.bad[key]
	t.mu.Unlock()
	if bad && t.now().Sub(badAt) < t.badFor {
		return Principal{}, ErrBadToken
	}
	if !ok || t.now().Sub(c.at) > t.cacheFor {
		tok, err := t.store.TokenByHash(ctx, sum[:])
		if errors.Is(err, store.ErrNotFound) || (err == nil && tok.RevokedAt != nil) {
			// Unknown, or revoked (on any node): it goes from the positive
			// cache to the negative one.
			t.rememberBad(key)
			return Principal{}, ErrBadToken
		}
		if err != nil {
			return Principal{}, err
		}
		c = cachedToken{tok: tok, at: t.now()}
		t.mu.Lock()
		t.sweepLocked(c.at)
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

// rememberBad puts a hash the database does not know, or knows revoked,
// in the negative cache, and forgets it in the positive one.
func (t *Tokens) rememberBad(key string) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.cache, key)
	t.sweepLocked(now)
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

// sweepLocked drops the entries of both caches that are past their time,
// at most once per cacheFor: what a revoked or forgotten token leaves
// behind. t.mu is held.
func (t *Tokens) sweepLocked(now time.Time) {
	if now.Sub(t.lastSweep) < t.cacheFor {
		return
	}
	t.lastSweep = now
	for k, c := range t.cache {
		if now.Sub(c.at) > t.cacheFor {
			delete(t.cache, k)
		}
	}
	for k, at := range t.bad {
		if now.Sub(at) >= t.badFor {
			delete(t.bad, k)
		}
	}
}

// List returns every token record.
func (t *Tokens) List(ctx context.Context) ([]Token, error) {
	rows, err := t.store.ListTokens(ctx)
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = tokenOf(r)
	}
	return out, err
}

// Revoke revokes a token by id. Errors: ErrNotFound.
func (t *Tokens) Revoke(ctx context.Context, id string) error {
	err := t.store.RevokeToken(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.cache = map[string]cachedToken{}
	t.mu.Unlock()
	return nil
}
