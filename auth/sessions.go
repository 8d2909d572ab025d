package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/store"
)

// SessionIDBytes is a session id's length: 256 random bits.
const SessionIDBytes = 32

// ErrNoSession: the id names no live session — expired, ended, its token
// revoked, or never issued.
var ErrNoSession = errors.New("no such session")

// Sessions are sign-ins that outlive a request (the dashboard's): a random
// id the browser keeps, standing for the principal of the token it signed
// in with. Only the id's sha256 is stored, so a copy of the table signs
// nobody in; a session ends at its expiry, at sign-out, or when its token
// is revoked.
type Sessions struct {
	store  *store.Store
	length time.Duration
}

// NewSessions returns the sessions kept in pool's database, each lasting
// length from its start (0: DefaultSessionLength).
func NewSessions(pool *pgxpool.Pool, length time.Duration) *Sessions {
	if length <= 0 {
		length = DefaultSessionLength
	}
	return &Sessions{store: store.New(pool), length: length}
}

// DefaultSessionLength is how long a dashboard sign-in lasts by default.
const DefaultSessionLength = 12 * time.Hour

// Length is how long each session lasts from its start.
func (s *Sessions) Length() time.Duration { return s.length }

// Start stores a session for p and returns its id.
func (s *Sessions) Start(ctx context.Context, p Principal) (string, error) {
	b := make([]byte, SessionIDBytes)
	rand.Read(b)
	id := base64.RawURLEncoding.EncodeToString(b)
	err := s.store.InsertUISession(ctx, store.UISession{IDHash: hashID(id), TokenID: p.TokenID, Tenant: p.Tenant, Scopes: p.Scopes}, s.length)
	return id, err
}

// Principal is the live session id's principal. Errors: ErrNoSession, or
// the database's.
func (s *Sessions) Principal(ctx context.Context, id string) (Principal, error) {
	sess, err := s.store.UISessionByHash(ctx, hashID(id))
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrNoSession
	}
	if err != nil {
		return Principal{}, err
	}
	return Principal{TokenID: sess.TokenID, Tenant: sess.Tenant, Scopes: sess.Scopes}, nil
}

// End ends the session; ending one that does not exist is not an error.
func (s *Sessions) End(ctx context.Context, id string) error {
	return s.store.DeleteUISession(ctx, hashID(id))
}

// WellFormedSessionID reports whether id could be one Start made.
func WellFormedSessionID(id string) bool {
	b, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil && len(b) == SessionIDBytes
}

func hashID(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:]
}
