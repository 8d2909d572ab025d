package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// bulkFlags select jobs for `gaffer jobs cancel|retry|delete` by filter,
// as POST /v1/jobs/cancel, /retry and /delete take it.
type bulkFlags struct {
	state, queue, kind, cronEntry, tenant *string
	workflowRun                           *int64
	timers, all, dryRun                   *bool
	limit                                 *int
	search                                *searchFlags
}

func addBulkFlags(fs *flagSet) *bulkFlags {
	return &bulkFlags{
		search:      addSearchFlags(fs, "act on"),
		state:       fs.String("state", "-", "", "act on the jobs in these states, comma-separated (instead of ids)"),
		queue:       fs.String("queue", "-", "", "act on the jobs of this queue"),
		kind:        fs.String("kind", "-", "", "act on the jobs of this kind"),
		cronEntry:   fs.String("cron-entry", "-", "", "act on the jobs this cron entry made"),
		workflowRun: fs.Int64("workflow-run", "-", 0, "act on the jobs of this workflow run's steps"),
		tenant:      fs.String("tenant", "-", "", "only this tenant's jobs (tokens spanning tenants only)"),
		timers:      fs.Bool("timers", "-", false, "include workflows' sleep and signal timer jobs (gaffer.sleep, gaffer.signal)"),
		all:         fs.Bool("all", "-", false, "act on every job (of the tenant) the action applies to: no filter"),
		dryRun:      fs.Bool("dry-run", "-", false, "count the jobs the action would act on; change nothing"),
		limit:       fs.Int("limit", "-", 0, "act on at most this many jobs per request, 1-10000 (default 10000); requests repeat until none are left"),
	}
}

// filtered reports whether a filter flag was given.
func (b *bulkFlags) filtered() bool {
	return *b.state != "" || *b.queue != "" || *b.kind != "" || *b.cronEntry != "" || *b.workflowRun != 0 || *b.timers || *b.all || b.search.given()
}

// bulk reports whether the command is a bulk one: several ids, a filter,
// or a dry run.
func (b *bulkFlags) bulk(fs *flagSet) bool {
	return fs.NArg() != 1 || b.filtered() || *b.dryRun || *b.limit != 0 || *b.tenant != ""
}

type bulkAnswer struct {
	Action     string `json:"action"`
	DryRun     bool   `json:"dry_run"`
	Matched    int    `json:"matched"`
	Acted      int    `json:"acted"`
	Cancelling int    `json:"cancelling"`
	Retried    []struct {
		ID    int64 `json:"id"`
		RunID int64 `json:"run_id"`
	} `json:"retried"`
	More    bool `json:"more"`
	Skipped []struct {
		ID     int64  `json:"id"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// jobsBulk runs a bulk action: by the ids given, or by the filter flags,
// repeating the request (each acts on at most --limit jobs) until no job
// the action applies to is left; a dry run asks once.
func (m *Main) jobsBulk(ctx context.Context, action string, fs *flagSet, cf *clientFlags, b *bulkFlags) error {
	body := map[string]any{}
	if fs.NArg() > 0 {
		if b.filtered() {
			return usageError("give job ids or filter flags (--state, --queue, --kind, --cron-entry, --workflow-run, --all), not both")
		}
		ids := make([]int64, fs.NArg())
		for i, s := range fs.Args() {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= 0 {
				return usageError(fmt.Sprintf("job ids are positive integers, got %q", s))
			}
			ids[i] = id
		}
		body["ids"] = ids
	} else {
		if !b.filtered() {
			fs.Usage()
			return usageError("expected job ids, or filter flags (--state, --queue, --kind, --cron-entry, --workflow-run), or --all")
		}
		filter := map[string]any{}
		if *b.state != "" {
			filter["state"] = strings.Split(*b.state, ",")
		}
		for k, v := range map[string]string{"queue": *b.queue, "kind": *b.kind, "cron_entry": *b.cronEntry} {
			if v != "" {
				filter[k] = v
			}
		}
		if *b.workflowRun != 0 {
			filter["workflow_run"] = *b.workflowRun
		}
		if *b.timers {
			filter["timers"] = true
		}
		if err := b.search.filter(filter); err != nil {
			return err
		}
		body["filter"] = filter
	}
	if *b.tenant != "" {
		body["tenant"] = *b.tenant
	}
	if *b.dryRun {
		body["dry_run"] = true
	}
	if *b.limit != 0 {
		body["limit"] = *b.limit
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	var total bulkAnswer
	var last json.RawMessage
	requests := 0
	for {
		requests++
		v, raw, err := call[bulkAnswer](ctx, c, "POST", "/v1/jobs/"+action, body)
		if err != nil {
			return err
		}
		last = raw
		total.Action, total.DryRun, total.More = v.Action, v.DryRun, v.More
		total.Matched += v.Matched
		total.Acted += v.Acted
		total.Cancelling += v.Cancelling
		total.Retried = append(total.Retried, v.Retried...)
		total.Skipped = append(total.Skipped, v.Skipped...)
		// By ids, one request does all; by filter, go on while jobs are
		// left and this request acted on some (those another transaction
		// held are left for a later run).
		if v.DryRun || body["ids"] != nil || !v.More || v.Acted == 0 {
			break
		}
	}
	if requests > 1 {
		// Several requests: their sums, as one answer.
		last, _ = json.Marshal(total)
	}
	return m.output(*cf.json, last, func(tw *tabwriter.Writer) {
		switch {
		case total.DryRun:
			more := ""
			if total.More {
				more = " (and more: a request counts at most its limit)"
			}
			fmt.Fprintf(tw, "%s would act on %d jobs%s\n", action, total.Matched, more)
		default:
			fmt.Fprintf(tw, "%s: %d jobs\n", action, total.Acted)
			if total.Cancelling > 0 {
				fmt.Fprintf(tw, "%d of them running: their handlers are being cancelled\n", total.Cancelling)
			}
			for _, r := range total.Retried {
				if r.RunID != r.ID {
					fmt.Fprintf(tw, "job %d was replayed as job %d\n", r.ID, r.RunID)
				}
			}
			if total.More {
				fmt.Fprintln(tw, "jobs the action applies to remain (held by another transaction): run the command again")
			}
		}
		for _, s := range total.Skipped {
			fmt.Fprintf(tw, "skipped job %d: %s\n", s.ID, s.Reason)
		}
	})
}
