package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
)

type cronJobBody struct {
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	Args        json.RawMessage `json:"args"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	Timeout     *string         `json:"timeout"`
}

func (b cronJobBody) template(field string) (cron.JobTemplate, *Problem) {
	if pr := reservedKind(field+".kind", b.Kind); pr != nil {
		return cron.JobTemplate{}, pr
	}
	timeout, pr := parseDuration(field+".timeout", b.Timeout)
	if pr != nil {
		return cron.JobTemplate{}, pr
	}
	return cron.JobTemplate{Kind: b.Kind, Queue: b.Queue, Args: b.Args, Priority: b.Priority, MaxAttempts: b.MaxAttempts, Timeout: timeout}, nil
}

type cronCreateBody struct {
	Tenant    string      `json:"tenant"`
	Name      string      `json:"name"`
	Schedule  string      `json:"schedule"`
	Timezone  string      `json:"timezone"`
	Job       cronJobBody `json:"job"`
	Missed    string      `json:"missed"`
	MissedCap int         `json:"missed_cap"`
	Overlap   string      `json:"overlap"`
	Paused    bool        `json:"paused"`
}

type cronPatchBody struct {
	Schedule  *string      `json:"schedule"`
	Timezone  *string      `json:"timezone"`
	Job       *cronJobBody `json:"job"`
	Missed    *string      `json:"missed"`
	MissedCap *int         `json:"missed_cap"`
	Overlap   *string      `json:"overlap"`
	Paused    *bool        `json:"paused"`
}

// cronPutBody is an entry's whole definition; what it leaves out takes
// the default. Paused left out leaves an existing entry's as it is.
type cronPutBody struct {
	Name      string      `json:"name"` // optional: the path names the entry
	Schedule  string      `json:"schedule"`
	Timezone  string      `json:"timezone"`
	Job       cronJobBody `json:"job"`
	Missed    string      `json:"missed"`
	MissedCap int         `json:"missed_cap"`
	Overlap   string      `json:"overlap"`
	Paused    *bool       `json:"paused"`
}

// cronView is a cron entry on the wire: cron.Entry's members (in the
// order encoding/json wrote them when cronView embedded it, with
// next_run_at and job last), next_run_at null once the entry is done and
// while it is paused (it fires nothing until resumed, which starts it
// from the next fire time then), and the job's timeout as text. TestCronViewHasEveryEntryMember fails
// when cron.Entry gains a member this lacks.
type cronView struct {
	Tenant    string     `json:"tenant"`
	Name      string     `json:"name"`
	Schedule  string     `json:"schedule"`
	Timezone  string     `json:"timezone"`
	Missed    string     `json:"missed"`
	MissedCap int        `json:"missed_cap"`
	Overlap   string     `json:"overlap"`
	Paused    bool       `json:"paused"`
	Done      bool       `json:"done"`
	DoneAt    *time.Time `json:"done_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	cron.Status
	NextRunAt *time.Time  `json:"next_run_at"`
	Job       cronJobView `json:"job"`
}

type cronJobView struct {
	cron.JobTemplate
	Timeout string `json:"timeout,omitempty"`
}

func viewCron(e cron.Entry) cronView {
	v := cronView{Tenant: e.Tenant, Name: e.Name, Schedule: e.Schedule, Timezone: e.Timezone, Missed: e.Missed, MissedCap: e.MissedCap,
		Overlap: e.Overlap, Paused: e.Paused, Done: e.Done, DoneAt: e.DoneAt, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
		Status: e.Status, Job: cronJobView{JobTemplate: e.Job, Timeout: formatDuration(e.Job.Timeout)}}
	if !e.Done && !e.Paused {
		v.NextRunAt = &e.NextRunAt
	}
	return v
}

// cronPutResponse says what a PUT did (or, dry, would do).
type cronPutResponse struct {
	Entry cronView `json:"entry"`
	// Created: there was no entry of that name. Changed: created, or some
	// field differed (Changes names them); false: nothing was written.
	Created bool     `json:"created"`
	Changed bool     `json:"changed"`
	Changes []string `json:"changes"`
	DryRun  bool     `json:"dry_run"`
}

