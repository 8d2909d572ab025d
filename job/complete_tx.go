package job

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/store"
)

// CompleteTx completes the running attempt of j inside the caller's
// transaction, so that the handler's own writes in tx and the job's
// completion commit together or not at all: effects written this way
// happen exactly once, however often the job runs. It is compare-and-set
// on the attempt's lease like every completion: if the attempt no longer
// owns the job it returns ErrLeaseLost and tx must be rolled back.
//
// Commit tx before the handler returns nil. If tx rolls back instead, the
// attempt is treated as lost: the job runs again once its lease expires.
// The job's result is the one set with SetResult before the call.
func CompleteTx(ctx context.Context, tx pgx.Tx, j *Job) error {
	if j.lease.Token == 0 {
		return errors.New("CompleteTx: the job is not a running attempt handed to a handler")
	}
	st := store.New(nil)
	ok, err := st.CompleteJobs(ctx, tx, []store.Completion{{Lease: j.lease, Result: j.result}})
	if err != nil {
		return fmt.Errorf("complete job %d in transaction: %w", j.ID, err)
	}
	if len(ok) != 1 {
		return ErrLeaseLost
	}
	j.completedInTx = true
	return nil
}
