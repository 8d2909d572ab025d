package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

type jobRow struct {
	ID          int64           `json:"id"`
	Tenant      string          `json:"tenant"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	State       string          `json:"state"`
	Priority    int             `json:"priority"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	RunAt       *time.Time      `json:"run_at"`
	CreatedAt   *time.Time      `json:"created_at"`
	FinalizedAt *time.Time      `json:"finalized_at"`
	Node        string          `json:"node"`
	Sequence    string          `json:"sequence"`
	OnFailure   string          `json:"sequence_on_failure"`
	Args        json.RawMessage `json:"args"`
	Tags        []string        `json:"tags"`
	Result      json.RawMessage `json:"result"`
	Progress    *struct {
		Percent float64    `json:"percent"`
		Message string     `json:"message"`
		Attempt int        `json:"attempt"`
		At      *time.Time `json:"at"`
	} `json:"progress"`
	Errors []struct {
		Attempt int    `json:"attempt"`
		Kind    string `json:"kind"`
		Error   string `json:"error"`
	} `json:"errors"`
}

func (m *Main) runJobs(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "jobs", []action{
		{"enqueue", "enqueue a job", (*Main).jobsEnqueue},
		{"get", "show one job", (*Main).jobsGet},
		{"list", "list jobs, newest first", (*Main).jobsList},
		{"cancel", "cancel a job, or many by ids or filter", (*Main).jobsCancel},
		{"retry", "run a retrying or failed job again now, or many by ids or filter", (*Main).jobsRetry},
		{"delete", "delete jobs by ids or filter (never running ones, nor a running workflow's)", (*Main).jobsDelete},
	}, args)
}

