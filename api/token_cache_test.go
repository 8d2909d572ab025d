package api_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// tokenLookups counts the token lookups a pool sends to PostgreSQL.
type tokenLookups struct{ n atomic.Int64 }

func (c *tokenLookups) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM gaffer.api_tokens WHERE hash") {
		c.n.Add(1)
	}
	return ctx
}

func (c *tokenLookups) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func countingStore(t *testing.T) (*store.Store, *tokenLookups) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	counter := &tokenLookups{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool), counter
}

// A bad token sent again and again costs one database query, not one per
// request: unknown tokens are remembered for a few seconds. Red without
// the negative cache: every attempt was a query.
func TestBadTokensAreCached(t *testing.T) {
	t.Parallel()
	st, lookups := countingStore(t)
	tokens := auth.NewTokens(st.Pool())
	ctx := context.Background()
	for range 50 {
		if _, err := tokens.Authenticate(ctx, "gft_not-a-token-anyone-made"); !errors.Is(err, auth.ErrBadToken) {
			t.Fatalf("bad token: %v", err)
		}
	}
	if n := lookups.n.Load(); n != 1 {
		t.Fatalf("50 tries of one bad token cost %d queries, want 1", n)
	}
	// Different bad tokens are each looked up once (the counter counts).
	for _, s := range []string{"gft_other-bad-token-1", "gft_other-bad-token-2"} {
		tokens.Authenticate(ctx, s)
		tokens.Authenticate(ctx, s)
	}
	if n := lookups.n.Load(); n != 3 {
		t.Fatalf("two more bad tokens: %d queries in all, want 3", n)
	}
	// A token created after it was tried works at once on the node that
	// created it.
	fixed := "gft_created-after-it-was-tried"
	if _, err := tokens.Authenticate(ctx, fixed); !errors.Is(err, auth.ErrBadToken) {
		t.Fatalf("before creation: %v", err)
	}
	if _, _, err := tokens.Create(ctx, auth.NewTokenRequest{Name: "late", Scopes: []string{auth.ScopeJobsRead}, Secret: fixed}); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Authenticate(ctx, fixed); err != nil {
		t.Fatalf("a token just created is refused: %v", err)
	}
}
