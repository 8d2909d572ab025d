package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gafferhq/gaffer/workflow"
)

type workflowRow struct {
	ID         int64           `json:"id"`
	Name       string          `json:"name"`
	State      string          `json:"state"`
	Error      string          `json:"error"`
	Output     json.RawMessage `json:"output"`
	CreatedAt  *time.Time      `json:"created_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	Steps      []struct {
		Name      string          `json:"name"`
		Type      string          `json:"type"`
		Kind      string          `json:"kind"`
		State     string          `json:"state"`
		DependsOn []string        `json:"depends_on"`
		JobID     int64           `json:"job_id"`
		Attempt   int             `json:"attempt"`
		Result    json.RawMessage `json:"result"`
		Error     string          `json:"error"`
	} `json:"steps"`
}

func (m *Main) runWorkflows(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "workflows", []action{
		{"submit", "start a run from a JSON definition (--file, or - for stdin)", (*Main).workflowsSubmit},
		{"list", "list runs, newest first", (*Main).workflowsList},
		{"get", "show a run and its steps", (*Main).workflowsGet},
		{"cancel", "cancel a run", (*Main).workflowsCancel},
		{"signal", "deliver a signal to a waiting step", (*Main).workflowsSignal},
	}, args)
}

func printRun(tw *tabwriter.Writer, r workflowRow) {
	fmt.Fprintf(tw, "run %d (%s): %s", r.ID, r.Name, r.State)
	if r.Error != "" {
		fmt.Fprintf(tw, " — %s", r.Error)
	}
	fmt.Fprintln(tw)
	if len(r.Output) > 0 {
		fmt.Fprintf(tw, "output: %s\n", r.Output)
	}
	if len(r.Steps) == 0 {
		return
	}
	fmt.Fprintln(tw, "STEP\tTYPE\tKIND\tSTATE\tAFTER\tJOB\tATTEMPT\tRESULT / ERROR")
	for _, s := range r.Steps {
		detail := string(s.Result)
		if s.Error != "" {
			detail = s.Error
		}
		job := "-"
		if s.JobID != 0 {
			job = strconv.FormatInt(s.JobID, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Type, s.Kind, s.State, orDash(strings.Join(s.DependsOn, ",")), job, s.Attempt, detail)
	}
}

func (m *Main) workflowsSubmit(ctx context.Context, args []string) error {
	fs := m.newFlagSet("workflows submit", `workflows submit --file def.json [flags]

A definition is {"name": "...", "steps": [{"name": "a", "kind": "k", "args": {...},
"depends_on": ["..."], "queue", "priority", "max_attempts", "timeout": "30s",
"allow_failure": true, "sleep": "5m", "signal": "1h"}, ...]}.`)
	cf := addClientFlags(fs)
	file := fs.String("file", "-", "", "the definition (JSON); - reads stdin")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := needArgs(fs, 0, "no positional arguments"); err != nil {
		return err
	}
	if *file == "" {
		return usageError("--file is required (use - for stdin)")
	}
	var raw []byte
	var err error
	if *file == "-" {
		raw, err = io.ReadAll(m.Stdin)
	} else {
		raw, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	if !json.Valid(raw) {
		return usageError(*file + " is not valid JSON")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	return show(m, ctx, cf, c, "POST", "/v1/workflows", json.RawMessage(raw), printRun)
}

func (m *Main) workflowsList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("workflows list", "workflows list [flags]")
	cf := addClientFlags(fs)
	state := fs.String("state", "-", "", "running, completed, failed or cancelled")
	pf := addPageFlags(fs, 50)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	q := pf.query(nil)
	if *state != "" {
		q.Set("state", *state)
	}
	return list(m, ctx, cf, c, "/v1/workflows?"+q.Encode(), table[workflowRow]{
		header: "RUN\tNAME\tSTATE\tCREATED\tFINISHED\tERROR",
		row: func(r workflowRow) []any {
			return []any{r.ID, r.Name, r.State, m.fmtTime(r.CreatedAt), m.fmtTime(r.FinishedAt), r.Error}
		},
	})
}

func (m *Main) workflowRun(ctx context.Context, args []string, action, method, suffix string) error {
	fs := m.newFlagSet("workflows "+action, "workflows "+action+" RUN [flags]")
	cf := addClientFlags(fs)
	var payload, step *string
	if action == "signal" {
		fs.Usage = func() { fmt.Fprintln(m.Stderr, "Usage: gaffer workflows signal RUN STEP [--payload JSON] [flags]") }
		payload = fs.String("payload", "-", "null", "the signal's payload (JSON): the step's result")
		step = new(string)
	}
	var watch *bool
	if action == "get" {
		watch = fs.Bool("watch", "-", false, "print the run again each time it changes, until it is completed, failed or cancelled (exit 1 unless completed)")
	}
	want, what := 1, "a run id"
	if step != nil {
		want, what = 2, "a run id and a step name"
	}
	c, err := cf.start(fs, args, want, what)
	if err != nil {
		return err
	}
	var b any
	if step != nil {
		if !json.Valid([]byte(*payload)) {
			return usageError("--payload is not valid JSON")
		}
		b = map[string]any{"step": fs.Arg(1), "payload": json.RawMessage(*payload)}
	}
	path := "/v1/workflows/" + url.PathEscape(fs.Arg(0)) + suffix
	if watch != nil && *watch {
		return m.watchRun(ctx, cf, c, path)
	}
	return show(m, ctx, cf, c, method, path, b, printRun)
}

// watchRun prints the run at path, then again each time it changes,
// until it is final. A run that did not complete is an error: exit 1.
func (m *Main) watchRun(ctx context.Context, cf *clientFlags, c *apiClient, path string) error {
	var last json.RawMessage
	var r workflowRow
	err := m.poll(ctx, func() (bool, error) {
		var raw json.RawMessage
		var err error
		if r, raw, err = call[workflowRow](ctx, c, "GET", path, nil); err != nil {
			return false, err
		}
		if !bytes.Equal(raw, last) {
			if last != nil && !*cf.json {
				fmt.Fprintln(m.Stdout)
			}
			if err := m.output(*cf.json, raw, func(tw *tabwriter.Writer) { printRun(tw, r) }); err != nil {
				return false, err
			}
		}
		last = raw
		return r.State != workflow.Running, nil
	})
	if err != nil {
		return err
	}
	if r.State != workflow.Completed {
		return fmt.Errorf("run %d %s", r.ID, r.State)
	}
	return nil
}

func (m *Main) workflowsGet(ctx context.Context, args []string) error {
	return m.workflowRun(ctx, args, "get", "GET", "")
}

func (m *Main) workflowsCancel(ctx context.Context, args []string) error {
	return m.workflowRun(ctx, args, "cancel", "POST", "/cancel")
}

func (m *Main) workflowsSignal(ctx context.Context, args []string) error {
	return m.workflowRun(ctx, args, "signal", "POST", "/signal")
}
