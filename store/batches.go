package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Batch is one row of gaffer.batches: a group of jobs whose callback job
// is enqueued exactly once, with the batch's summary, once the batch is
// closed and every one of its jobs is final (schema/batches.sql).
type Batch struct {
	ID     int64
	Tenant string
	// State is open, closed, cancelled or finished (the callback was
	// enqueued: CallbackJobID).
	State string
	// The callback job.
	CallbackKind        string
	CallbackQueue       string
	CallbackArgs        json.RawMessage
	CallbackPriority    int
	CallbackMaxAttempts int
	CallbackTimeout     time.Duration
	// Total is the jobs added; Completed, Failed and Cancelled those of
	// them that reached each final state.
	Total, Completed, Failed, Cancelled int64
	CreatedAt                           time.Time
	ClosedAt, CancelledAt, FinishedAt   *time.Time
	CallbackJobID                       int64
}

// BatchParams is a validated batch to open: its callback job.
type BatchParams struct {
	Tenant      string
	Kind        string
	Queue       string
	Args        json.RawMessage
	Priority    int
	MaxAttempts int
	Timeout     time.Duration
}

// Errors of adding jobs to a batch.
var (
	// ErrBatchClosed: the batch no longer takes jobs (closed, cancelled or
	// finished). Nothing was written.
	ErrBatchClosed = errors.New("the batch is closed: it takes no more jobs")
	// ErrBatchMixed: one InsertJobs call named more than one batch, or
	// jobs with and without one.
	ErrBatchMixed = errors.New("every job of one call must name the same batch, or none")
	// ErrBatchUnique: a job enqueued into a batch cannot carry a unique
	// key or debounce (a job it did not make would count in the batch).
	ErrBatchUnique = errors.New("a job enqueued into a batch takes no unique key or debounce")
)

var batchColumns = []string{
	"id", "tenant", "state", "callback_kind", "callback_queue", "callback_args", "callback_priority",
	"callback_max_attempts", "callback_timeout_ms", "total", "completed", "failed", "cancelled",
	"created_at", "closed_at", "cancelled_at", "finished_at", "callback_job_id",
}

// batchQuery is the named query with {{batch}} (and {{batch:x}}) expanded
// to batchColumns.
func batchQuery(name string) string {
	q := query(name)
	q = strings.ReplaceAll(q, "{{batch}}", strings.Join(batchColumns, ", "))
	cols := make([]string, len(batchColumns))
	for i, c := range batchColumns {
		cols[i] = "b." + c
	}
	return strings.ReplaceAll(q, "{{batch:b}}", strings.Join(cols, ", "))
}

var (
	sqlInsertBatch       = batchQuery("insert_batch")
	sqlBatchAdmit        = query("batch_admit")
	sqlBatchAdded        = query("batch_added")
	sqlBatchState        = query("batch_state")
	sqlGetBatch          = batchQuery("get_batch")
	sqlCloseBatch        = batchQuery("close_batch")
	sqlCancelBatch       = batchQuery("cancel_batch")
	sqlListBatches       = batchQuery("list_batches")
	sqlBatchJobStates    = query("batch_job_states")
	sqlBatchCallbackLags = query("batch_callback_lags")
)

func scanBatch(row pgx.Row) (Batch, error) {
	var b Batch
	var id, callback pgtype.Int8
	var priority int16
	var timeoutMS int64
	var args []byte
	var closed, cancelled, finished pgtype.Timestamptz
	err := row.Scan(&id, &b.Tenant, &b.State, &b.CallbackKind, &b.CallbackQueue, &args, &priority,
		&b.CallbackMaxAttempts, &timeoutMS, &b.Total, &b.Completed, &b.Failed, &b.Cancelled,
		&b.CreatedAt, &closed, &cancelled, &finished, &callback)
	if err != nil {
		return Batch{}, err
	}
	b.ID, b.CallbackJobID = id.Int64, callback.Int64
	b.CallbackArgs = jsonValue(args)
	b.CallbackPriority, b.CallbackTimeout = int(priority), time.Duration(timeoutMS)*time.Millisecond
	b.ClosedAt, b.CancelledAt, b.FinishedAt = timePtr(closed), timePtr(cancelled), timePtr(finished)
	return b, nil
}

