package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var sqlReadyRotate = query("ready_rotate")

// ReadyTurn is what one turn of the ready set's ring did (TurnReadyRing).
type ReadyTurn struct {
	Turned bool // the ring turned: a slot was emptied
	Moved  int  // live rows moved out of the emptied slot
	// Why it did not turn: "busy" (another turn under way), "locked" (a
	// transaction kept the slot's lock past the wait) or "full" (the slot
	// holds more rows than the move allows: a backlog, left in place).
	Why string
}

// TurnReadyRing turns the ready set's ring one step, if it can: it empties
// the slot written two steps ago, moving its live rows forward when they
// are at most moveMax, and makes it the slot new rows enter. It waits at
// most wait for the slot's lock; claims queue behind a waiting turn, so
// keep it short. See store/schema/ready.sql, gaffer.ready_rotate.
func (s *Store) TurnReadyRing(ctx context.Context, moveMax int, wait time.Duration) (ReadyTurn, error) {
	var t ReadyTurn
	ms := max(int(wait/time.Millisecond), 1)
	// READ COMMITTED whatever the database's default: the turn counts and
	// moves what committed while it waited for the slot's lock.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return ReadyTurn{}, fmt.Errorf("turn the ready ring: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := tx.QueryRow(ctx, sqlReadyRotate, moveMax, ms).Scan(&t.Turned, &t.Moved, &t.Why); err != nil {
		return ReadyTurn{}, fmt.Errorf("turn the ready ring: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return ReadyTurn{}, fmt.Errorf("turn the ready ring: %w", err)
	}
	return t, nil
}
