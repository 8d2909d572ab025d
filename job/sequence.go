package job

import (
	"context"
	"errors"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// SequenceStatus is where a sequence stands (docs/shaping.md#sequences).
type SequenceStatus struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
	// Head is the job whose turn it is (0: none: the sequence is halted).
	Head int64 `json:"head,omitempty"`
	// HaltedBy is the failed job that halted the sequence (0: not
	// halted), HaltedAt when it failed.
	HaltedBy int64      `json:"halted_by,omitempty"`
	HaltedAt *time.Time `json:"halted_at,omitempty"`
	// Held counts the jobs waiting their turn, up to MaxHeldCount.
	Held int64 `json:"held"`
	// Since is when the sequence last started from empty.
	Since time.Time `json:"since"`
}

// MaxHeldCount caps SequenceStatus.Held.
const MaxHeldCount = store.MaxHeldCount

// Sequence returns the tenant's sequence key. A sequence exists while
// it has jobs not yet ended or is halted; otherwise ErrNotFound.
func (c *Client) Sequence(ctx context.Context, tenant, key string) (SequenceStatus, error) {
	if tenant == "" {
		tenant = DefaultTenant
	}
	s, err := c.store.GetSequence(ctx, tenant, key)
	if errors.Is(err, store.ErrNotFound) {
		return SequenceStatus{}, ErrNotFound
	}
	if err != nil {
		return SequenceStatus{}, err
	}
	return SequenceStatus{Tenant: s.Tenant, Key: s.Key, Head: s.Head, HaltedBy: s.HaltedBy, HaltedAt: s.HaltedAt, Held: s.Held, Since: s.Since}, nil
}

// ErrNotHalted: ResumeSequence was asked of a sequence that is not
// halted.
var ErrNotHalted = errors.New("the sequence is not halted")

// ResumeSequence lets a halted sequence go on: the failed job that halted
// it stays failed (and in the DLQ; replaying it later makes a job that
// joins the sequence's end), and the oldest held job takes the turn. It
// returns that job's id (0: none was waiting). Errors: ErrNotFound (no
// such sequence), ErrNotHalted.
func (c *Client) ResumeSequence(ctx context.Context, tenant, key string) (int64, error) {
	if tenant == "" {
		tenant = DefaultTenant
	}
	resumed, head, err := c.store.ResumeSequence(ctx, tenant, key)
	if err != nil {
		return 0, err
	}
	if !resumed {
		if _, err := c.store.GetSequence(ctx, tenant, key); errors.Is(err, store.ErrNotFound) {
			return 0, ErrNotFound
		}
		return 0, ErrNotHalted
	}
	return head, nil
}