func (m *Main) jobsEnqueue(ctx context.Context, args []string) error {
	fs := m.newFlagSet("jobs enqueue", "jobs enqueue --kind KIND [flags]")
	cf := addClientFlags(fs)
	kind := fs.String("kind", "-", "", "job kind (required)")
	argsJSON := fs.String("args", "-", "", "job args as JSON, e.g. '{\"to\":\"ada@example.com\"}'")
	queue := fs.String("queue", "-", "", "queue (default \"default\")")
	priority := fs.Int("priority", "-", 0, "0 (first) to 9 (last)")
	delay := fs.String("delay", "-", "", "run after this long, e.g. 5m")
	runAt := fs.String("run-at", "-", "", "run at this RFC 3339 time")
	attempts := fs.Int("max-attempts", "-", 0, "attempts before the DLQ (default 25)")
	timeout := fs.String("timeout", "-", "", "per-attempt timeout, e.g. 30s")
	unique := fs.String("unique-key", "-", "", "while an unfinished job holds this key, return it instead")
	uniqueStates := fs.String("unique-states", "-", "", "comma-separated job states in which a job enqueued with a window holds --unique-key, e.g. pending,running,completed (docs/shaping.md)")
	uniqueFor := fs.String("unique-for", "-", "", "a job enqueued with a window holds --unique-key this long from its enqueue, e.g. 1h (1s to 8784h)")
	tags := fs.Strings("tag", "label the job with this tag, for search: 1-64 letters, digits and _ . : / = + @ - (at most 16)")
	debounceKey := fs.String("debounce-key", "-", "", "while a job of this key has not started, replace its args and move it to run --debounce-window from now, instead of enqueueing (docs/shaping.md)")
	debounceWindow := fs.String("debounce-window", "-", "", "with --debounce-key: run this long after the last enqueue of the key, e.g. 30s")
	debounceMaxWait := fs.String("debounce-max-wait", "-", "", "with --debounce-key: run no later than this long after the first enqueue, e.g. 5m (default: no bound)")
	sequence := fs.String("sequence", "-", "", "enqueue into this sequence: its jobs run one at a time, in enqueue order (docs/shaping.md#sequences)")
	sequenceArgs := fs.String("sequence-key-args", "-", "", "comma-separated args fields: the sequence is the kind plus their values (instead of --sequence)")
	onFailure := fs.String("sequence-on-failure", "-", "", "halt (default: a failed job stops its sequence until replayed or resumed) or continue")
	batch := fs.Int64("batch", "-", 0, "enqueue into this open batch (gaffer batches open; docs/shaping.md)")
	tenant := fs.String("tenant", "-", "", "tenant (tokens spanning tenants only)")
	idem := fs.String("idempotency-key", "-", "", "Idempotency-Key header: retries with the same key enqueue once")
	wait := fs.Bool("wait", "-", false, "wait until the job is completed, failed or cancelled and print its result; exit 1 unless it completed")
	allowUnknown := fs.Bool("allow-unknown-kind", "-", false, "enqueue even if no node or remote worker registered the kind (refused otherwise: unknown_kind)")
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	body := map[string]any{"kind": *kind}
	if *argsJSON != "" {
		if !json.Valid([]byte(*argsJSON)) {
			return usageError("--args is not valid JSON")
		}
		body["args"] = json.RawMessage(*argsJSON)
	}
	set := func(k string, v string) {
		if v != "" {
			body[k] = v
		}
	}
	set("queue", *queue)
	set("delay", *delay)
	set("run_at", *runAt)
	set("timeout", *timeout)
	set("unique_key", *unique)
	set("unique_for", *uniqueFor)
	if len(*tags) > 0 {
		body["tags"] = *tags
	}
	if *debounceKey != "" || *debounceWindow != "" || *debounceMaxWait != "" {
		d := map[string]any{"key": *debounceKey, "window": *debounceWindow}
		if *debounceMaxWait != "" {
			d["max_wait"] = *debounceMaxWait
		}
		body["debounce"] = d
	}
	if *uniqueStates != "" {
		body["unique_states"] = strings.Split(*uniqueStates, ",")
	}
	if *sequence != "" || *sequenceArgs != "" || *onFailure != "" {
		s := map[string]any{}
		if *sequence != "" {
			s["key"] = *sequence
		}
		if *sequenceArgs != "" {
			s["key_args"] = strings.Split(*sequenceArgs, ",")
		}
		if *onFailure != "" {
			s["on_failure"] = *onFailure
		}
		body["sequence"] = s
	}
	set("tenant", *tenant)
	if *priority != 0 {
		body["priority"] = *priority
	}
	if *attempts != 0 {
		body["max_attempts"] = *attempts
	}
	if *allowUnknown {
		body["allow_unknown_kind"] = true
	}
	if *batch != 0 {
		body["batch"] = *batch
	}
	type enqueued struct {
		Job       jobRow `json:"job"`
		Existing  bool   `json:"existing"`
		Debounced bool   `json:"debounced"`
	}
	res, raw, err := call[enqueued](ctx, c, "POST", "/v1/jobs", body, "Idempotency-Key", *idem)
	if err != nil {
		return err
	}
	if !*wait || !*cf.json {
		err := m.output(*cf.json, raw, func(tw *tabwriter.Writer) {
			if res.Debounced {
				fmt.Fprintf(tw, "debounced into job %d (now due %s)\n", res.Job.ID, res.Job.RunAt.Format(time.RFC3339))
				return
			}
			if res.Existing {
				fmt.Fprintf(tw, "unique key held: existing job %d (%s)\n", res.Job.ID, res.Job.State)
				return
			}
			fmt.Fprintf(tw, "enqueued job %d (%s, queue %s)\n", res.Job.ID, res.Job.Kind, res.Job.Queue)
		})
		if err != nil || !*wait {
			return err
		}
	}
	return m.waitJob(ctx, cf, c, res.Job.ID, false)
}

// finalJobStates are the states a job does not leave.
var finalJobStates = []string{"completed", "failed", "cancelled"}

// waitJob polls job id until it is final, then prints it (with -o json
// the job as the API gives it): its result, or its last error. With
// every, it prints the job at the start and each time it changes. A job
// that did not complete is an error: exit 1.
func (m *Main) waitJob(ctx context.Context, cf *clientFlags, c *apiClient, id int64, every bool) error {
	path := "/v1/jobs/" + strconv.FormatInt(id, 10)
	var last json.RawMessage
	var j jobRow
	err := m.poll(ctx, func() (bool, error) {
		var raw json.RawMessage
		var err error
		if j, raw, err = call[jobRow](ctx, c, "GET", path, nil); err != nil {
			return false, err
		}
		done := slices.Contains(finalJobStates, j.State)
		if every && !bytes.Equal(raw, last) {
			if last != nil && !*cf.json {
				fmt.Fprintln(m.Stdout)
			}
			if err := m.output(*cf.json, raw, func(tw *tabwriter.Writer) { m.printJob(tw, j) }); err != nil {
				return false, err
			}
		} else if done && !every {
			err := m.output(*cf.json, raw, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "job %d %s", j.ID, j.State)
				if len(j.Result) > 0 {
					fmt.Fprintf(tw, ": %s", j.Result)
				} else if n := len(j.Errors); n > 0 {
					fmt.Fprintf(tw, ": attempt %d (%s): %s", j.Errors[n-1].Attempt, j.Errors[n-1].Kind, j.Errors[n-1].Error)
				}
				fmt.Fprintln(tw)
			})
			if err != nil {
				return false, err
			}
		}
		last = raw
		return done, nil
	})
	if err != nil {
		return err
	}
	if j.State != "completed" {
		return fmt.Errorf("job %d %s", j.ID, j.State)
	}
	return nil
}

