package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Sequence is where a sequence stands (store/schema/sequences.sql).
type Sequence struct {
	Tenant string
	Key    string
	// Head is the job whose turn it is (0: none); HaltedBy the failed job
	// that halted the sequence (0: not halted), HaltedAt when.
	Head     int64
	HaltedBy int64
	HaltedAt *time.Time
	Since    time.Time
	// Held counts the jobs waiting their turn, up to MaxHeldCount.
	Held int64
}

// MaxHeldCount caps GetSequence's count of held jobs.
const MaxHeldCount = 10000

var (
	sqlGetSequence    = query("get_sequence")
	sqlResumeSequence = query("resume_sequence")
)

// GetSequence returns the tenant's sequence key, or ErrNotFound when it
// has no work and is not halted (a sequence exists only then).
func (s *Store) GetSequence(ctx context.Context, tenant, key string) (Sequence, error) {
	out := Sequence{Tenant: tenant, Key: key}
	var head, halted pgtype.Int8
	var haltedAt pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, sqlGetSequence, tenant, key, MaxHeldCount).Scan(&head, &halted, &haltedAt, &out.Since, &out.Held)
	if errors.Is(err, pgx.ErrNoRows) {
		return Sequence{}, ErrNotFound
	}
	if err != nil {
		return Sequence{}, fmt.Errorf("get sequence: %w", err)
	}
	out.Head, out.HaltedBy, out.HaltedAt = head.Int64, halted.Int64, timePtr(haltedAt)
	return out, nil
}

// ResumeSequence lets a halted sequence go on: its oldest held job takes
// the turn (the failed job that halted it stays failed). It reports
// whether the sequence was halted, and the job whose turn it now is (0:
// none).
func (s *Store) ResumeSequence(ctx context.Context, tenant, key string) (resumed bool, head int64, err error) {
	var h pgtype.Int8
	if err := s.pool.QueryRow(ctx, sqlResumeSequence, tenant, key).Scan(&resumed, &h); err != nil {
		return false, 0, fmt.Errorf("resume sequence: %w", err)
	}
	return resumed, h.Int64, nil
}