func cronError(err error, name string) error {
	switch {
	case errors.Is(err, cron.ErrNotFound):
		return notFoundProblem("cron entry", strconv.Quote(name))
	case errors.Is(err, cron.ErrExists):
		return problem(CodeAlreadyExists, "a cron entry named "+strconv.Quote(name)+" already exists")
	}
	return err
}

func (s *Server) createCron(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var b cronCreateBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	tenant, pr := writeTenant(p, b.Tenant)
	if pr != nil {
		return 0, nil, pr
	}
	tmpl, pr := b.Job.template("job")
	if pr != nil {
		return 0, nil, pr
	}
	e, err := s.cron(p).Create(r.Context(), cron.Entry{Tenant: tenant, Name: b.Name, Schedule: b.Schedule, Timezone: b.Timezone,
		Job: tmpl, Missed: b.Missed, MissedCap: b.MissedCap, Overlap: b.Overlap, Paused: b.Paused})
	if err != nil {
		return 0, nil, cronError(err, b.Name)
	}
	return http.StatusCreated, viewCron(e), nil
}

// cronTenant is the tenant a cron path refers to.
func cronTenant(r *http.Request, p auth.Principal) string {
	if t := tenantFilter(p, r); t != "" {
		return t
	}
	return "default"
}

func (s *Server) listCron(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	limit, pr := limitParam(r)
	if pr != nil {
		return 0, nil, pr
	}
	c, pr := cursorParam(r)
	if pr != nil {
		return 0, nil, pr
	}
	// The cursor is the last entry's tenant and name: a listing across
	// tenants is ordered by both.
	var after cron.Cursor
	if c != "" {
		t, n, ok := strings.Cut(c, "\x00")
		if !ok || t == "" || n == "" {
			return 0, nil, paramProblem("cursor", "cursor is not one this API returned")
		}
		after = cron.Cursor{Tenant: t, Name: n}
	}
	tenant := tenantFilter(p, r)
	entries, err := s.cfg.Cron.List(r.Context(), tenant, after, limit)
	if err != nil {
		return 0, nil, err
	}
	views := make([]cronView, len(entries))
	for i, e := range entries {
		views[i] = viewCron(e)
	}
	out := list[cronView]{Data: views}
	if len(entries) == limit {
		last := entries[len(entries)-1]
		out.NextCursor = encodeCursor(last.Tenant + "\x00" + last.Name)
	}
	return http.StatusOK, out, nil
}

func (s *Server) getCron(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	e, err := s.cfg.Cron.Get(r.Context(), cronTenant(r, p), name)
	if err != nil {
		return 0, nil, cronError(err, name)
	}
	return http.StatusOK, viewCron(e), nil
}

func (s *Server) updateCron(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	name := r.PathValue("name")
	var b cronPatchBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	u := cron.Update{Schedule: b.Schedule, Timezone: b.Timezone, Missed: b.Missed, MissedCap: b.MissedCap, Overlap: b.Overlap, Paused: b.Paused}
	if b.Job != nil {
		tmpl, pr := b.Job.template("job")
		if pr != nil {
			return 0, nil, pr
		}
		u.Job = &tmpl
	}
	e, err := s.cron(p).Update(r.Context(), cronTenant(r, p), name, u)
	if err != nil {
		return 0, nil, cronError(err, name)
	}
	return http.StatusOK, viewCron(e), nil
}

