package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// FencedWhile asks its caller once its transaction has begun, before the
// fence is read: a caller no longer trusting its leadership writes
// nothing and is told so, not refused by the fence; one still trusting it
// writes under the fence as Fenced does.
func TestFencedWhileAsksBeforeTheFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.NewStore(t)
	if ok, err := st.RaiseFence(ctx, 7, "me", time.Second); err != nil || !ok {
		t.Fatalf("raise fence: %v, %v", ok, err)
	}
	ran := 0
	write := func(tx pgx.Tx) error { ran++; return nil }
	if err := st.FencedWhile(ctx, 7, func() bool { return false }, write); !errors.Is(err, store.ErrNoLongerTrusted) || ran != 0 {
		t.Fatalf("untrusted: err %v, wrote %d times; want ErrNoLongerTrusted and no write", err, ran)
	}
	if err := st.FencedWhile(ctx, 7, func() bool { return true }, write); err != nil || ran != 1 {
		t.Fatalf("trusted: err %v, wrote %d times; want one write", err, ran)
	}
	if err := st.FencedWhile(ctx, 6, func() bool { return true }, write); !errors.Is(err, store.ErrFenced) || ran != 1 {
		t.Fatalf("an older epoch: err %v, wrote %d times; want ErrFenced and no write", err, ran)
	}
}
