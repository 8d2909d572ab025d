package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

type cronRow struct {
	Tenant    string     `json:"tenant"`
	Name      string     `json:"name"`
	Schedule  string     `json:"schedule"`
	Timezone  string     `json:"timezone"`
	Missed    string     `json:"missed"`
	Overlap   string     `json:"overlap"`
	Paused    bool       `json:"paused"`
	NextRunAt *time.Time `json:"next_run_at"`
	Done      bool       `json:"done"`
	DoneAt    *time.Time `json:"done_at"`
	Job       struct {
		Kind  string          `json:"kind"`
		Queue string          `json:"queue"`
		Args  json.RawMessage `json:"args"`
	} `json:"job"`
	LastJobID           int64      `json:"last_job_id"`
	LastJobState        string     `json:"last_job_state"`
	LastOccurrenceAt    *time.Time `json:"last_occurrence_at"`
	LastFiredAt         *time.Time `json:"last_fired_at"`
	LastError           string     `json:"last_error"`
	LastErrorAt         *time.Time `json:"last_error_at"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	RetryAt             *time.Time `json:"retry_at"`
	LastFailedJobID     int64      `json:"last_failed_job_id"`
	LastFailedError     string     `json:"last_failed_error"`
	LastFailedAt        *time.Time `json:"last_failed_at"`
}

// state is an entry's state in a word: done, paused, failing or active.
func (e cronRow) state() string {
	switch {
	case e.Done:
		return "done"
	case e.Paused:
		return "paused"
	case e.ConsecutiveFailures > 0:
		return fmt.Sprintf("failing (%d)", e.ConsecutiveFailures)
	}
	return "active"
}

// lastJob is the last occurrence's job and its state, in a word.
func (e cronRow) lastJob() string {
	switch {
	case e.LastJobID == 0:
		return "-"
	case e.LastJobState == "":
		return fmt.Sprintf("%d (deleted)", e.LastJobID)
	}
	return fmt.Sprintf("%d (%s)", e.LastJobID, e.LastJobState)
}

func (m *Main) runCron(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "cron", []action{
		{"add", "create an entry", (*Main).cronAdd},
		{"apply", "make the tenant's entries what a YAML or JSON file says", (*Main).cronApply},
		{"list", "list entries", (*Main).cronList},
		{"get", "show an entry", (*Main).cronGet},
		{"next", "show an entry's next fire times", (*Main).cronNext},
		{"update", "change an entry", (*Main).cronUpdate},
		{"pause", "stop an entry firing", func(m *Main, ctx context.Context, args []string) error { return m.cronSetPaused(ctx, args, true) }},
		{"resume", "restart a paused entry from the next fire time", func(m *Main, ctx context.Context, args []string) error { return m.cronSetPaused(ctx, args, false) }},
		{"trigger", "enqueue an entry's job now", (*Main).cronTrigger},
		{"history", "list an entry's occurrences", (*Main).cronHistory},
		{"delete", "delete an entry", (*Main).cronDelete},
	}, args)
}

type cronFlags struct {
	schedule, timezone, kind, args, queue, timeout, missed, overlap *string
	priority, attempts, missedCap                                   *int
}

func addCronFlags(fs *flagSet) *cronFlags {
	return &cronFlags{
		schedule:  fs.String("schedule", "-", "", "5 or 6 fields, @daily-style, @every 5m, or once: @at 2027-01-01T09:00:00Z (or a local time in --timezone)"),
		timezone:  fs.String("timezone", "-", "", "IANA zone or offset (default UTC)"),
		kind:      fs.String("kind", "-", "", "job kind"),
		args:      fs.String("args", "-", "", "job args as JSON"),
		queue:     fs.String("queue", "-", "", "job queue"),
		timeout:   fs.String("timeout", "-", "", "job timeout, e.g. 30s"),
		priority:  fs.Int("priority", "-", -1, "job priority 0-9"),
		attempts:  fs.Int("max-attempts", "-", 0, "job max attempts"),
		missed:    fs.String("missed", "-", "", "missed-fire policy: skip, once or all"),
		missedCap: fs.Int("missed-cap", "-", 0, "cap on catch-up under policy all"),
		overlap:   fs.String("overlap", "-", "", "overlap policy: allow or skip"),
	}
}

// body returns the fields given; job fields are nested.
func (f *cronFlags) body(fs *flagSet) (map[string]any, error) {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	b := map[string]any{}
	jobFields := map[string]any{}
	str := func(flag, key string, v string, into map[string]any) {
		if given[flag] {
			into[key] = v
		}
	}
	str("schedule", "schedule", *f.schedule, b)
	str("timezone", "timezone", *f.timezone, b)
	str("missed", "missed", *f.missed, b)
	str("overlap", "overlap", *f.overlap, b)
	if given["missed-cap"] {
		b["missed_cap"] = *f.missedCap
	}
	str("kind", "kind", *f.kind, jobFields)
	str("queue", "queue", *f.queue, jobFields)
	str("timeout", "timeout", *f.timeout, jobFields)
	if given["priority"] {
		jobFields["priority"] = *f.priority
	}
	if given["max-attempts"] {
		jobFields["max_attempts"] = *f.attempts
	}
	if given["args"] {
		if !json.Valid([]byte(*f.args)) {
			return nil, usageError("--args is not valid JSON")
		}
		jobFields["args"] = json.RawMessage(*f.args)
	}
	if len(jobFields) > 0 {
		b["job"] = jobFields
	}
	return b, nil
}

func (m *Main) printCron(tw *tabwriter.Writer, e cronRow) {
	next := m.fmtTime(e.NextRunAt)
	if e.Paused {
		next = "- (paused)"
	}
	fmt.Fprintf(tw, "name\t%s\nschedule\t%s (%s)\njob\t%s on %s %s\nmissed\t%s\noverlap\t%s\nstate\t%s\nnext run\t%s\n",
		e.Name, e.Schedule, e.Timezone, e.Job.Kind, e.Job.Queue, e.Job.Args, e.Missed, e.Overlap, e.state(), next)
	if e.Done {
		fmt.Fprintf(tw, "done at\t%s\n", m.fmtTime(e.DoneAt))
	}
	fmt.Fprintf(tw, "last fired\t%s", m.fmtTime(e.LastFiredAt))
	if e.LastOccurrenceAt != nil {
		fmt.Fprintf(tw, " (for %s)", m.fmtTime(e.LastOccurrenceAt))
	}
	fmt.Fprintf(tw, "\nlast job\t%s\n", e.lastJob())
	if e.LastError != "" {
		fmt.Fprintf(tw, "last error\t%s: %s\nfailures in a row\t%d\n", m.fmtTime(e.LastErrorAt), e.LastError, e.ConsecutiveFailures)
		if e.RetryAt != nil {
			fmt.Fprintf(tw, "retry at\t%s\n", m.fmtTime(e.RetryAt))
		}
	}
	if e.LastFailedJobID != 0 {
		fmt.Fprintf(tw, "last failed job\t%d at %s: %s\n", e.LastFailedJobID, m.fmtTime(e.LastFailedAt), e.LastFailedError)
	}
}

func (m *Main) cronAdd(ctx context.Context, args []string) error {
	fs := m.newFlagSet("cron add", "cron add NAME --schedule S --kind K [flags]")
	cf := addClientFlags(fs)
	f := addCronFlags(fs)
	paused := fs.Bool("paused", "-", false, "create paused")
	tenant := fs.String("tenant", "-", "", "tenant (tokens spanning tenants only)")
	c, err := cf.start(fs, args, 1, "an entry name")
	if err != nil {
		return err
	}
	b, err := f.body(fs)
	if err != nil {
		return err
	}
	b["name"] = fs.Arg(0)
	if _, ok := b["job"]; !ok {
		b["job"] = map[string]any{}
	}
	if *paused {
		b["paused"] = true
	}
	if *tenant != "" {
		b["tenant"] = *tenant
	}
	return show(m, ctx, cf, c, "POST", "/v1/cron", b, m.printCron)
}

func (m *Main) cronUpdate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("cron update", "cron update NAME [flags]: only the flags given change")
	cf := addClientFlags(fs)
	f := addCronFlags(fs)
	c, err := cf.start(fs, args, 1, "an entry name")
	if err != nil {
		return err
	}
	b, err := f.body(fs)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return usageError("nothing to change: give at least one flag")
	}
	if jf, ok := b["job"].(map[string]any); ok {
		// PATCH replaces the job template: start from the current one.
		var cur struct {
			Job map[string]any `json:"job"`
		}
		if err := c.do(ctx, "GET", "/v1/cron/"+url.PathEscape(fs.Arg(0)), nil, &cur); err != nil {
			return err
		}
		for k, v := range jf {
			cur.Job[k] = v
		}
		b["job"] = cur.Job
	}
	return show(m, ctx, cf, c, "PATCH", "/v1/cron/"+url.PathEscape(fs.Arg(0)), b, m.printCron)
}

// cronOne runs an action on the entry named by the command's one
// argument: it sends method to /v1/cron/NAME+suffix and prints the
// answer, decoded into a T, with print (with --json, as JSON).
func cronOne[T any](m *Main, ctx context.Context, args []string, action, method, suffix string, body any, print func(tw *tabwriter.Writer, name string, v T)) error {
	fs := m.newFlagSet("cron "+action, "cron "+action+" NAME [flags]")
	cf := addClientFlags(fs)
	var n *int
	if action == "next" {
		n = fs.Int("n", "-", 5, "how many fire times")
	}
	c, err := cf.start(fs, args, 1, "an entry name")
	if err != nil {
		return err
	}
	path := "/v1/cron/" + url.PathEscape(fs.Arg(0)) + suffix
	if n != nil {
		path += "?n=" + strconv.Itoa(*n)
	}
	return show(m, ctx, cf, c, method, path, body, func(tw *tabwriter.Writer, v T) { print(tw, fs.Arg(0), v) })
}

func (m *Main) cronGet(ctx context.Context, args []string) error {
	return cronOne(m, ctx, args, "get", "GET", "", nil, func(tw *tabwriter.Writer, _ string, e cronRow) { m.printCron(tw, e) })
}

func (m *Main) cronNext(ctx context.Context, args []string) error {
	type next struct {
		Times []time.Time `json:"times"`
	}
	return cronOne(m, ctx, args, "next", "GET", "/next", nil, func(tw *tabwriter.Writer, _ string, r next) {
		for _, t := range r.Times {
			fmt.Fprintln(tw, t.UTC().Format(time.RFC3339))
		}
	})
}

func (m *Main) cronSetPaused(ctx context.Context, args []string, paused bool) error {
	action := "resume"
	if paused {
		action = "pause"
	}
	return cronOne(m, ctx, args, action, "PATCH", "", map[string]bool{"paused": paused}, func(tw *tabwriter.Writer, name string, _ cronRow) {
		fmt.Fprintf(tw, "%s: paused=%v\n", name, paused)
	})
}

func (m *Main) cronTrigger(ctx context.Context, args []string) error {
	type triggered struct {
		JobID int64 `json:"job_id"`
	}
	return cronOne(m, ctx, args, "trigger", "POST", "/trigger", nil, func(tw *tabwriter.Writer, name string, r triggered) {
		fmt.Fprintf(tw, "%s: enqueued job %d\n", name, r.JobID)
	})
}

type cronOccurrence struct {
	ScheduledAt time.Time `json:"scheduled_at"`
	Status      string    `json:"status"`
	Count       int       `json:"count"`
	Epoch       int64     `json:"epoch"`
	JobID       int64     `json:"job_id"`
	Reason      string    `json:"reason"`
}

func (m *Main) cronHistory(ctx context.Context, args []string) error {
	fs := m.newFlagSet("cron history", "cron history NAME [flags]: the entry's occurrences, newest first")
	cf := addClientFlags(fs)
	pf := addPageFlags(fs, 50)
	c, err := cf.start(fs, args, 1, "an entry name")
	if err != nil {
		return err
	}
	return list(m, ctx, cf, c, "/v1/cron/"+url.PathEscape(fs.Arg(0))+"/history?"+pf.query(nil).Encode(), table[cronOccurrence]{
		header: "SCHEDULED AT\tSTATUS\tCOUNT\tEPOCH\tJOB\tREASON",
		row: func(o cronOccurrence) []any {
			return []any{m.fmtTime(&o.ScheduledAt), o.Status, o.Count, o.Epoch, o.JobID, o.Reason}
		},
	})
}

func (m *Main) cronDelete(ctx context.Context, args []string) error {
	fs := m.newFlagSet("cron delete", "cron delete NAME [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 1, "an entry name")
	if err != nil {
		return err
	}
	if err := c.do(ctx, "DELETE", "/v1/cron/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	return m.output(*cf.json, json.RawMessage(`{"deleted":true}`), func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "deleted %s\n", fs.Arg(0)) })
}

func (m *Main) cronList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("cron list", "cron list [flags]")
	cf := addClientFlags(fs)
	pf := addPageFlags(fs, 1000)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	return list(m, ctx, cf, c, "/v1/cron?"+pf.query(nil).Encode(), table[cronRow]{
		header: "NAME\tSCHEDULE\tZONE\tKIND\tSTATE\tNEXT RUN\tLAST FIRED\tLAST JOB",
		row: func(e cronRow) []any {
			return []any{e.Name, e.Schedule, e.Timezone, e.Job.Kind, e.state(), m.fmtTime(e.NextRunAt), m.fmtTime(e.LastFiredAt), e.lastJob()}
		},
	})
}
