package ui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
)

// jobsQuery is the jobs list's filter as its parameters carry it: the
// page's query, or the hidden fields of a form posted from it.
type jobsQuery struct {
	State, Queue, Kind, CronEntry, Tenant, Search string
	Sequence                                      string
	WorkflowRun                                   int64
	Timers                                        bool
	// TagsMatch is how the search's tag: words combine: "" or "all",
	// or "any".
	TagsMatch string
	// terms is Search read as tags, args conditions and text.
	terms searchTerms
}

func readJobsQuery(get func(string) string, p auth.Principal) (jobsQuery, error) {
	q := jobsQuery{State: get("state"), Queue: get("queue"), Kind: get("kind"), CronEntry: get("cron_entry"),
		Sequence: get("sequence"), Search: strings.TrimSpace(get("q")), Timers: get("timers") == "1", TagsMatch: get("tags_match")}
	if p.Spans() {
		q.Tenant = get("tenant")
	}
	if s := get("workflow_run"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return q, badInput("workflow_run must be a positive integer, got %q", s)
		}
		q.WorkflowRun = id
	}
	if q.State != "" && !job.State(q.State).Valid() {
		names := make([]string, len(job.States))
		for i, s := range job.States {
			names[i] = string(s)
		}
		return q, badInput("state must be one of %s; got %q", strings.Join(names, ", "), q.State)
	}
	if q.TagsMatch != "" && q.TagsMatch != "all" && q.TagsMatch != "any" {
		return q, badInput("tags_match must be all or any, got %q", q.TagsMatch)
	}
	var err error
	q.terms, err = parseSearch(q.Search)
	return q, err
}

// filter is the job.Filter q selects for p: timers left out unless asked
// for or named by kind or workflow run, as the list shows them.
func (q jobsQuery) filter(p auth.Principal) job.Filter {
	f := job.Filter{Tenant: p.ReadTenant(q.Tenant), Queue: q.Queue, Kind: q.Kind, CronEntry: q.CronEntry, WorkflowRun: q.WorkflowRun,
		Sequence: q.Sequence, Search: q.terms.Text, Tags: q.terms.Tags, TagsAny: q.TagsMatch == "any", Args: q.terms.Args,
		NoTimers: !q.Timers && q.Kind == "" && q.WorkflowRun == 0}
	if q.State != "" {
		f.States = []job.State{job.State(q.State)}
	}
	return f
}

// link is the jobs list with q's filter, and more parameters.
func (q jobsQuery) Link(path string, more ...any) string {
	kv := []any{"state", q.State, "queue", q.Queue, "kind", q.Kind, "cron_entry", q.CronEntry, "workflow_run", q.WorkflowRun,
		"sequence", q.Sequence, "tenant", q.Tenant, "timers", timersParam(q.Timers), "q", q.Search, "tags_match", q.TagsMatch}
	return link(path, append(kv, more...)...)
}

// withState is q showing one state ("" = every state).
func (q jobsQuery) withState(s string) jobsQuery { q.State = s; return q }

// Described words q's filter for a confirmation.
func (q jobsQuery) Described() string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+strconv.Quote(v))
		}
	}
	add("state", q.State)
	add("queue", q.Queue)
	add("kind", q.Kind)
	add("cron entry", q.CronEntry)
	add("sequence", q.Sequence)
	if q.WorkflowRun != 0 {
		parts = append(parts, "workflow run "+strconv.FormatInt(q.WorkflowRun, 10))
	}
	add("tenant", q.Tenant)
	if len(q.terms.Tags) > 1 && q.TagsMatch == "any" {
		parts = append(parts, "any of the tags "+strings.Join(q.terms.Tags, ", "))
	} else if len(q.terms.Tags) > 0 {
		parts = append(parts, "the tags "+strings.Join(q.terms.Tags, ", "))
	}
	if len(q.terms.Args) > 0 || q.terms.Text != "" {
		parts = append(parts, fmt.Sprintf("search %q (among the newest %s jobs of the rest of the filter)", q.Search, num(int64(job.SearchWindow))))
	}
	if len(parts) == 0 {
		return "every job"
	}
	return "the jobs with " + strings.Join(parts, ", ")
}

func timersParam(show bool) string {
	if show {
		return "1"
	}
	return ""
}

var bulkVerbs = map[job.BulkAction][2]string{
	job.BulkCancel: {"Cancel", "Cancelled"},
	job.BulkRetry:  {"Retry", "Retried"},
	job.BulkDelete: {"Delete", "Deleted"},
}

