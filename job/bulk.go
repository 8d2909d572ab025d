package job

import (
	"context"
	"fmt"
	"slices"

	"github.com/gafferhq/gaffer/store"
)

// BulkAction is what Client.Bulk does to the jobs it selects.
type BulkAction string

// The bulk actions. Each does to every job it acts on what the single-job
// call does: Cancel as Client.Cancel (a running job's handler is
// cancelled), Retry as Client.Retry (a retrying job becomes due now, a
// failed job's DLQ entry is replayed into one new job). Delete removes
// jobs that are not running; a job of a workflow run still running is
// never deleted (the run waits on its steps' jobs and reads their
// results), and a failed job's DLQ entry stays.
const (
	BulkCancel BulkAction = "cancel"
	BulkRetry  BulkAction = "retry"
	BulkDelete BulkAction = "delete"
)

// BulkActions are the bulk actions.
var BulkActions = []BulkAction{BulkCancel, BulkRetry, BulkDelete}

// Bounds of a bulk call: at most MaxBulkIDs ids, and at most MaxBulkLimit
// jobs acted on (or counted, for a dry run) per call, in one statement,
// so that one call never holds the locks of millions of rows.
const (
	MaxBulkIDs   = 1000
	MaxBulkLimit = 10000
)

// BulkRequest selects jobs for a bulk action: those matching Filter
// (BeforeID, Limit and MaxBytes must be zero; Search and Args select, as
// List does, among the newest SearchWindow jobs the other fields select)
// and, when IDs is not empty, only those ids. Filter.Tenant confines the call to one tenant's jobs ("" = every
// tenant: an operator's).
type BulkRequest struct {
	Action BulkAction
	Filter Filter
	IDs    []int64
	// Limit is the most jobs acted on (or counted) in this call: 1 to
	// MaxBulkLimit, 0 for MaxBulkLimit.
	Limit int
	// DryRun counts the jobs the action would act on (up to Limit) and
	// changes nothing.
	DryRun bool
}

// BulkResult is what a bulk call did.
type BulkResult struct {
	Action BulkAction `json:"action"`
	DryRun bool       `json:"dry_run"`
	// Matched is how many selected jobs the action applies to, counted up
	// to the call's limit: for a dry run, the count; otherwise the jobs
	// this call acted on.
	Matched int `json:"matched"`
	// Acted is how many jobs the call changed (0 for a dry run).
	Acted int `json:"acted"`
	// Cancelling is how many of the cancelled jobs were running: their
	// handlers are being cancelled, and they end cancelled when they stop.
	Cancelling int `json:"cancelling,omitempty"`
	// Retried are, for a retry, the jobs acted on and the job that will
	// run for each: itself (it was retrying) or a failed job's replay.
	Retried []BulkRetried `json:"retried,omitempty"`
	// More says selected jobs the action applies to remain: beyond the
	// dry run's count or this call's limit, or held by another
	// transaction when the call ran. Call again to go on.
	More bool `json:"more"`
	// Skipped are the ids the request named that were not acted on, with
	// why (only for a request by ids).
	Skipped []BulkSkip `json:"skipped,omitempty"`
}

// BulkRetried is one job a bulk retry acted on and the job that will
// run.
type BulkRetried struct {
	ID    int64 `json:"id"`
	RunID int64 `json:"run_id"`
}

// BulkSkip is an id a bulk call named and did not act on.
type BulkSkip struct {
	ID     int64  `json:"id"`
	Reason string `json:"reason"`
}

// Validate checks a bulk request, naming the field that is wrong.
func (r BulkRequest) Validate() error {
	if !slices.Contains(BulkActions, r.Action) {
		return &ValidationError{Field: "action", Message: fmt.Sprintf("must be cancel, retry or delete; got %q", clip([]byte(r.Action), 40))}
	}
	if r.Limit < 0 || r.Limit > MaxBulkLimit {
		return &ValidationError{Field: "limit", Message: fmt.Sprintf("must be between 1 and %d (0: %d), got %d", MaxBulkLimit, MaxBulkLimit, r.Limit)}
	}
	if len(r.IDs) > MaxBulkIDs {
		return &ValidationError{Field: "ids", Message: fmt.Sprintf("at most %d ids per call, got %d; select by filter, or split the ids", MaxBulkIDs, len(r.IDs))}
	}
	for i, id := range r.IDs {
		if id <= 0 {
			return &ValidationError{Field: fmt.Sprintf("ids[%d]", i), Message: fmt.Sprintf("must be a job id (a positive integer), got %d", id)}
		}
	}
	if r.Filter.BeforeID != 0 || r.Filter.Limit != 0 || r.Filter.MaxBytes != 0 {
		return &ValidationError{Field: "filter", Message: "a bulk filter takes no cursor, limit or byte bound"}
	}
	return r.Filter.Validate()
}

