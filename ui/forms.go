package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
)

// Forms that create or change something (a cron entry, a limit, a
// signal) are actions like any other — POST, CSRF, origin and scope
// checked (admitPost) — with one difference: a refusal does not redirect
// but shows the form's page again, with what the user typed and the
// refusal next to the field at fault, so nothing typed is lost.

// formState is a form's values and, after a refusal, what was wrong.
type formState struct {
	Values url.Values
	// Field is the field at fault ("" for the form as a whole); Error
	// says what is wrong.
	Field string
	Error string
}

// Get is the value of the form's field name ("" on a nil form).
func (f *formState) Get(name string) string {
	if f == nil {
		return ""
	}
	return f.Values.Get(name)
}

// Checked reports whether the checkbox name is ticked.
func (f *formState) Checked(name string) bool { return f.Get(name) != "" }

// ErrorFor is the refusal when it is about field name, else "".
func (f *formState) ErrorFor(name string) string {
	if f == nil || f.Field != name {
		return ""
	}
	return f.Error
}

// Refused is the refusal the form's fields do not show (one about the
// form as a whole, or a field the form lacks), else "".
func (f *formState) Refused(fields []string) string {
	if f == nil || f.Error == "" {
		return ""
	}
	for _, name := range fields {
		if f.Field == name {
			return ""
		}
	}
	return f.Error
}

// fieldError refuses one field of a form; it is bad input (400).
type fieldError struct{ Field, Message string }

func (e *fieldError) Error() string { return errBadInput.Error() + ": " + e.Message }
func (e *fieldError) Unwrap() error { return errBadInput }

func badField(field, format string, a ...any) error {
	return &fieldError{Field: field, Message: fmt.Sprintf(format, a...)}
}

// faultField names the form field err is about, or "".
func faultField(err error) string {
	var fe *fieldError
	var ve *job.ValidationError
	var se *cron.ScheduleError
	var qe *cron.QuotaError
	switch {
	case errors.As(err, &fe):
		return fe.Field
	case errors.As(err, &ve):
		return ve.Field
	case errors.As(err, &se):
		return se.Field
	case errors.As(err, &qe):
		if qe.Limit == cron.LimitEntries {
			return ""
		}
		return "schedule"
	}
	return ""
}

// form registers a form's action: act's refusals (bad input and
// conflicts) show the page name again, filled by pg, with the values sent
// and the refusal; anything else goes as for post.
func (h *Handler) form(pattern, scope, name string, pg page, act action) {
	if _, ok := h.pages[name]; !ok {
		panic("ui: no template for page " + name)
	}
	params := routeParams(pattern)
	h.patterns = append(h.patterns, pattern)
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, ok := h.admitPost(w, r, scope, params)
		if !ok {
			return
		}
		to, msg, err := act(r, p)
		if err == nil {
			h.setFlash(w, r, msg)
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		status, text := h.describe(err)
		if status != http.StatusBadRequest && status != http.StatusConflict {
			if status >= 500 {
				h.renderError(w, r, p, "", status, text)
				return
			}
			if to == "" {
				to = backTo(r)
			}
			h.setFlash(w, r, "Refused: "+text)
			http.Redirect(w, r, to, http.StatusSeeOther)
			return
		}
		v := &view{P: p, Nav: strings.SplitN(name, "_", 2)[0], CSRF: h.csrf(r), Now: time.Now()}
		if v.Nav == "job" || v.Nav == "workflow" {
			v.Nav += "s"
		}
		if perr := pg(r, v); perr != nil {
			pstatus, pmsg := h.describe(perr)
			h.renderError(w, r, p, v.Nav, pstatus, pmsg)
			return
		}
		v.Form = &formState{Values: r.PostForm, Field: faultField(err), Error: text}
		h.render(w, r, status, name, v)
	})
}

// formInt reads an optional integer field: "" is 0.
func formInt(r *http.Request, field string) (int, error) {
	s := strings.TrimSpace(r.PostForm.Get(field))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, badField(field, "%s must be a whole number, got %s", field, quoteBounded(s))
	}
	return n, nil
}

// formDuration reads an optional duration field ("" is 0), as the API
// reads one: Go's syntax, such as 30s or 5m.
func formDuration(r *http.Request, field string) (time.Duration, error) {
	s := strings.TrimSpace(r.PostForm.Get(field))
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, badField(field, "%s must be a duration such as \"30s\" or \"5m\", got %s", field, quoteBounded(s))
	}
	return d, nil
}

// needs refuses a form's page to a token without scope.
func needs(v *view, scope string) error {
	if !v.Can(scope) {
		return errNeedsScope(scope)
	}
	return nil
}

// writeTenant is the tenant a form writes for: a tenant's token its own
// (a form naming another is refused), a spanning token the one the form
// names, "default" when it names none.
func writeTenant(p auth.Principal, named string) (string, error) {
	named = strings.TrimSpace(named)
	if p.Tenant != auth.AllTenants {
		if named != "" && named != p.Tenant {
			return "", badField("tenant", "this token acts for tenant %s: it cannot write for tenant %s", p.Tenant, quoteBounded(named))
		}
		return p.Tenant, nil
	}
	if named == "" {
		return job.DefaultTenant, nil
	}
	return named, nil
}

// formField is one input of a form, as the "field" template draws it.
type formField struct {
	Name, Label, Type, Placeholder, Help string
	Value, Error                         string
}

func fieldOf(f *formState, name, label, typ, placeholder, help string) formField {
	return formField{Name: name, Label: label, Type: typ, Placeholder: placeholder, Help: help, Value: f.Get(name), Error: f.ErrorFor(name)}
}

func init() { funcs["fieldOf"] = fieldOf }

// shown is fields less hidden when hide is true: the fields a form draws,
// whose refusals it shows beside them (Refused shows the others').
func shown(fields []string, hide bool, hidden ...string) []string {
	if !hide {
		return fields
	}
	var out []string
	for _, f := range fields {
		if !slices.Contains(hidden, f) {
			out = append(out, f)
		}
	}
	return out
}

// formPage answers a GET of a form's action with its page: a refused
// form is shown at the action's address, which a reload (or the live
// refresh) then asks for.
func (h *Handler) formPage(pattern string, to func(r *http.Request) string) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to(r), http.StatusSeeOther)
	})
}

func signalFormPage(r *http.Request) string {
	id, err := pathID(r, "id")
	if err != nil {
		return "/ui/workflows"
	}
	return fmt.Sprintf("/ui/workflows/%d", id)
}
