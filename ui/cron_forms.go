package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
)

// The cron forms create, edit and delete entries with the checks of
// POST, PATCH and DELETE /v1/cron: the same validation (cron.Client's),
// the same reserved kinds, the same quota for a tenant's token, and the
// jobs:write scope.

// cronFormFields are the form's fields, named as the API's JSON fields.
var cronFormFields = []string{"tenant", "name", "schedule", "timezone", "job.kind", "job.queue", "job.args", "job.priority",
	"job.max_attempts", "job.timeout", "missed", "missed_cap", "overlap", "paused"}

type cronFormData struct {
	// Editing: the form edits Tenant's entry Name; else it creates one.
	Editing      bool
	Tenant, Name string
	Fields       []string
}

// cronFor is the cron client for p: a tenant's token is held to the
// quota, as in the API.
func (h *Handler) cronFor(p auth.Principal) *cron.Client {
	if p.Spans() {
		return h.cfg.Cron
	}
	return h.tenantCron
}

func (h *Handler) cronNewPage(r *http.Request, v *view) error {
	v.Title = "New cron entry"
	if err := needs(v, auth.ScopeJobsWrite); err != nil {
		return err
	}
	v.Form = &formState{Values: url.Values{"timezone": {"UTC"}, "missed": {cron.MissedSkip}, "overlap": {cron.OverlapAllow},
		"job.args": {"{}"}, "tenant": {v.Tenant}}}
	v.Data = cronFormData{Fields: shown(cronFormFields, !v.Spanning(), "tenant")}
	return nil
}

func (h *Handler) cronEditPage(r *http.Request, v *view) error {
	if err := needs(v, auth.ScopeJobsWrite); err != nil {
		return err
	}
	tenant, err := cronTenant(r, v.P)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	e, err := h.cfg.Cron.Get(r.Context(), tenant, name)
	if err != nil {
		return err
	}
	v.Title = "Edit cron " + name
	vals := url.Values{"schedule": {e.Schedule}, "timezone": {e.Timezone}, "job.kind": {e.Job.Kind}, "job.queue": {e.Job.Queue},
		"job.args": {string(e.Job.Args)}, "job.priority": {strconv.Itoa(e.Job.Priority)}, "job.max_attempts": {strconv.Itoa(e.Job.MaxAttempts)},
		"missed": {e.Missed}, "missed_cap": {strconv.Itoa(e.MissedCap)}, "overlap": {e.Overlap}}
	if e.Job.Timeout > 0 {
		vals.Set("job.timeout", e.Job.Timeout.String())
	}
	if e.Paused {
		vals.Set("paused", "yes")
	}
	v.Form = &formState{Values: vals}
	v.Data = cronFormData{Editing: true, Tenant: tenant, Name: name, Fields: shown(cronFormFields, true, "tenant", "name")}
	return nil
}

// cronForm reads the definition a cron form sent.
func cronForm(r *http.Request) (cron.Entry, error) {
	f := r.PostForm
	e := cron.Entry{Name: strings.TrimSpace(f.Get("name")), Schedule: strings.TrimSpace(f.Get("schedule")), Timezone: strings.TrimSpace(f.Get("timezone")),
		Missed: f.Get("missed"), Overlap: f.Get("overlap"), Paused: f.Get("paused") != ""}
	kind := strings.TrimSpace(f.Get("job.kind"))
	if strings.HasPrefix(kind, job.ReservedKindPrefix) {
		return e, badField("job.kind", "job.kind: kind %s is reserved: kinds starting with %q are Gaffer's own", quoteBounded(kind), job.ReservedKindPrefix)
	}
	e.Job = cron.JobTemplate{Kind: kind, Queue: strings.TrimSpace(f.Get("job.queue"))}
	if args := strings.TrimSpace(f.Get("job.args")); args != "" {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(args)); err != nil {
			return e, badField("job.args", "job.args must be JSON, such as {} or {\"to\": \"ops\"}")
		}
		e.Job.Args = b.Bytes()
	}
	var err error
	if e.Job.Priority, err = formInt(r, "job.priority"); err != nil {
		return e, err
	}
	if e.Job.MaxAttempts, err = formInt(r, "job.max_attempts"); err != nil {
		return e, err
	}
	if e.Job.Timeout, err = formDuration(r, "job.timeout"); err != nil {
		return e, err
	}
	if e.MissedCap, err = formInt(r, "missed_cap"); err != nil {
		return e, err
	}
	return e, nil
}

// cronFormError names the field of the errors cron.Client does not.
func cronFormError(err error, name string) error {
	var se *cron.ScheduleError
	var qe *cron.QuotaError
	switch {
	case errors.Is(err, cron.ErrExists):
		return badField("name", "a cron entry named %s already exists: edit it, or choose another name", quoteBounded(name))
	case errors.As(err, &se):
		return badField(se.Field, "%s", se.Error())
	case errors.As(err, &qe):
		return badField(faultField(qe), "%s (the cron quota of %s)", qe.Message, qe.Limit)
	}
	return err
}

func (h *Handler) createCron(r *http.Request, p auth.Principal) (string, string, error) {
	e, err := cronForm(r)
	if err != nil {
		return "", "", err
	}
	if e.Tenant, err = writeTenant(p, r.PostForm.Get("tenant")); err != nil {
		return "", "", err
	}
	got, err := h.cronFor(p).Create(r.Context(), e)
	if err != nil {
		return "", "", cronFormError(err, e.Name)
	}
	return cronPath(got.Tenant, got.Name), fmt.Sprintf("Cron entry %s created.", got.Name), nil
}

func (h *Handler) saveCron(r *http.Request, p auth.Principal) (string, string, error) {
	tenant, err := cronTenant(r, p)
	if err != nil {
		return "/ui/cron", "", err
	}
	name := r.PathValue("name")
	e, err := cronForm(r)
	if err != nil {
		return "", "", err
	}
	u := cron.Update{Schedule: &e.Schedule, Timezone: &e.Timezone, Job: &e.Job, Missed: &e.Missed, MissedCap: &e.MissedCap,
		Overlap: &e.Overlap, Paused: &e.Paused}
	if _, err := h.cronFor(p).Update(r.Context(), tenant, name, u); err != nil {
		return cronPath(tenant, name), "", cronFormError(err, name)
	}
	return cronPath(tenant, name), fmt.Sprintf("Cron entry %s saved.", name), nil
}

func (h *Handler) deleteCron(r *http.Request, p auth.Principal) (string, string, error) {
	tenant, err := cronTenant(r, p)
	if err != nil {
		return "/ui/cron", "", err
	}
	name := r.PathValue("name")
	if err := h.cfg.Cron.Delete(r.Context(), tenant, name); err != nil {
		return cronPath(tenant, name), "", err
	}
	return "/ui/cron", fmt.Sprintf("Cron entry %s deleted.", name), nil
}
