package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

type batchRow struct {
	ID            int64            `json:"id"`
	Tenant        string           `json:"tenant"`
	State         string           `json:"state"`
	CallbackKind  string           `json:"callback_kind"`
	CallbackQueue string           `json:"callback_queue"`
	Total         int64            `json:"total"`
	Counts        map[string]int64 `json:"counts"`
	CreatedAt     *time.Time       `json:"created_at"`
	FinishedAt    *time.Time       `json:"finished_at"`
	CallbackJobID int64            `json:"callback_job_id"`
}

func (m *Main) runBatches(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "batches", []action{
		{"open", "open a batch with a callback job (then: gaffer jobs enqueue --batch ID)", (*Main).batchesOpen},
		{"list", "list batches, newest first", (*Main).batchesList},
		{"get", "show a batch's progress: its jobs' counts by state and its callback", (*Main).batchesGet},
		{"close", "close a batch: its callback runs once every job of it is final", (*Main).batchesClose},
		{"cancel", "cancel a batch: its unfinished jobs are cancelled; its callback still runs once", (*Main).batchesCancel},
	}, args)
}

func countsText(c map[string]int64) string {
	var parts []string
	for _, st := range []string{"pending", "running", "retrying", "completed", "failed", "cancelled"} {
		if n := c[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func printBatch(tw *tabwriter.Writer, b batchRow) {
	fmt.Fprintf(tw, "batch %d: %s\n", b.ID, b.State)
	fmt.Fprintf(tw, "callback:\t%s (queue %s)\n", b.CallbackKind, b.CallbackQueue)
	fmt.Fprintf(tw, "jobs:\t%d\n", b.Total)
	fmt.Fprintf(tw, "by state:\t%s\n", countsText(b.Counts))
	if b.CallbackJobID != 0 {
		fmt.Fprintf(tw, "callback job:\t%d\n", b.CallbackJobID)
	}
}

func (m *Main) batchesOpen(ctx context.Context, args []string) error {
	fs := m.newFlagSet("batches open", "batches open --callback KIND [flags]")
	cf := addClientFlags(fs)
	kind := fs.String("callback", "-", "", "the callback job's kind (required)")
	argsJSON := fs.String("callback-args", "-", "", "the callback's args (JSON), handed to it inside the batch's summary")
	queue := fs.String("callback-queue", "-", "", "the callback's queue (default \"default\")")
	tenant := fs.String("tenant", "-", "", "tenant (tokens spanning tenants only)")
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	if *kind == "" {
		return usageError("--callback is required")
	}
	cb := map[string]any{"kind": *kind}
	if *argsJSON != "" {
		if !json.Valid([]byte(*argsJSON)) {
			return usageError("--callback-args is not valid JSON")
		}
		cb["args"] = json.RawMessage(*argsJSON)
	}
	if *queue != "" {
		cb["queue"] = *queue
	}
	body := map[string]any{"callback": cb}
	if *tenant != "" {
		body["tenant"] = *tenant
	}
	return show(m, ctx, cf, c, "POST", "/v1/batches", body, printBatch)
}

func (m *Main) batchesList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("batches list", "batches list [flags]")
	cf := addClientFlags(fs)
	state := fs.String("state", "-", "", "open, closed, cancelled or finished")
	tenant := fs.String("tenant", "-", "", "only this tenant's batches (tokens spanning tenants only)")
	pf := addPageFlags(fs, 50)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	q := pf.query(nil)
	if *state != "" {
		q.Set("state", *state)
	}
	if *tenant != "" {
		q.Set("tenant", *tenant)
	}
	return list(m, ctx, cf, c, "/v1/batches?"+q.Encode(), table[batchRow]{
		header: "BATCH\tSTATE\tCALLBACK\tJOBS\tDONE\tCREATED\tFINISHED",
		row: func(b batchRow) []any {
			done := b.Counts["completed"] + b.Counts["failed"] + b.Counts["cancelled"]
			return []any{b.ID, b.State, b.CallbackKind, b.Total, done, m.fmtTime(b.CreatedAt), m.fmtTime(b.FinishedAt)}
		},
	})
}

func (m *Main) batchCall(ctx context.Context, args []string, action, method, suffix string) error {
	fs := m.newFlagSet("batches "+action, "batches "+action+" BATCH [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 1, "a batch id")
	if err != nil {
		return err
	}
	return show(m, ctx, cf, c, method, "/v1/batches/"+url.PathEscape(fs.Arg(0))+suffix, nil, printBatch)
}

func (m *Main) batchesGet(ctx context.Context, args []string) error {
	return m.batchCall(ctx, args, "get", "GET", "")
}

func (m *Main) batchesClose(ctx context.Context, args []string) error {
	return m.batchCall(ctx, args, "close", "POST", "/close")
}

func (m *Main) batchesCancel(ctx context.Context, args []string) error {
	return m.batchCall(ctx, args, "cancel", "POST", "/cancel")
}
