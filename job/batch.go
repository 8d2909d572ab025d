package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/store"
)

// Errors of batches.
var (
	// ErrBatchNotFound: no such batch (or it belongs to another tenant).
	ErrBatchNotFound = errors.New("batch not found")
	// ErrBatchClosed: a job was enqueued into a batch that is closed,
	// cancelled or finished. Nothing was inserted.
	ErrBatchClosed = store.ErrBatchClosed
)

// Batch states.
const (
	BatchOpen      = "open"
	BatchClosed    = "closed"
	BatchCancelled = "cancelled"
	BatchFinished  = "finished"
)

// BatchStates are the states a batch can be in, in order.
var BatchStates = []string{BatchOpen, BatchClosed, BatchCancelled, BatchFinished}

// BatchRequest opens a batch: its tenant and its callback job, which is
// enqueued exactly once, when the batch is closed and every job of it is
// final, with the batch's summary as its args (BatchSummary).
type BatchRequest struct {
	Tenant string
	// The callback: Kind is required; the rest as a Request's.
	Kind        string
	Queue       string
	Args        any
	Priority    int
	MaxAttempts int
	Timeout     time.Duration
}

// MaxBatchArgsBytes bounds a batch's callback args (they are copied into
// its callback's summary).
const MaxBatchArgsBytes = 64 << 10

// BatchSummary is a batch callback's args.
type BatchSummary struct {
	Batch int64 `json:"batch"`
	// Args are the batch's callback args, as given when it was opened.
	Args      json.RawMessage `json:"args"`
	Total     int64           `json:"total"`
	Completed int64           `json:"completed"`
	Failed    int64           `json:"failed"`
	Cancelled int64           `json:"cancelled"`
	// FailedIDs are the batch's first 1000 failed jobs, by id;
	// FailedIDsTruncated says there were more.
	FailedIDs          []int64 `json:"failed_ids"`
	FailedIDsTruncated bool    `json:"failed_ids_truncated"`
	// BatchCancelled: the batch was cancelled as a whole.
	BatchCancelled bool `json:"batch_cancelled"`
}

