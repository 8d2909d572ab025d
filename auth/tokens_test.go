package auth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The token cache keeps nothing past its time: a token revoked on another
// node leaves this node's cache (for the negative one, which forgets it
// in turn), and tokens no longer used are swept out as others come in.
// Red without the sweep and the eviction of revoked tokens: the revoked
// token and the two idle ones stay cached until 10,000 others push the
// cache over its size.
func TestTokenCacheForgetsRevokedAndIdleTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewStore(t).Pool()
	admin := auth.NewTokens(pool) // another node: it revokes
	node := auth.NewTokens(pool)
	clock := &fakeClock{now: time.Now()}
	node.SetClock(clock.Now)
	create := func(name string) string {
		t.Helper()
		text, _, err := admin.Create(ctx, auth.NewTokenRequest{Name: name, Scopes: []string{auth.ScopeJobsRead}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := node.Authenticate(ctx, text); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return text
	}
	revoked := create("revoked")
	create("idle-1")
	create("idle-2")
	list, err := admin.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range list {
		if tok.Name == "revoked" {
			if err := admin.Revoke(ctx, tok.ID); err != nil {
				t.Fatal(err)
			}
		}
	}

	clock.Add(6 * time.Second) // past the 5s the cache vouches for a token
	if _, err := node.Authenticate(ctx, revoked); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("a token revoked on another node, after the cache time: %v, want ErrBadToken", err)
	}
	create("fresh")
	if known, bad := node.Cached(); known != 1 || bad != 1 {
		t.Fatalf("cache holds %d tokens and %d bad ones, want only the fresh token and the revoked one as bad", known, bad)
	}
	clock.Add(11 * time.Second)
	create("fresher")
	if known, bad := node.Cached(); known != 1 || bad != 0 {
		t.Fatalf("cache holds %d tokens and %d bad ones, want only the freshest token", known, bad)
	}
}
