package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Limits on signing secrets.
const (
	// MaxLiveSecrets is how many secrets a tenant may hold that still
	// sign (the current one and those inside a rotation's grace).
	MaxLiveSecrets = 5
	// DefaultGrace is how long a rotated-out secret keeps signing.
	DefaultGrace = 24 * time.Hour
	// MaxGrace bounds a rotation's grace period.
	MaxGrace = 30 * 24 * time.Hour
	// keyCacheFor is how long a tenant's keys are cached by the sender: a
	// rotation is used by every node within this long.
	keyCacheFor = 10 * time.Second
)

// Errors from Secrets.
var (
	ErrSecretNotFound = errors.New("no such webhook secret")
	ErrTooManySecrets = errors.New("too many webhook secrets")
	ErrRotationRace   = errors.New("another rotation ran at the same time")
)

// Secret is a tenant's signing secret as listed: its text is shown only
// once, when it is created.
type Secret struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Secrets manages the tenants' signing secrets and gives the sender their
// keys (cached for a few seconds).
type Secrets struct {
	store *store.Store
	clock clock.Clock // the cache's age

	mu    sync.Mutex
	cache map[string]cachedKeys
}

type cachedKeys struct {
	keys [][]byte
	at   time.Time
}

// NewSecrets returns the signing secrets kept in pool's database.
func NewSecrets(pool *pgxpool.Pool) *Secrets {
	return &Secrets{store: store.New(pool), clock: clock.Real, cache: map[string]cachedKeys{}}
}

// Rotate creates a new current secret for tenant and returns it with its
// text ("whsec_…", shown once). The previous current secret keeps signing
// for grace (0: DefaultGrace), so receivers can switch without missing a
// delivery. Errors: *job.ValidationError, ErrTooManySecrets,
// ErrRotationRace.
func (s *Secrets) Rotate(ctx context.Context, tenant string, grace time.Duration) (Secret, string, error) {
	if err := job.ValidateName("tenant", tenant); err != nil {
		return Secret{}, "", err
	}
	if grace == 0 {
		grace = DefaultGrace
	}
	if grace < 0 || grace > MaxGrace {
		return Secret{}, "", &job.ValidationError{Field: "grace", Message: fmt.Sprintf("must be between 1s and %s, got %s", MaxGrace, grace)}
	}
	key, text := newKey()
	idb := make([]byte, 8)
	rand.Read(idb)
	w, err := s.store.RotateWebhookSecret(ctx, "whs_"+hex.EncodeToString(idb), tenant, key, grace, MaxLiveSecrets)
	switch {
	case errors.Is(err, store.ErrTooManySecrets):
		return Secret{}, "", fmt.Errorf("%w: %v", ErrTooManySecrets, err)
	case errors.Is(err, store.ErrConflict):
		return Secret{}, "", ErrRotationRace
	case err != nil:
		return Secret{}, "", err
	}
	s.forget(tenant)
	return fromRow(w), text, nil
}

// List returns a tenant's secrets that still sign, newest first.
func (s *Secrets) List(ctx context.Context, tenant string) ([]Secret, error) {
	rows, err := s.store.ListWebhookSecrets(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := make([]Secret, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Delete removes one of a tenant's secrets at once (ending a rotation's
// grace early, or revoking a leaked secret). Errors: ErrSecretNotFound.
func (s *Secrets) Delete(ctx context.Context, tenant, id string) error {
	if err := s.store.DeleteWebhookSecret(ctx, tenant, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: %q", ErrSecretNotFound, id)
		}
		return err
	}
	s.forget(tenant)
	return nil
}

// signingKeys returns the keys tenant's deliveries are signed with.
func (s *Secrets) signingKeys(ctx context.Context, tenant string) ([][]byte, error) {
	s.mu.Lock()
	c, ok := s.cache[tenant]
	s.mu.Unlock()
	if ok && clock.Since(s.clock, c.at) < keyCacheFor {
		return c.keys, nil
	}
	keys, err := s.store.WebhookSigningKeys(ctx, tenant)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.cache) > 10000 {
		s.cache = map[string]cachedKeys{}
	}
	s.cache[tenant] = cachedKeys{keys: keys, at: s.clock.Now()}
	s.mu.Unlock()
	return keys, nil
}

func (s *Secrets) forget(tenant string) {
	s.mu.Lock()
	delete(s.cache, tenant)
	s.mu.Unlock()
}

func fromRow(w store.WebhookSecret) Secret {
	return Secret{ID: w.ID, Tenant: w.Tenant, CreatedAt: w.CreatedAt, ExpiresAt: w.ExpiresAt}
}