// Batch is a batch's view: its state, callback, and its jobs' counts.
type Batch struct {
	ID     int64  `json:"id"`
	Tenant string `json:"tenant"`
	State  string `json:"state"`
	// Callback is the callback job's kind, queue and args.
	CallbackKind  string          `json:"callback_kind"`
	CallbackQueue string          `json:"callback_queue"`
	CallbackArgs  json.RawMessage `json:"callback_args"`
	// Total is the jobs added; Counts the number of them in each state
	// (pending, running and retrying read at most BatchCountCap each).
	Total         int64           `json:"total"`
	Counts        map[State]int64 `json:"counts"`
	CreatedAt     time.Time       `json:"created_at"`
	ClosedAt      *time.Time      `json:"closed_at,omitempty"`
	CancelledAt   *time.Time      `json:"cancelled_at,omitempty"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	CallbackJobID int64           `json:"callback_job_id,omitempty"`
}

// BatchCountCap bounds how many unfinished jobs a batch's view counts.
const BatchCountCap = 100000

func batchOf(b store.Batch) *Batch {
	return &Batch{
		ID: b.ID, Tenant: b.Tenant, State: b.State, CallbackKind: b.CallbackKind, CallbackQueue: b.CallbackQueue,
		CallbackArgs: b.CallbackArgs, Total: b.Total,
		Counts:    map[State]int64{Completed: b.Completed, Failed: b.Failed, Cancelled: b.Cancelled},
		CreatedAt: b.CreatedAt, ClosedAt: b.ClosedAt, CancelledAt: b.CancelledAt, FinishedAt: b.FinishedAt,
		CallbackJobID: b.CallbackJobID,
	}
}

// OpenBatch validates r and opens a batch. Errors: *ValidationError.
func (c *Client) OpenBatch(ctx context.Context, r BatchRequest) (*Batch, error) {
	return c.openBatch(ctx, nil, r)
}

// OpenBatchTx is OpenBatch within the caller's transaction: the batch
// exists if and only if tx commits. With EnqueueManyTx and CloseBatchTx
// in the same transaction, a batch is opened, filled and closed at once.
func (c *Client) OpenBatchTx(ctx context.Context, tx pgx.Tx, r BatchRequest) (*Batch, error) {
	if tx == nil {
		return nil, errors.New("open batch: nil transaction")
	}
	return c.openBatch(ctx, tx, r)
}

func (c *Client) openBatch(ctx context.Context, tx pgx.Tx, r BatchRequest) (*Batch, error) {
	// The callback is checked as the job it will be.
	p, err := c.prepare(Request{Kind: r.Kind, Tenant: r.Tenant, Queue: r.Queue, Args: r.Args,
		Priority: r.Priority, MaxAttempts: r.MaxAttempts, Timeout: r.Timeout})
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return nil, &ValidationError{Field: "callback." + ve.Field, Message: ve.Message, Code: ve.Code}
		}
		return nil, err
	}
	if len(p.Args) > MaxBatchArgsBytes {
		return nil, &ValidationError{Field: "callback.args", Message: fmt.Sprintf("must be at most %d bytes, got %d", MaxBatchArgsBytes, len(p.Args))}
	}
	var db store.DB
	if tx != nil {
		db = tx
	}
	b, err := c.store.OpenBatch(ctx, db, store.BatchParams{Tenant: p.Tenant, Kind: p.Kind, Queue: p.Queue, Args: p.Args,
		Priority: p.Priority, MaxAttempts: p.MaxAttempts, Timeout: p.Timeout})
	if err != nil {
		return nil, err
	}
	return batchOf(b), nil
}

func batchErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return ErrBatchNotFound
	}
	return err
}

// CloseBatch closes the tenant's batch: it takes no more jobs, and its
// callback is enqueued once every job of it is final — at once if they
// already are (or it has none). Closing a batch that is not open changes
// nothing. tenant "" matches any tenant's batch. Errors: ErrBatchNotFound.
func (c *Client) CloseBatch(ctx context.Context, tenant string, id int64) (*Batch, error) {
	if tenant == "" {
		b, err := c.store.GetBatch(ctx, "", id)
		if err != nil {
			return nil, batchErr(err)
		}
		tenant = b.Tenant
	}
	b, err := c.store.CloseBatch(ctx, tenant, id)
	if err != nil {
		return nil, batchErr(err)
	}
	return c.withCounts(ctx, b)
}

// CloseBatchTx closes the tenant's batch (as CloseBatch) within the
// caller's transaction; tenant is required. Its callback, if every job is
// final, is enqueued in tx. Errors: ErrBatchNotFound.
func (c *Client) CloseBatchTx(ctx context.Context, tx pgx.Tx, tenant string, id int64) (*Batch, error) {
	if tx == nil || tenant == "" {
		return nil, errors.New("close batch: a transaction and a tenant are required")
	}
	b, err := c.store.CloseBatchTx(ctx, tx, tenant, id)
	if err != nil {
		return nil, batchErr(err)
	}
	return batchOf(b), nil
}

// CancelBatch cancels the tenant's batch as a whole: it is closed, its
// pending and retrying jobs are cancelled and its running ones asked to
// stop. Its callback still fires once, when the last of them is final
// (BatchSummary.BatchCancelled). A finished or cancelled batch is left as
// it is. Errors: ErrBatchNotFound.
func (c *Client) CancelBatch(ctx context.Context, tenant string, id int64) (*Batch, error) {
	if tenant == "" {
		b, err := c.store.GetBatch(ctx, "", id)
		if err != nil {
			return nil, batchErr(err)
		}
		tenant = b.Tenant
	}
	b, err := c.store.CancelBatch(ctx, tenant, id)
	if err != nil {
		return nil, batchErr(err)
	}
	return c.withCounts(ctx, b)
}

// GetBatch returns a batch with its jobs' counts by state. tenant, when
// not empty, must own it. Errors: ErrBatchNotFound.
func (c *Client) GetBatch(ctx context.Context, tenant string, id int64) (*Batch, error) {
	b, err := c.store.GetBatch(ctx, tenant, id)
	if err != nil {
		return nil, batchErr(err)
	}
	return c.withCounts(ctx, b)
}

func (c *Client) withCounts(ctx context.Context, sb store.Batch) (*Batch, error) {
	b := batchOf(sb)
	if sb.Completed+sb.Failed+sb.Cancelled < sb.Total {
		open, err := c.store.BatchUnfinished(ctx, sb.ID, BatchCountCap)
		if err != nil {
			return nil, err
		}
		for st, n := range open {
			b.Counts[State(st)] = n
		}
	}
	return b, nil
}

// BatchFilter selects batches to list: a tenant's ("" for every
// tenant's), in a state ("" for any), newest first, before an id.
type BatchFilter struct {
	Tenant   string
	State    string
	BeforeID int64
	Limit    int
}

// MaxBatchList bounds one page of ListBatches: the API's largest page
// (1,000) and one more, which tells it whether another page follows.
const MaxBatchList = 1001

// ListBatches lists batches newest first (without their unfinished
// counts: Counts has the final states only).
func (c *Client) ListBatches(ctx context.Context, f BatchFilter) ([]*Batch, error) {
	if f.State != "" && !validBatchState(f.State) {
		return nil, &ValidationError{Field: "state", Message: fmt.Sprintf("must be one of %v, got %q", BatchStates, capString(f.State, 64))}
	}
	if f.Limit <= 0 || f.Limit > MaxBatchList {
		f.Limit = min(max(f.Limit, 0), MaxBatchList)
		if f.Limit == 0 {
			f.Limit = 100
		}
	}
	rows, err := c.store.ListBatches(ctx, store.BatchFilter{Tenant: f.Tenant, State: f.State, BeforeID: f.BeforeID, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]*Batch, len(rows))
	for i, b := range rows {
		out[i] = batchOf(b)
	}
	return out, nil
}

func validBatchState(s string) bool {
	for _, st := range BatchStates {
		if s == st {
			return true
		}
	}
	return false
}

func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// enqueueErr names a refusal of an enqueue into a batch as job's errors
// (an enqueue without a batch meets none of them).
func enqueueErr(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound) && !errors.Is(err, ErrBatchNotFound):
		return fmt.Errorf("%w: %w", ErrBatchNotFound, err)
	case errors.Is(err, store.ErrBatchMixed), errors.Is(err, store.ErrBatchUnique):
		return &ValidationError{Field: "batch", Message: errors.Unwrap(err).Error()}
	}
	return err
}

// Count is the batch's jobs in state s (a state's name).
func (b *Batch) Count(s string) int64 { return b.Counts[State(s)] }
