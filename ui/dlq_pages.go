package ui

import (
	"net/http"
	"strconv"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/dlq"
)

type dlqData struct {
	Queue, Kind, Error, Show string
	Before                   int64
	Entries                  []dlq.Entry
	Older                    int64
	Unreplayed               int64
}

// dlqFilter reads the DLQ filter fields from a query or form.
func dlqFilter(get func(string) string, p auth.Principal, tenant string) (dlq.Filter, string, error) {
	f := dlq.Filter{Tenant: p.ReadTenant(tenant), Queue: get("queue"), Kind: get("kind"), ErrorContains: get("error")}
	show := get("show")
	switch show {
	case "", "unreplayed":
		show = "unreplayed"
		f.Replayed = new(bool)
	case "replayed":
		f.Replayed = new(bool)
		*f.Replayed = true
	case "all":
	default:
		return f, "", badInput("show must be unreplayed, replayed or all; got %q", show)
	}
	return f, show, f.Validate()
}

func (h *Handler) dlqPage(r *http.Request, v *view) error {
	v.Title = "Dead-letter queue"
	q := r.URL.Query()
	f, show, err := dlqFilter(q.Get, v.P, v.Tenant)
	if err != nil {
		return err
	}
	d := dlqData{Queue: f.Queue, Kind: f.Kind, Error: f.ErrorContains, Show: show}
	if d.Before, err = idParam(r, "before"); err != nil {
		return err
	}
	f.BeforeID, f.Limit, f.MaxBytes = d.Before, pageSize, h.cfg.MaxPageBytes
	var more bool
	if d.Entries, more, err = h.cfg.DLQ.ListPage(r.Context(), f); err != nil {
		return err
	}
	if more && len(d.Entries) > 0 {
		d.Older = d.Entries[len(d.Entries)-1].ID
	}
	if d.Unreplayed, err = h.cfg.DLQ.CountUnreplayed(r.Context(), f.Tenant, depthCap); err != nil {
		return err
	}
	v.Data = d
	return nil
}

func (h *Handler) dlqEntryPage(r *http.Request, v *view) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	e, err := h.cfg.DLQ.Get(r.Context(), v.P.ReadTenant(""), id)
	if err != nil {
		return err
	}
	v.Title = "DLQ entry " + strconv.FormatInt(id, 10)
	v.Data = e
	return nil
}