func bulkAction(s string) (job.BulkAction, error) {
	a := job.BulkAction(s)
	if _, ok := bulkVerbs[a]; !ok {
		return "", badInput("the action must be cancel, retry or delete; got %q", s)
	}
	return a, nil
}

// bulkPreviewData is the confirmation of a bulk action on every job
// matching a filter, with the count it would act on.
type bulkPreviewData struct {
	Action job.BulkAction
	Verb   string
	Query  jobsQuery
	Count  job.BulkResult
	Limit  int
	Back   string
}

// bulkPreview is the count preview: how many jobs matching the filter
// the action would act on (a dry run), and the form that does it.
func (h *Handler) bulkPreview(r *http.Request, v *view) error {
	get := r.URL.Query().Get
	action, err := bulkAction(get("action"))
	if err != nil {
		return err
	}
	q, err := readJobsQuery(get, v.P)
	if err != nil {
		return err
	}
	verb := bulkVerbs[action][0]
	v.Title = verb + " jobs"
	res, err := h.cfg.Jobs.Bulk(r.Context(), job.BulkRequest{Action: action, Filter: q.filter(v.P), DryRun: true})
	if err != nil {
		return err
	}
	v.Data = bulkPreviewData{Action: action, Verb: verb, Query: q, Count: res, Limit: job.MaxBulkLimit, Back: q.Link("/ui/jobs")}
	return nil
}

// bulkJobs does a bulk action on the jobs ticked (id fields), or with
// all=yes on every job matching the form's filter, at most
// job.MaxBulkLimit of them.
func (h *Handler) bulkJobs(r *http.Request, p auth.Principal) (string, string, error) {
	get := r.PostForm.Get
	q, err := readJobsQuery(get, p)
	back := q.Link("/ui/jobs")
	if err != nil {
		return back, "", err
	}
	action, err := bulkAction(get("action"))
	if err != nil {
		return back, "", err
	}
	req := job.BulkRequest{Action: action, Filter: job.Filter{Tenant: p.ReadTenant(q.Tenant)}}
	if get("all") == "yes" {
		req.Filter = q.filter(p)
	} else {
		ids := r.PostForm["id"]
		if len(ids) == 0 {
			return back, "", badInput("tick at least one job to %s", action)
		}
		if len(ids) > job.MaxBulkIDs {
			return back, "", badInput("at most %d jobs can be ticked at once, got %d", job.MaxBulkIDs, len(ids))
		}
		for _, s := range ids {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= 0 {
				return back, "", badInput("job ids must be positive integers, got %q", s)
			}
			req.IDs = append(req.IDs, id)
		}
	}
	res, err := h.cfg.Jobs.Bulk(r.Context(), req)
	if ve := (*job.ValidationError)(nil); errors.As(err, &ve) {
		return back, "", badInput("%s", ve.Error())
	}
	if err != nil {
		return back, "", err
	}
	return back, bulkMessage(res), nil
}

// bulkMessage tells what a bulk call did, naming at most a few of the
// jobs it skipped (the message travels in a cookie).
func bulkMessage(res job.BulkResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s job", bulkVerbs[res.Action][1], num(int64(res.Acted)))
	if res.Acted != 1 {
		b.WriteString("s")
	}
	if res.Cancelling > 0 {
		fmt.Fprintf(&b, " (%s running: their handlers are being cancelled)", num(int64(res.Cancelling)))
	}
	if res.Action == job.BulkRetry {
		replays := 0
		for _, r := range res.Retried {
			if r.RunID != r.ID {
				replays++
			}
		}
		if replays > 0 {
			fmt.Fprintf(&b, " (%d failed jobs replayed from the DLQ into new jobs)", replays)
		}
	}
	b.WriteString(".")
	if len(res.Skipped) > 0 {
		fmt.Fprintf(&b, " Skipped %d: ", len(res.Skipped))
		for i, s := range res.Skipped {
			if i == 3 {
				fmt.Fprintf(&b, "; and %d more", len(res.Skipped)-3)
				break
			}
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "job %d: %s", s.ID, s.Reason)
		}
		b.WriteString(".")
	}
	if res.More {
		fmt.Fprintf(&b, " More jobs match (at most %s are acted on at once): press again to go on.", num(job.MaxBulkLimit))
	}
	return b.String()
}
