package ui

import (
	"net/http"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
)

type cronRow struct {
	cron.Entry
	Next []time.Time
}

func (h *Handler) cronPage(r *http.Request, v *view) error {
	v.Title = "Cron"
	const perPage = 100
	q := r.URL.Query()
	after := cron.Cursor{Tenant: q.Get("after_tenant"), Name: q.Get("after")}
	if (after.Tenant == "") != (after.Name == "") {
		return badInput("after and after_tenant go together: they name the previous page's last entry")
	}
	entries, err := h.cfg.Cron.List(r.Context(), v.P.ReadTenant(v.Tenant), after, perPage)
	if err != nil {
		return err
	}
	rows := make([]cronRow, len(entries))
	for i, e := range entries {
		rows[i] = cronRow{Entry: e}
		if e.Done || e.Paused {
			continue // a paused entry fires nothing until resumed
		}
		rows[i].Next = []time.Time{e.NextRunAt}
		if s, err := cron.Parse(e.Schedule, e.Timezone); err == nil {
			rows[i].Next = append(rows[i].Next, cron.NextN(s, e.NextRunAt, 2)...)
		}
	}
	d := struct {
		Entries []cronRow
		Paged   bool
		// Next is the cursor of the following page; empty on the last.
		Next cron.Cursor
	}{Entries: rows, Paged: after.Name != ""}
	if len(entries) == perPage {
		last := entries[len(entries)-1]
		d.Next = cron.Cursor{Tenant: last.Tenant, Name: last.Name}
	}
	v.Data = d
	return nil
}

type cronEntryData struct {
	Entry   cron.Entry
	Next    []time.Time
	History []cron.Occurrence
}

// cronTenant is the tenant named in a cron path, if the token may see it.
func cronTenant(r *http.Request, p auth.Principal) (string, error) {
	t := r.PathValue("tenant")
	if p.Tenant != auth.AllTenants && t != p.Tenant {
		return "", cron.ErrNotFound
	}
	return t, nil
}

func (h *Handler) cronEntryPage(r *http.Request, v *view) error {
	tenant, err := cronTenant(r, v.P)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	e, err := h.cfg.Cron.Get(r.Context(), tenant, name)
	if err != nil {
		return err
	}
	v.Title = "Cron " + name
	d := cronEntryData{Entry: e}
	if d.Next, err = h.cfg.Cron.NextTimes(r.Context(), tenant, name, 10); err != nil {
		return err
	}
	if d.History, err = h.cfg.Cron.History(r.Context(), tenant, name, time.Time{}, 50); err != nil {
		return err
	}
	v.Data = d
	return nil
}