func (m *Main) jobsGet(ctx context.Context, args []string) error {
	fs := m.newFlagSet("jobs get", "jobs get ID [flags]")
	cf := addClientFlags(fs)
	watch := fs.Bool("watch", "-", false, "print the job again each time it changes, until it is completed, failed or cancelled (exit 1 unless completed)")
	c, err := cf.start(fs, args, 1, "a job id")
	if err != nil {
		return err
	}
	if *watch {
		id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
		if err != nil {
			return usageError(fmt.Sprintf("job id %q is not a number", fs.Arg(0)))
		}
		return m.waitJob(ctx, cf, c, id, true)
	}
	return show(m, ctx, cf, c, "GET", "/v1/jobs/"+url.PathEscape(fs.Arg(0)), nil, m.printJob)
}

// printJob prints one job as jobs get shows it.
func (m *Main) printJob(tw *tabwriter.Writer, j jobRow) {
	fmt.Fprintf(tw, "id\t%d\nkind\t%s\ntenant\t%s\nqueue\t%s\nstate\t%s\npriority\t%d\nattempt\t%d of %d\nrun at\t%s\ncreated\t%s\nfinished\t%s\nnode\t%s\nargs\t%s\n",
		j.ID, j.Kind, j.Tenant, j.Queue, j.State, j.Priority, j.Attempt, j.MaxAttempts, m.fmtTime(j.RunAt), m.fmtTime(j.CreatedAt), m.fmtTime(j.FinalizedAt), orDash(j.Node), j.Args)
	if j.Sequence != "" {
		// Keys are UTF-8 without NUL, but may hold any other character.
		fmt.Fprintf(tw, "sequence\t%s (on failure: %s)\n", strconv.Quote(j.Sequence), j.OnFailure)
	}
	if p := j.Progress; p != nil {
		// The message is checked where it enters: one printable line.
		fmt.Fprintf(tw, "progress\t%s%% %s (attempt %d, %s)\n", strconv.FormatFloat(p.Percent, 'f', -1, 64), p.Message, p.Attempt, m.fmtTime(p.At))
	}
	if len(j.Tags) > 0 {
		fmt.Fprintf(tw, "tags\t%s\n", tagsCell(j.Tags))
	}
	if len(j.Result) > 0 {
		fmt.Fprintf(tw, "result\t%s\n", j.Result)
	}
	for _, e := range j.Errors {
		fmt.Fprintf(tw, "error\tattempt %d (%s): %s\n", e.Attempt, e.Kind, e.Error)
	}
}

