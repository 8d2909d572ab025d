package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

type dlqRow struct {
	ID          int64      `json:"id"`
	JobID       int64      `json:"job_id"`
	Kind        string     `json:"kind"`
	Queue       string     `json:"queue"`
	Attempts    int        `json:"attempts"`
	Reason      string     `json:"reason"`
	FailedAt    *time.Time `json:"failed_at"`
	ReplayJobID int64      `json:"replay_job_id"`
	Errors      []struct {
		Error string `json:"error"`
	} `json:"errors"`
}

func (m *Main) runDLQ(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "dlq", []action{
		{"list", "list dead letters, newest first", (*Main).dlqList},
		{"get", "show one entry with its errors", (*Main).dlqGet},
		{"replay", "replay an entry (ID), or every entry matching filters", (*Main).dlqReplay},
		{"delete", "delete one entry", (*Main).dlqDelete},
		{"purge", "delete every entry matching filters", (*Main).dlqPurge},
	}, args)
}

type dlqFilterFlags struct {
	queue, kind, errText, after, before *string
}

func addDLQFilterFlags(fs *flagSet) *dlqFilterFlags {
	return &dlqFilterFlags{
		queue:   fs.String("queue", "-", "", "queue"),
		kind:    fs.String("kind", "-", "", "kind"),
		errText: fs.String("error", "-", "", "text in any attempt's error (case-insensitive)"),
		after:   fs.String("failed-after", "-", "", "RFC 3339 time"),
		before:  fs.String("failed-before", "-", "", "RFC 3339 time"),
	}
}

func (f *dlqFilterFlags) body() map[string]any {
	b := map[string]any{}
	for k, v := range map[string]string{"queue": *f.queue, "kind": *f.kind, "error": *f.errText, "failed_after": *f.after, "failed_before": *f.before} {
		if v != "" {
			b[k] = v
		}
	}
	return b
}

func (m *Main) dlqList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dlq list", "dlq list [flags]")
	cf := addClientFlags(fs)
	ff := addDLQFilterFlags(fs)
	pf := addPageFlags(fs, 50)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	q := pf.query(nil)
	for k, v := range ff.body() {
		q.Set(k, v.(string))
	}
	return list(m, ctx, cf, c, "/v1/dlq?"+q.Encode(), table[dlqRow]{
		header: "ID\tJOB\tKIND\tQUEUE\tATTEMPTS\tREASON\tFAILED AT\tREPLAYED AS\tLAST ERROR",
		row: func(e dlqRow) []any {
			last := ""
			if len(e.Errors) > 0 {
				last = e.Errors[len(e.Errors)-1].Error
				if len(last) > 60 {
					last = last[:57] + "..."
				}
			}
			replayed := "-"
			if e.ReplayJobID != 0 {
				replayed = strconv.FormatInt(e.ReplayJobID, 10)
			}
			return []any{e.ID, e.JobID, e.Kind, e.Queue, e.Attempts, e.Reason, m.fmtTime(e.FailedAt), replayed, last}
		},
	})
}

func (m *Main) dlqGet(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dlq get", "dlq get ID [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 1, "an entry id")
	if err != nil {
		return err
	}
	return show(m, ctx, cf, c, "GET", "/v1/dlq/"+url.PathEscape(fs.Arg(0)), nil, func(tw *tabwriter.Writer, e dlqRow) {
		fmt.Fprintf(tw, "entry\t%d\njob\t%d\nkind\t%s\nqueue\t%s\nreason\t%s\nfailed at\t%s\n", e.ID, e.JobID, e.Kind, e.Queue, e.Reason, m.fmtTime(e.FailedAt))
		for i, er := range e.Errors {
			fmt.Fprintf(tw, "error %d\t%s\n", i+1, er.Error)
		}
	})
}

func (m *Main) dlqReplay(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dlq replay", "dlq replay ID | dlq replay --kind K [--queue Q] [--error TEXT] … --all\n\nReplays one entry, or every unreplayed entry matching the filters (--all\nconfirms a replay without filters). Each entry becomes exactly one new job.")
	cf := addClientFlags(fs)
	ff := addDLQFilterFlags(fs)
	all := fs.Bool("all", "-", false, "replay every matching entry (required with filters)")
	if err := fs.parse(args); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	type replay struct {
		EntryID int64 `json:"entry_id"`
		JobID   int64 `json:"job_id"`
	}
	if fs.NArg() == 1 {
		if len(ff.body()) > 0 || *all {
			return usageError("give an entry id or filters with --all, not both")
		}
		return show(m, ctx, cf, c, "POST", "/v1/dlq/"+url.PathEscape(fs.Arg(0))+"/replay", nil, func(tw *tabwriter.Writer, r replay) {
			fmt.Fprintf(tw, "replayed entry %d as job %d\n", r.EntryID, r.JobID)
		})
	}
	if fs.NArg() != 0 || !*all {
		fs.Usage()
		return usageError("give one entry id, or filters and --all")
	}
	type replays struct {
		Replayed []replay `json:"replayed"`
	}
	return show(m, ctx, cf, c, "POST", "/v1/dlq/replay", ff.body(), func(tw *tabwriter.Writer, r replays) {
		fmt.Fprintf(tw, "replayed %d entries\n", len(r.Replayed))
		for _, x := range r.Replayed {
			fmt.Fprintf(tw, "  entry %d → job %d\n", x.EntryID, x.JobID)
		}
	})
}

func (m *Main) dlqDelete(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dlq delete", "dlq delete ID [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 1, "an entry id")
	if err != nil {
		return err
	}
	if err := c.do(ctx, "DELETE", "/v1/dlq/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	return m.output(*cf.json, json.RawMessage(`{"deleted":1}`), func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "deleted entry %s\n", fs.Arg(0)) })
}

func (m *Main) dlqPurge(ctx context.Context, args []string) error {
	fs := m.newFlagSet("dlq purge", "dlq purge [filters] --yes")
	cf := addClientFlags(fs)
	ff := addDLQFilterFlags(fs)
	yes := fs.Bool("yes", "-", false, "confirm: entries are deleted, not replayed")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := needArgs(fs, 0, "no positional arguments"); err != nil {
		return err
	}
	if !*yes {
		return usageError("purge deletes dead letters for good: add --yes")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	type purged struct {
		Deleted int64 `json:"deleted"`
	}
	return show(m, ctx, cf, c, "POST", "/v1/dlq/purge", ff.body(), func(tw *tabwriter.Writer, r purged) { fmt.Fprintf(tw, "deleted %d entries\n", r.Deleted) })
}