// putCron creates or replaces the entry the path names: idempotent, 201
// when created, 200 otherwise, saying whether anything changed. With
// ?dry_run=true it only checks and reports.
func (s *Server) putCron(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	name := r.PathValue("name")
	var b cronPutBody
	if pr := decodeStrict(body, &b); pr != nil {
		return 0, nil, pr
	}
	if b.Name != "" && b.Name != name {
		return 0, nil, fieldProblem("name", fmt.Sprintf("the body names %q but the path %q; leave name out or make them agree", b.Name, name))
	}
	tenant, pr := writeTenant(p, r.URL.Query().Get("tenant"))
	if pr != nil {
		return 0, nil, pr
	}
	dry := false
	if v := r.URL.Query().Get("dry_run"); v != "" {
		var err error
		if dry, err = strconv.ParseBool(v); err != nil {
			return 0, nil, paramProblem("dry_run", "dry_run must be true or false, got "+strconv.Quote(v))
		}
	}
	tmpl, pr := b.Job.template("job")
	if pr != nil {
		return 0, nil, pr
	}
	e := cron.Entry{Tenant: tenant, Name: name, Schedule: b.Schedule, Timezone: b.Timezone, Job: tmpl,
		Missed: b.Missed, MissedCap: b.MissedCap, Overlap: b.Overlap, Paused: b.Paused != nil && *b.Paused}
	got, res, err := s.cron(p).Put(r.Context(), e, cron.PutOptions{KeepPaused: b.Paused == nil, DryRun: dry})
	if err != nil {
		return 0, nil, cronError(err, name)
	}
	status := http.StatusOK
	if res.Created && !dry {
		status = http.StatusCreated
	}
	changes := res.Changes
	if changes == nil {
		changes = []string{}
	}
	return status, cronPutResponse{Entry: viewCron(got), Created: res.Created, Changed: res.Changed(), Changes: changes, DryRun: dry}, nil
}

func (s *Server) deleteCron(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	if err := s.cfg.Cron.Delete(r.Context(), cronTenant(r, p), name); err != nil {
		return 0, nil, cronError(err, name)
	}
	return http.StatusNoContent, nil, nil
}

type nextResponse struct {
	Times []time.Time `json:"times"`
}

func (s *Server) nextCron(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	n := 5
	if v := r.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 1000 {
			return 0, nil, paramProblem("n", "n must be an integer from 1 to 1000, got "+strconv.Quote(v))
		}
	}
	times, err := s.cfg.Cron.NextTimes(r.Context(), cronTenant(r, p), name, n)
	if err != nil {
		return 0, nil, cronError(err, name)
	}
	for i := range times {
		times[i] = times[i].UTC()
	}
	return http.StatusOK, nextResponse{Times: times}, nil
}

type occurrenceView struct {
	ScheduledAt time.Time `json:"scheduled_at"`
	Status      string    `json:"status"`
	Reason      string    `json:"reason,omitempty"`
	Count       int       `json:"count"`
	RecordedAt  time.Time `json:"recorded_at"`
	Epoch       int64     `json:"epoch,omitempty"`
	JobID       int64     `json:"job_id,omitempty"`
}

func (s *Server) cronHistory(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	name := r.PathValue("name")
	tenant := cronTenant(r, p)
	if _, err := s.cfg.Cron.Get(r.Context(), tenant, name); err != nil {
		return 0, nil, cronError(err, name)
	}
	limit, pr := limitParam(r)
	if pr != nil {
		return 0, nil, pr
	}
	c, pr := cursorParam(r)
	if pr != nil {
		return 0, nil, pr
	}
	var before time.Time
	if c != "" {
		var err error
		if before, err = time.Parse(time.RFC3339Nano, c); err != nil {
			return 0, nil, paramProblem("cursor", "cursor is not one this API returned")
		}
	}
	occ, err := s.cfg.Cron.History(r.Context(), tenant, name, before, limit)
	if err != nil {
		return 0, nil, err
	}
	views := make([]occurrenceView, len(occ))
	for i, o := range occ {
		views[i] = viewOccurrence(o)
	}
	out := list[occurrenceView]{Data: views}
	if len(occ) == limit {
		out.NextCursor = encodeCursor(occ[len(occ)-1].ScheduledAt.Format(time.RFC3339Nano))
	}
	return http.StatusOK, out, nil
}

func viewOccurrence(o cron.Occurrence) occurrenceView {
	return occurrenceView{ScheduledAt: o.ScheduledAt.UTC(), Status: o.Status, Reason: o.Reason, Count: o.Count,
		RecordedAt: o.RecordedAt.UTC(), Epoch: o.Epoch, JobID: o.JobID}
}

type triggerResponse struct {
	JobID int64 `json:"job_id"`
}

func (s *Server) triggerCron(r *http.Request, p auth.Principal, _ []byte, tx pgx.Tx) (int, any, error) {
	name := r.PathValue("name")
	id, err := s.cfg.Cron.TriggerTx(r.Context(), tx, cronTenant(r, p), name)
	if err != nil {
		return 0, nil, cronError(err, name)
	}
	return http.StatusCreated, triggerResponse{JobID: id}, nil
}