func (m *Main) jobsList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("jobs list", "jobs list [flags]")
	cf := addClientFlags(fs)
	state := fs.String("state", "-", "", "states, comma-separated")
	queue := fs.String("queue", "-", "", "queue")
	kind := fs.String("kind", "-", "", "kind")
	cronEntry := fs.String("cron-entry", "-", "", "only the jobs this cron entry made")
	workflowRun := fs.Int64("workflow-run", "-", 0, "only the jobs of this workflow run's steps")
	sequence := fs.String("sequence", "-", "", "only the jobs of this sequence")
	batch := fs.Int64("batch", "-", 0, "only the jobs enqueued into this batch")
	timers := fs.Bool("timers", "-", false, "also the jobs of workflows' sleep and signal steps (gaffer.sleep, gaffer.signal), left out otherwise")
	tenant := fs.String("tenant", "-", "", "only this tenant's jobs (tokens spanning tenants only)")
	sf := addSearchFlags(fs, "only")
	pf := addPageFlags(fs, 50)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	q := pf.query(nil)
	if err := sf.query(q); err != nil {
		return err
	}
	if *workflowRun != 0 {
		q.Set("workflow_run", strconv.FormatInt(*workflowRun, 10))
	}
	if *batch != 0 {
		q.Set("batch", strconv.FormatInt(*batch, 10))
	}
	if *timers {
		q.Set("timers", "true")
	}
	for k, v := range map[string]string{"state": *state, "queue": *queue, "kind": *kind, "cron_entry": *cronEntry, "sequence": *sequence, "tenant": *tenant} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return list(m, ctx, cf, c, "/v1/jobs?"+q.Encode(), table[jobRow]{
		header: "ID\tKIND\tQUEUE\tSTATE\tATTEMPT\tRUN AT\tNODE",
		row: func(j jobRow) []any {
			return []any{j.ID, j.Kind, j.Queue, j.State, fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), m.fmtTime(j.RunAt), orDash(j.Node)}
		},
		// A token spanning tenants lists several tenants' jobs: which is
		// whose is shown once the rows hold more than one. Tags are shown
		// once a row has some.
		columns: func(rows []jobRow) (string, func(jobRow) []any) {
			tenants, tagged := false, false
			for _, j := range rows {
				tenants = tenants || j.Tenant != rows[0].Tenant
				tagged = tagged || len(j.Tags) > 0
			}
			if !tenants && !tagged {
				return "", nil
			}
			header := "ID\tKIND\tQUEUE\tSTATE\tATTEMPT\tRUN AT\tNODE"
			if tenants {
				header = "ID\tTENANT\tKIND\tQUEUE\tSTATE\tATTEMPT\tRUN AT\tNODE"
			}
			if tagged {
				header += "\tTAGS"
			}
			return header, func(j jobRow) []any {
				row := []any{j.ID, j.Kind, j.Queue, j.State, fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts), m.fmtTime(j.RunAt), orDash(j.Node)}
				if tenants {
					row = append([]any{j.ID, j.Tenant}, row[1:]...)
				}
				if tagged {
					row = append(row, tagsCell(j.Tags))
				}
				return row
			}
		},
	})
}

func (m *Main) jobsCancel(ctx context.Context, args []string) error {
	fs := m.newFlagSet("jobs cancel", "jobs cancel ID [ID...] [flags]\n       jobs cancel --state S --queue Q ... | --all [--dry-run] [flags]\n\n"+
		"Several ids or a filter cancel many jobs (POST /v1/jobs/cancel), at most --limit per request, until none is left.")
	cf := addClientFlags(fs)
	bf := addBulkFlags(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	if bf.bulk(fs) {
		return m.jobsBulk(ctx, "cancel", fs, cf, bf)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	return show(m, ctx, cf, c, "POST", "/v1/jobs/"+url.PathEscape(fs.Arg(0))+"/cancel", nil, func(tw *tabwriter.Writer, j jobRow) {
		if j.State == "running" {
			fmt.Fprintf(tw, "job %d is running: its handler is being cancelled\n", j.ID)
			return
		}
		fmt.Fprintf(tw, "job %d %s\n", j.ID, j.State)
	})
}

func (m *Main) jobsRetry(ctx context.Context, args []string) error {
	fs := m.newFlagSet("jobs retry", "jobs retry ID [ID...] [flags]\n       jobs retry --state S --queue Q ... | --all [--dry-run] [flags]\n\n"+
		"A retrying job becomes due at once; a failed job's DLQ entry is replayed into\none new job, whose id is printed. Several ids or a filter retry many jobs\n(POST /v1/jobs/retry).")
	cf := addClientFlags(fs)
	bf := addBulkFlags(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	if bf.bulk(fs) {
		return m.jobsBulk(ctx, "retry", fs, cf, bf)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	type retried struct {
		Job jobRow `json:"job"`
	}
	return show(m, ctx, cf, c, "POST", "/v1/jobs/"+url.PathEscape(fs.Arg(0))+"/retry", nil, func(tw *tabwriter.Writer, out retried) {
		if strconv.FormatInt(out.Job.ID, 10) == fs.Arg(0) {
			fmt.Fprintf(tw, "job %d is due now\n", out.Job.ID)
			return
		}
		fmt.Fprintf(tw, "job %s was replayed as job %d\n", fs.Arg(0), out.Job.ID)
	})
}

func (m *Main) jobsDelete(ctx context.Context, args []string) error {
	fs := m.newFlagSet("jobs delete", "jobs delete ID [ID...] [flags]\n       jobs delete --state S --queue Q ... | --all [--dry-run] [flags]\n\n"+
		"Deletes jobs for good (POST /v1/jobs/delete): never a running job, nor a job of a\nworkflow run still running; a failed job's DLQ entry stays.")
	cf := addClientFlags(fs)
	bf := addBulkFlags(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	return m.jobsBulk(ctx, "delete", fs, cf, bf)
}