func (r BulkRequest) selection() store.BulkSelection {
	ids := slices.Clone(r.IDs)
	slices.Sort(ids)
	return store.BulkSelection{Filter: r.Filter.store(), IDs: slices.Compact(ids)}
}

// Bulk cancels, retries or deletes the jobs r selects, at most r.Limit
// (MaxBulkLimit) of them in one statement, in id order; jobs another
// transaction holds at that moment (a claim, a completion) are skipped
// and left for the next call. Result.More says whether selected jobs the
// action applies to remain. A dry run only counts them. Errors:
// *ValidationError for a bad request.
func (c *Client) Bulk(ctx context.Context, r BulkRequest) (BulkResult, error) {
	if err := r.Validate(); err != nil {
		return BulkResult{}, err
	}
	limit := r.Limit
	if limit == 0 {
		limit = MaxBulkLimit
	}
	sel := r.selection()
	action := store.BulkAction(r.Action)
	res := BulkResult{Action: r.Action, DryRun: r.DryRun}
	if r.DryRun {
		n, err := c.store.CountBulk(ctx, action, sel, limit+1)
		if err != nil {
			return BulkResult{}, err
		}
		res.Matched, res.More = min(n, limit), n > limit
		return res, nil
	}
	acted, more, err := c.store.BulkJobs(ctx, action, sel, limit)
	if err != nil {
		return BulkResult{}, err
	}
	res.More = more
	seen := map[int64]bool{}
	for _, a := range acted {
		if seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		res.Acted++
		switch r.Action {
		case BulkCancel:
			if a.State == string(Running) {
				res.Cancelling++
			}
		case BulkRetry:
			res.Retried = append(res.Retried, BulkRetried{ID: a.ID, RunID: a.RunID})
		}
	}
	res.Matched = res.Acted
	if len(sel.IDs) > 0 && res.Acted < len(sel.IDs) {
		if res.Skipped, err = c.bulkSkipped(ctx, r, sel, seen); err != nil {
			return res, err
		}
	}
	return res, nil
}

// bulkSkipped says why each id of sel the call did not act on was left.
func (c *Client) bulkSkipped(ctx context.Context, r BulkRequest, sel store.BulkSelection, acted map[int64]bool) ([]BulkSkip, error) {
	var rest []int64
	for _, id := range sel.IDs {
		if !acted[id] {
			rest = append(rest, id)
		}
	}
	states, err := c.store.BulkStates(ctx, r.Filter.Tenant, rest)
	if err != nil {
		return nil, err
	}
	byID := map[int64]store.BulkJobState{}
	for _, s := range states {
		byID[s.ID] = s
	}
	out := make([]BulkSkip, 0, len(rest))
	for _, id := range rest {
		s, ok := byID[id]
		if !ok {
			out = append(out, BulkSkip{ID: id, Reason: "not found"})
			continue
		}
		out = append(out, BulkSkip{ID: id, Reason: skipReason(r.Action, s)})
	}
	return out, nil
}

func skipReason(action BulkAction, s store.BulkJobState) string {
	other := "it does not match the filter, or another transaction held it (try again)"
	switch action {
	case BulkCancel:
		switch {
		case s.State == string(Running) && s.CancelRequested:
			return "it is running and its cancel was already requested"
		case State(s.State).Finished():
			return "it already finished (" + s.State + "); there is nothing to cancel"
		}
	case BulkRetry:
		switch {
		case s.State == string(Retrying) && s.Due:
			return "it is retrying and already due"
		case s.State == string(Failed) && !s.Replayable:
			return "it failed and its DLQ entry was replayed or purged"
		case s.State != string(Retrying) && s.State != string(Failed):
			return "it is " + s.State + "; only a retrying job, or a failed one whose DLQ entry is unreplayed, can be retried"
		}
	case BulkDelete:
		switch {
		case s.State == string(Running):
			return "it is running; cancel it first"
		case s.RunRunning:
			return "it is a step of a workflow run still running; cancel the run first"
		}
	}
	return other
}
