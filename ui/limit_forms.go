package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// The limit forms create, edit and delete limits with the checks of PUT
// and DELETE /v1/limits/{name}: the admin scope, job.Limit's validation,
// and a tenant's admin token confined to its own tenant's limits (it sets
// them for its tenant, and neither sees nor replaces a shared limit or
// another tenant's).

var limitFormFields = []string{"name", "queue", "kind", "tenant", "key", "concurrency", "rate", "period", "burst"}

type limitFormData struct {
	// Editing: the form edits the limit Name; else it creates one.
	Editing bool
	Name    string
	Fields  []string
}

func (h *Handler) limitNewPage(r *http.Request, v *view) error {
	v.Title = "New limit"
	if err := needs(v, auth.ScopeAdmin); err != nil {
		return err
	}
	v.Form = &formState{Values: url.Values{}}
	v.Data = limitFormData{Fields: shown(limitFormFields, !v.Spanning(), "tenant")}
	return nil
}

// ownLimit is the limit name, if p may see it: a tenant's token sees
// only its own tenant's (any other is not found, as in the API).
func (h *Handler) ownLimit(r *http.Request, p auth.Principal, name string) (job.LimitUsage, error) {
	l, err := h.cfg.Jobs.Limit(r.Context(), name)
	if err == nil && !p.Owns(l.Tenant) {
		err = job.ErrLimitNotFound
	}
	if errors.Is(err, job.ErrLimitNotFound) {
		return l, fmt.Errorf("%w: no limit named %s", errNotFound, quoteBounded(name))
	}
	return l, err
}

func (h *Handler) limitEditPage(r *http.Request, v *view) error {
	if err := needs(v, auth.ScopeAdmin); err != nil {
		return err
	}
	name := r.PathValue("limit")
	l, err := h.ownLimit(r, v.P, name)
	if err != nil {
		return err
	}
	v.Title = "Edit limit " + name
	vals := url.Values{"queue": {l.Queue}, "kind": {l.Kind}, "tenant": {l.Tenant}, "key": {l.Key}}
	for field, n := range map[string]int{"concurrency": l.Concurrency, "rate": l.Rate, "burst": l.Burst} {
		if n != 0 {
			vals.Set(field, strconv.Itoa(n))
		}
	}
	if l.Period > 0 {
		vals.Set("period", l.Period.String())
	}
	v.Form = &formState{Values: vals}
	v.Data = limitFormData{Editing: true, Name: name, Fields: shown(shown(limitFormFields, !v.Spanning(), "tenant"), true, "name")}
	return nil
}

// limitForm reads the limit a form sent, for p: a tenant's token's limit
// is its own tenant's.
func limitForm(r *http.Request, p auth.Principal, name string) (job.Limit, error) {
	f := r.PostForm
	l := job.Limit{Name: name, Queue: strings.TrimSpace(f.Get("queue")), Kind: strings.TrimSpace(f.Get("kind")),
		Tenant: strings.TrimSpace(f.Get("tenant")), Key: strings.TrimSpace(f.Get("key"))}
	if !p.Spans() {
		if l.Tenant != "" && l.Tenant != p.Tenant {
			return l, badField("tenant", "this token acts for tenant %s: it sets only that tenant's limits, not tenant %s's", p.Tenant, quoteBounded(l.Tenant))
		}
		l.Tenant = p.Tenant
	}
	var err error
	if l.Concurrency, err = formInt(r, "concurrency"); err != nil {
		return l, err
	}
	if l.Rate, err = formInt(r, "rate"); err != nil {
		return l, err
	}
	if l.Burst, err = formInt(r, "burst"); err != nil {
		return l, err
	}
	if l.Period, err = formDuration(r, "period"); err != nil {
		return l, err
	}
	return l, nil
}

// setLimit writes l as PUT /v1/limits/{name} does.
func (h *Handler) setLimit(r *http.Request, p auth.Principal, l job.Limit) error {
	var err error
	if p.Spans() {
		_, err = h.cfg.Jobs.SetLimit(r.Context(), l)
	} else {
		_, err = h.cfg.Jobs.SetTenantLimit(r.Context(), l)
	}
	if errors.Is(err, job.ErrLimitTaken) {
		return badField("name", "a limit named %s exists and is not tenant %s's: choose another name", quoteBounded(l.Name), p.Tenant)
	}
	return err
}

func (h *Handler) createLimit(r *http.Request, p auth.Principal) (string, string, error) {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	if err := job.ValidateName("name", name); err != nil {
		return "", "", err
	}
	l, err := limitForm(r, p, name)
	if err != nil {
		return "", "", err
	}
	// Creating never replaces: a limit of that name is edited on its own
	// form (one this token may not see is refused alike).
	if _, err := h.cfg.Jobs.Limit(r.Context(), name); err == nil {
		return "", "", badField("name", "a limit named %s already exists: edit it, or choose another name", quoteBounded(name))
	} else if !errors.Is(err, job.ErrLimitNotFound) {
		return "", "", err
	}
	if err := h.setLimit(r, p, l); err != nil {
		return "", "", err
	}
	return "/ui/queues", fmt.Sprintf("Limit %s created: every claim now honours it.", name), nil
}

func (h *Handler) saveLimit(r *http.Request, p auth.Principal) (string, string, error) {
	name := r.PathValue("limit")
	if _, err := h.ownLimit(r, p, name); err != nil {
		return "/ui/queues", "", err
	}
	l, err := limitForm(r, p, name)
	if err != nil {
		return "", "", err
	}
	if err := h.setLimit(r, p, l); err != nil {
		return "", "", err
	}
	return "/ui/queues", fmt.Sprintf("Limit %s saved.", name), nil
}

func (h *Handler) deleteLimit(r *http.Request, p auth.Principal) (string, string, error) {
	name := r.PathValue("limit")
	var err error
	if p.Spans() {
		err = h.cfg.Jobs.DeleteLimit(r.Context(), name)
	} else {
		err = h.cfg.Jobs.DeleteTenantLimit(r.Context(), p.Tenant, name)
	}
	if errors.Is(err, job.ErrLimitNotFound) {
		err = fmt.Errorf("%w: no limit named %s", errNotFound, quoteBounded(name))
	}
	if err != nil {
		return "/ui/queues", "", err
	}
	return "/ui/queues", fmt.Sprintf("Limit %s deleted.", name), nil
}
