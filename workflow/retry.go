package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/gafferhq/gaffer/store"
)

// ErrStepNotRetryable refuses RetryStep: the step did not fail, its run
// was cancelled or completed, or its failed job's DLQ entry was replayed
// or purged.
var ErrStepNotRetryable = errors.New("the step cannot be retried")

// RetryStep runs a failed step of a run again: the DLQ entry its failed
// job left is replayed into one new job, which the step follows (see
// "DLQ replay" in the package doc). A failed run returns to running when
// no other step holds it failed — the steps its failure cancelled wait
// again, and its dependants run once the step completes. Only a step
// that failed, of a run that is running or failed, is retried; a second
// RetryStep of the same failure finds the entry replayed and refuses.
// It returns the new job's id. Errors: ErrNotFound (no such run or
// step), ErrStepNotRetryable.
func (c *Client) RetryStep(ctx context.Context, tenant string, id int64, step string) (int64, error) {
	run, err := c.Get(ctx, tenant, id)
	if err != nil {
		return 0, err
	}
	var s *StepState
	for i := range run.Steps {
		if run.Steps[i].Name == step {
			s = &run.Steps[i]
		}
	}
	switch {
	case s == nil:
		return 0, fmt.Errorf("%w: run %d has no step %q", ErrNotFound, id, step)
	case run.State != Running && run.State != Failed:
		return 0, fmt.Errorf("%w: run %d is %s", ErrStepNotRetryable, id, run.State)
	case s.State != Failed || s.JobID == 0:
		return 0, fmt.Errorf("%w: step %q is %s, not failed", ErrStepNotRetryable, step, s.State)
	}
	entries, err := c.store.ListDLQ(ctx, store.DLQFilter{Tenant: tenant, JobID: s.JobID, Limit: 1})
	if err != nil {
		return 0, err
	}
	if len(entries) == 0 {
		return 0, fmt.Errorf("%w: the DLQ entry of its job %d was purged", ErrStepNotRetryable, s.JobID)
	}
	r, err := c.store.ReplayDLQEntry(ctx, tenant, entries[0].ID)
	switch {
	case errors.Is(err, store.ErrAlreadyReplayed):
		return 0, fmt.Errorf("%w: it was retried already (DLQ entry %d replayed)", ErrStepNotRetryable, entries[0].ID)
	case errors.Is(err, store.ErrNotFound):
		return 0, fmt.Errorf("%w: the DLQ entry of its job %d was purged", ErrStepNotRetryable, s.JobID)
	case err != nil:
		return 0, err
	}
	return r.JobID, nil
}
