package ui

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

func (h *Handler) batchesPage(r *http.Request, v *view) error {
	v.Title = "Batches"
	state := r.URL.Query().Get("state")
	before, err := idParam(r, "before")
	if err != nil {
		return err
	}
	batches, err := h.cfg.Jobs.ListBatches(r.Context(), job.BatchFilter{Tenant: v.P.ReadTenant(v.Tenant), State: state, BeforeID: before, Limit: pageSize})
	if err != nil {
		return err
	}
	var older int64
	if len(batches) == pageSize {
		older = batches[len(batches)-1].ID
	}
	v.Data = struct {
		States        []string
		State         string
		Batches       []*job.Batch
		Before, Older int64
	}{job.BatchStates, state, batches, before, older}
	return nil
}

// batchView is a batch's page: the batch, its progress, a page of its
// jobs.
type batchView struct {
	Batch *job.Batch
	// Done is its jobs that are final; Percent of Total.
	Done    int64
	Percent int
	// States are the job states in order, for the counts.
	States []job.State
	Jobs   []*job.Job
	// Before and Older page its jobs, newest first.
	Before, Older int64
}

func (h *Handler) batchPage(r *http.Request, v *view) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	b, err := h.cfg.Jobs.GetBatch(r.Context(), v.P.ReadTenant(""), id)
	if err != nil {
		return err
	}
	before, err := idParam(r, "before")
	if err != nil {
		return err
	}
	jobs, more, err := h.cfg.Jobs.ListPage(r.Context(), job.Filter{Tenant: b.Tenant, Batch: b.ID, BeforeID: before, Limit: pageSize, MaxBytes: h.cfg.MaxPageBytes})
	if err != nil {
		return err
	}
	d := batchView{Batch: b, States: job.States, Jobs: jobs, Before: before}
	if more && len(jobs) > 0 {
		d.Older = jobs[len(jobs)-1].ID
	}
	d.Done = b.Counts[job.Completed] + b.Counts[job.Failed] + b.Counts[job.Cancelled]
	if b.Total > 0 {
		d.Percent = int(d.Done * 100 / b.Total)
	}
	v.Title = "Batch " + strconv.FormatInt(id, 10)
	v.Data = d
	return nil
}

func (h *Handler) closeBatch(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "/ui/batches", "", err
	}
	to := fmt.Sprintf("/ui/batches/%d", id)
	if _, err := h.cfg.Jobs.CloseBatch(r.Context(), p.ReadTenant(""), id); err != nil {
		return to, "", err
	}
	return to, fmt.Sprintf("Batch %d closed.", id), nil
}

func (h *Handler) cancelBatch(r *http.Request, p auth.Principal) (string, string, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return "/ui/batches", "", err
	}
	to := fmt.Sprintf("/ui/batches/%d", id)
	if _, err := h.cfg.Jobs.CancelBatch(r.Context(), p.ReadTenant(""), id); err != nil {
		return to, "", err
	}
	return to, fmt.Sprintf("Batch %d cancelled.", id), nil
}