// OpenBatch opens a batch through q (or the pool).
func (s *Store) OpenBatch(ctx context.Context, q DB, p BatchParams) (Batch, error) {
	b, err := scanBatch(s.db(q).QueryRow(ctx, sqlInsertBatch, p.Tenant, p.Kind, p.Queue, p.Args,
		int16(p.Priority), p.MaxAttempts, p.Timeout.Milliseconds()))
	if err != nil {
		return Batch{}, fmt.Errorf("open batch: %w", err)
	}
	return b, nil
}

// GetBatch returns a batch; tenant, when not empty, must own it. Errors:
// ErrNotFound.
func (s *Store) GetBatch(ctx context.Context, tenant string, id int64) (Batch, error) {
	b, err := scanBatch(s.pool.QueryRow(ctx, sqlGetBatch, id, nullString(tenant)))
	if err != nil {
		return Batch{}, fmt.Errorf("get batch %d: %w", id, notFound(err))
	}
	return b, nil
}

// BatchUnfinished counts a batch's unfinished jobs by state (pending,
// running, retrying), reading at most limit of them.
func (s *Store) BatchUnfinished(ctx context.Context, id int64, limit int) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, sqlBatchJobStates, id, limit)
	if err != nil {
		return nil, fmt.Errorf("batch %d states: %w", id, err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

// CloseBatch closes the tenant's batch: it takes no more jobs, and its
// callback is enqueued at once if every job of it is final (or when the
// last one is). Closing a batch that is not open changes nothing; either
// way the batch is returned. Errors: ErrNotFound.
func (s *Store) CloseBatch(ctx context.Context, tenant string, id int64) (Batch, error) {
	return s.batchCall(ctx, nil, sqlCloseBatch, "close", tenant, id)
}

// CloseBatchTx is CloseBatch within the caller's transaction q.
func (s *Store) CloseBatchTx(ctx context.Context, q DB, tenant string, id int64) (Batch, error) {
	return s.batchCall(ctx, q, sqlCloseBatch, "close", tenant, id)
}

// CancelBatch cancels the tenant's batch as a whole (batch_cancel). The
// callback still fires, once, when its last job is final. Errors:
// ErrNotFound.
func (s *Store) CancelBatch(ctx context.Context, tenant string, id int64) (Batch, error) {
	return s.batchCall(ctx, nil, sqlCancelBatch, "cancel", tenant, id)
}

// batchCall runs close_batch or cancel_batch through q (or the pool),
// again after a deadlock with a statement that finished jobs of the batch
// (PostgreSQL aborted one of the two; the lock order is job then batch,
// which a cancel cannot keep) — on the pool only: a caller's transaction
// is aborted by then.
func (s *Store) batchCall(ctx context.Context, q DB, sql, what, tenant string, id int64) (Batch, error) {
	var b Batch
	var err error
	for range 5 {
		b, err = scanBatch(s.db(q).QueryRow(ctx, sql, id, tenant))
		var pgErr *pgconn.PgError
		if q == nil && errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			continue
		}
		break
	}
	if err != nil {
		return Batch{}, fmt.Errorf("%s batch %d: %w", what, id, notFound(err))
	}
	return b, nil
}

// BatchFilter selects batches to list.
type BatchFilter struct {
	Tenant   string // "" for every tenant
	State    string // "" for any
	BeforeID int64
	Limit    int
}

// ListBatches lists batches newest first.
func (s *Store) ListBatches(ctx context.Context, f BatchFilter) ([]Batch, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := s.pool.Query(ctx, sqlListBatches, nullString(f.Tenant), nullString(f.State), f.BeforeID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	defer rows.Close()
	var out []Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("list batches: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// admitToBatch counts n jobs into the tenant's open batch within tx and
// names it for the transaction's next inserts (batch_job_added); the
// caller inserts them and then calls leaveBatch. Errors: ErrNotFound,
// ErrBatchClosed.
func admitToBatch(ctx context.Context, tx pgx.Tx, tenant string, batch int64, n int) error {
	var set string
	err := tx.QueryRow(ctx, sqlBatchAdmit, batch, tenant, n).Scan(&set)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("batch %d: %w", batch, err)
	}
	var state string
	if err := tx.QueryRow(ctx, sqlBatchState, batch, tenant).Scan(&state); err != nil {
		return fmt.Errorf("batch %d: %w", batch, notFound(err))
	}
	return fmt.Errorf("batch %d is %s: %w", batch, state, ErrBatchClosed)
}

func leaveBatch(ctx context.Context, tx pgx.Tx) error {
	var set string
	if err := tx.QueryRow(ctx, sqlBatchAdded).Scan(&set); err != nil {
		return fmt.Errorf("leave batch: %w", err)
	}
	return nil
}

// insertJobInBatch is InsertJob for a job enqueued into a batch: one
// transaction (a savepoint in the caller's) that counts it into the batch
// and inserts it with insert_job.
func (s *Store) insertJobInBatch(ctx context.Context, q DB, p InsertParams) (InsertResult, error) {
	if p.UniqueKey != "" || p.DebounceKey != "" {
		return InsertResult{}, fmt.Errorf("insert job: %w", ErrBatchUnique)
	}
	tx, err := s.begin(ctx, q)
	if err != nil {
		return InsertResult{}, fmt.Errorf("insert job: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := admitToBatch(ctx, tx, p.Tenant, p.Batch, 1); err != nil {
		return InsertResult{}, fmt.Errorf("insert job: %w", err)
	}
	p.Batch = 0
	res, err := s.InsertJob(ctx, tx, p)
	if err != nil {
		return InsertResult{}, err
	}
	if err := leaveBatch(ctx, tx); err != nil {
		return InsertResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return InsertResult{}, fmt.Errorf("insert job: commit: %w", err)
	}
	return res, nil
}

// insertJobsInBatch is InsertJobs for jobs that all name one batch.
func (s *Store) insertJobsInBatch(ctx context.Context, q DB, ps []InsertParams) ([]int64, error) {
	batch := ps[0].Batch
	plain := make([]InsertParams, len(ps))
	for i, p := range ps {
		if p.Batch != batch {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, ErrBatchMixed)
		}
		if p.UniqueKey != "" || p.DebounceKey != "" || p.Windowed() {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, ErrBatchUnique)
		}
		p.Batch = 0
		plain[i] = p
	}
	tx, err := s.begin(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := admitToBatch(ctx, tx, ps[0].Tenant, batch, len(ps)); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	for i, p := range ps {
		if p.Tenant != ps[0].Tenant {
			return nil, fmt.Errorf("insert jobs: job %d: %w", i, ErrBatchMixed)
		}
	}
	ids, err := s.InsertJobs(ctx, tx, plain)
	if err != nil {
		return nil, err
	}
	if err := leaveBatch(ctx, tx); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("insert jobs: commit: %w", err)
	}
	return ids, nil
}

// BatchCallbackLags returns, for each finished batch whose callback is of
// kind and has started, the milliseconds from its last job's final state
// to its callback's start (database clock; an empty batch's is left out).
func (s *Store) BatchCallbackLags(ctx context.Context, kind string) ([]float64, error) {
	rows, err := s.pool.Query(ctx, sqlBatchCallbackLags, kind)
	if err != nil {
		return nil, fmt.Errorf("batch callback lags: %w", err)
	}
	defer rows.Close()
	var out []float64
	for rows.Next() {
		var ms *float64
		if err := rows.Scan(&ms); err != nil {
			return nil, err
		}
		if ms != nil {
			out = append(out, *ms)
		}
	}
	return out, rows.Err()
}

var sqlDeleteFinishedBatches = query("delete_finished_batches")

// DeleteFinishedBatches deletes up to limit batches whose callback was
// enqueued more than age ago, through q (or the pool), and returns how
// many it deleted.
func (s *Store) DeleteFinishedBatches(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteFinishedBatches, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete finished batches: %w", err)
	}
	return tag.RowsAffected(), nil
}
