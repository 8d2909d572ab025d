package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors.
var (
	// ErrNotFound: no such entry (or it belongs to another tenant).
	ErrNotFound = errors.New("DLQ entry not found")
	// ErrAlreadyReplayed: the entry was replayed before; replaying again
	// would run the job twice.
	ErrAlreadyReplayed = errors.New("DLQ entry already replayed")
)

// Entry is a job that failed for good.
type Entry struct {
	ID          int64              `json:"id"`
	Tenant      string             `json:"tenant"`
	JobID       int64              `json:"job_id"`
	Kind        string             `json:"kind"`
	Queue       string             `json:"queue"`
	Priority    int                `json:"priority"`
	MaxAttempts int                `json:"max_attempts"`
	Attempts    int                `json:"attempts"`
	Timeout     time.Duration      `json:"-"`
	Args        json.RawMessage    `json:"args"`
	Errors      []job.AttemptError `json:"errors"`
	// Reason is "exhausted", "permanent" or "lost".
	Reason      string     `json:"reason"`
	FailedAt    time.Time  `json:"failed_at"`
	ReplayedAt  *time.Time `json:"replayed_at,omitempty"`
	ReplayJobID int64      `json:"replay_job_id,omitempty"`
	// WorkflowRun and Step: the job was a workflow step; replaying it
	// resumes the run.
	WorkflowRun int64  `json:"workflow_run,omitempty"`
	Step        string `json:"step,omitempty"`
}

// Filter selects entries; zero fields do not filter.
type Filter struct {
	Tenant        string
	Queue         string
	Kind          string
	FailedAfter   time.Time // inclusive
	FailedBefore  time.Time // exclusive
	ErrorContains string    // case-insensitive, in any attempt's error
	JobID         int64     // the entry of this job
	// Replayed, when set, keeps only replayed (true) or unreplayed (false)
	// entries.
	Replayed *bool
	BeforeID int64 // pagination cursor: entries with smaller ids
	Limit    int   // default 100, at most 1000
	// MaxBytes ends a List early, once the entries read take about this
	// many bytes as JSON (the entry that crosses it is the last); 0: no
	// bound. Replays and purges do not read it.
	MaxBytes int
}

// Validate checks the filter's fields.
func (f Filter) Validate() error {
	if f.Queue != "" {
		if err := job.ValidateName("queue", f.Queue); err != nil {
			return err
		}
	}
	if f.Kind != "" {
		if err := job.ValidateKind(f.Kind); err != nil {
			return err
		}
	}
	if !f.FailedAfter.IsZero() && !f.FailedBefore.IsZero() && !f.FailedAfter.Before(f.FailedBefore) {
		return &job.ValidationError{Field: "failed_after", Message: "must be before failed_before"}
	}
	if f.Limit < 0 {
		return &job.ValidationError{Field: "limit", Message: "must not be negative"}
	}
	return nil
}

func (f Filter) store() store.DLQFilter {
	return store.DLQFilter{Tenant: f.Tenant, Queue: f.Queue, Kind: f.Kind, FailedAfter: f.FailedAfter,
		FailedBefore: f.FailedBefore, ErrorContains: f.ErrorContains, JobID: f.JobID, Replayed: f.Replayed, BeforeID: f.BeforeID, Limit: f.Limit,
		MaxBytes: f.MaxBytes}
}

// Replay is one entry replayed into one new job.
type Replay struct {
	EntryID int64 `json:"entry_id"`
	JobID   int64 `json:"job_id"`
}

// Client lists, replays and purges DLQ entries. Safe for concurrent use.
type Client struct {
	store *store.Store
}

// NewClient returns a client on st.
func NewClient(pool *pgxpool.Pool) *Client { return &Client{store: store.New(pool)} }

// List returns entries matching f, newest first.
func (c *Client) List(ctx context.Context, f Filter) ([]Entry, error) {
	entries, _, err := c.ListPage(ctx, f)
	return entries, err
}

// ListPage is List saying also whether entries may follow those it
// returns (it stopped at f.Limit or f.MaxBytes): the next page is the
// entries before the last one returned (Filter.BeforeID).
func (c *Client) ListPage(ctx context.Context, f Filter) (entries []Entry, more bool, _ error) {
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	rows, more, err := c.store.ListDLQPage(ctx, f.store())
	if err != nil {
		return nil, false, err
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, more, nil
}

// Get returns one entry; tenant, when not empty, must own it.
func (c *Client) Get(ctx context.Context, tenant string, id int64) (Entry, error) {
	r, err := c.store.GetDLQEntry(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, err
	}
	return fromRow(r), nil
}

// Replay creates one new job from the entry, in the transaction that marks
// the entry replayed. A second replay of the same entry, even a concurrent
// one, gets ErrAlreadyReplayed. Errors: ErrNotFound, ErrAlreadyReplayed.
func (c *Client) Replay(ctx context.Context, tenant string, id int64) (Replay, error) {
	r, err := c.store.ReplayDLQEntry(ctx, tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Replay{}, ErrNotFound
	case errors.Is(err, store.ErrAlreadyReplayed):
		// Keep the store's "(into job N)".
		return Replay{}, fmt.Errorf("%w%s", ErrAlreadyReplayed, strings.TrimPrefix(err.Error(), store.ErrAlreadyReplayed.Error()))
	case err != nil:
		return Replay{}, err
	}
	return Replay{EntryID: r.EntryID, JobID: r.JobID}, nil
}

// ReplayMatching replays every unreplayed entry matching f (f.Limit caps
// how many; zero means all), in batches, each entry into exactly one job.
func (c *Client) ReplayMatching(ctx context.Context, f Filter) ([]Replay, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	const batch = 500
	var out []Replay
	for f.Limit == 0 || len(out) < f.Limit {
		n := batch
		if f.Limit > 0 {
			n = min(n, f.Limit-len(out))
		}
		rs, err := c.store.ReplayDLQ(ctx, f.store(), n)
		for _, r := range rs {
			out = append(out, Replay{EntryID: r.EntryID, JobID: r.JobID})
		}
		if err != nil {
			return out, err
		}
		if len(rs) < n {
			break
		}
	}
	return out, nil
}

// CountUnreplayed counts a tenant's ("": every tenant's) entries not yet
// replayed, stopping at limit: a count equal to it means at least that
// many, and stays fast on a table of millions.
func (c *Client) CountUnreplayed(ctx context.Context, tenant string, limit int) (int64, error) {
	return c.store.CountDLQCapped(ctx, tenant, limit)
}

// Delete removes one entry. Errors: ErrNotFound.
func (c *Client) Delete(ctx context.Context, tenant string, id int64) error {
	err := c.store.DeleteDLQEntry(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Purge deletes every entry matching f (ignoring its Limit and cursor) and
// returns how many.
func (c *Client) Purge(ctx context.Context, f Filter) (int64, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	return c.store.PurgeDLQ(ctx, f.store())
}

func fromRow(r store.DLQEntry) Entry {
	e := Entry{ID: r.ID, Tenant: r.Tenant, JobID: r.JobID, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority,
		MaxAttempts: r.MaxAttempts, Attempts: r.Attempts, Timeout: r.Timeout, Args: r.Args, Reason: r.Reason,
		FailedAt: r.FailedAt, ReplayedAt: r.ReplayedAt, ReplayJobID: r.ReplayJobID, WorkflowRun: r.WorkflowRun, Step: r.Step}
	_ = json.Unmarshal(r.Errors, &e.Errors) // written only by the store: always an array
	if e.Errors == nil {
		e.Errors = []job.AttemptError{}
	}
	return e
}
