package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
	"github.com/gafferhq/gaffer/workflow"
)

// applyEnv is the API on a fresh database, in this process, and tokens.
type applyEnv struct {
	t                   *testing.T
	st                  *store.Store
	url                 string
	admin, writer, acme string
	dir                 string
}

func newApplyEnv(t *testing.T) *applyEnv {
	t.Helper()
	st := pgtest.NewStore(t)
	tokens := auth.NewTokens(st.Pool())
	srv, err := api.New(api.Config{Pool: st.Pool(), Tokens: tokens, Jobs: job.NewClient(st.Pool(), nil), DLQ: dlq.NewClient(st.Pool()), Cron: cron.NewClient(st.Pool()), Workflows: workflow.NewClient(st.Pool())})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	mk := func(tenant string, scopes ...string) string {
		text, _, err := tokens.Create(context.Background(), auth.NewTokenRequest{Name: "t", Tenant: tenant, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	return &applyEnv{t: t, st: st, url: hs.URL, admin: mk("*", "admin"), writer: mk("default", "jobs:read", "jobs:write"),
		acme: mk("acme", "jobs:read", "jobs:write"), dir: t.TempDir()}
}

// apply runs gaffer cron apply with token, the file's text written to a
// file, and args.
func (a *applyEnv) apply(token, text string, args ...string) (string, string, error) {
	a.t.Helper()
	path := filepath.Join(a.dir, "schedules.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		a.t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	m := &Main{Stdin: strings.NewReader(text), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return map[string]string{"GAFFER_URL": a.url, "GAFFER_TOKEN": token}[k] }}
	err := m.Run(context.Background(), append([]string{"cron", "apply", "-f", path}, args...))
	return out.String(), errOut.String(), err
}

func (a *applyEnv) applyOK(token, text string, args ...string) string {
	a.t.Helper()
	out, errOut, err := a.apply(token, text, args...)
	if err != nil {
		a.t.Fatalf("cron apply %v: %v\nstdout: %s\nstderr: %s", args, err, out, errOut)
	}
	return out
}

// snapshot is every entry's tenant, name, schedule and updated_at: what
// a write would change.
func (a *applyEnv) snapshot() string {
	a.t.Helper()
	rows, err := a.st.Pool().Query(context.Background(), `SELECT tenant, name, schedule, paused, updated_at FROM gaffer.cron_entries ORDER BY tenant, name`)
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var tenant, name, schedule string
		var paused bool
		var at time.Time
		rows.Scan(&tenant, &name, &schedule, &paused, &at)
		fmt.Fprintf(&b, "%s/%s %q paused=%v %s\n", tenant, name, schedule, paused, at.Format(time.RFC3339Nano))
	}
	return b.String()
}

const schedulesFile = `# the team's schedules
entries:
  - name: nightly-report
    schedule: "30 2 * * *"
    timezone: America/New_York
    job:
      kind: report.build
      queue: reports
      args: {full: true, since: 2027-01-01, ratio: 1.50, tags: [a, b]}
      timeout: 10m
    missed: once
    overlap: skip
  - name: hourly-sync
    schedule: "@hourly"
    job: {kind: sync}
  - name: launch
    schedule: "@at 2030-01-01T09:00"
    timezone: Europe/Berlin
    job: {kind: announce, args: {text: "we are live"}}
`

func lines(out string) []string { return strings.Split(strings.TrimSpace(out), "\n") }

// apply, apply again (nothing changes, nothing is written), a dry run of
// an edit, the edit, and --prune: each prints the diff and does just it.
func TestCronApply(t *testing.T) {
	t.Parallel()
	a := newApplyEnv(t)
	ctx := context.Background()
	out := a.applyOK(a.writer, schedulesFile)
	for _, want := range []string{"create  nightly-report", "create  hourly-sync", "create  launch", "3 created, 0 updated, 0 unchanged, 0 deleted"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("first apply lacks %q:\n%s", want, out)
		}
	}
	e, err := cron.NewClient(a.st.Pool()).Get(ctx, "default", "nightly-report")
	if err != nil || e.Missed != "once" || e.Overlap != "skip" || e.Job.Timeout != 10*time.Minute || e.Job.Queue != "reports" {
		t.Fatalf("nightly-report as applied: %+v %v", e, err)
	}
	var args map[string]any
	json.Unmarshal(e.Job.Args, &args)
	if args["since"] != "2027-01-01" || args["ratio"] != 1.5 || args["full"] != true || len(args["tags"].([]any)) != 2 {
		t.Fatalf("args as applied: %s", e.Job.Args)
	}
	if l, _ := cron.NewClient(a.st.Pool()).Get(ctx, "default", "launch"); !l.NextRunAt.Equal(time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("launch's one instant: %s", l.NextRunAt)
	}

	// Again: nothing to do, nothing written.
	before := a.snapshot()
	out = a.applyOK(a.writer, schedulesFile)
	if !strings.Contains(out, "0 created, 0 updated, 3 unchanged, 0 deleted") || a.snapshot() != before {
		t.Fatalf("second apply:\n%s\nbefore %s\nafter %s", out, before, a.snapshot())
	}

	// An edit, dry then real: only hourly-sync changes.
	edited := strings.Replace(schedulesFile, `schedule: "@hourly"`, `schedule: "*/30 * * * *"`, 1)
	out = a.applyOK(a.writer, edited, "--dry-run")
	if !strings.Contains(out, "update") || !strings.Contains(out, "hourly-sync") || !strings.Contains(out, "schedule") ||
		!strings.Contains(out, "dry run") || a.snapshot() != before {
		t.Fatalf("dry run of an edit:\n%s", out)
	}
	out = a.applyOK(a.writer, edited)
	after := a.snapshot()
	if !strings.Contains(out, "0 created, 1 updated, 2 unchanged") || strings.Count(diffLines(before, after), "\n") != 1 || !strings.Contains(after, `"*/30 * * * *"`) {
		t.Fatalf("the edit:\n%s\nchanged:\n%s", out, diffLines(before, after))
	}

	// Dropped from the file: kept without --prune, deleted with it.
	dropped := edited[:strings.Index(edited, "  - name: launch")]
	out = a.applyOK(a.writer, dropped)
	if !strings.Contains(out, "2 unchanged, 0 deleted") || !strings.Contains(a.snapshot(), "default/launch") {
		t.Fatalf("without --prune:\n%s", out)
	}
	out = a.applyOK(a.writer, dropped, "--prune", "--dry-run")
	if !strings.Contains(out, "delete") || !strings.Contains(out, "launch") || !strings.Contains(a.snapshot(), "default/launch") {
		t.Fatalf("--prune --dry-run:\n%s", out)
	}
	var res struct {
		Tenant  string
		DryRun  bool `json:"dry_run"`
		Results []applyResult
	}
	if err := json.Unmarshal([]byte(a.applyOK(a.writer, dropped, "--prune", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Tenant != "default" || res.DryRun || len(res.Results) != 3 || res.Results[2].Name != "launch" || res.Results[2].Action != "delete" {
		t.Fatalf("--prune --json: %+v", res)
	}
	if strings.Contains(a.snapshot(), "launch") {
		t.Fatal("--prune left launch")
	}
	// And once more: converged.
	if out := a.applyOK(a.writer, dropped, "--prune"); !strings.Contains(out, "0 created, 0 updated, 2 unchanged, 0 deleted") {
		t.Fatalf("after prune:\n%s", out)
	}
}

func diffLines(a, b string) string {
	old := map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		old[l] = true
	}
	var out strings.Builder
	for _, l := range strings.Split(b, "\n") {
		if !old[l] {
			out.WriteString(l + "\n")
		}
	}
	return out.String()
}

// A file with anything wrong applies nothing, and says everything that
// is wrong, by entry and field — its own problems and the server's.
func TestCronApplyBadInputAppliesNothing(t *testing.T) {
	t.Parallel()
	a := newApplyEnv(t)
	a.applyOK(a.writer, schedulesFile)
	before := a.snapshot()
	cases := []struct {
		name, text string
		want       []string
	}{
		{"not YAML", "entries:\n  - name: x\n    schedule: @daily\n", []string{"line 3", "must be quoted"}},
		{"empty", "", []string{`must be a mapping with an "entries" list`}},
		{"no entries", "schedules: []\n", []string{`unknown top-level field "schedules"`, `no "entries" list`}},
		{"not a list", "entries: {a: 1}\n", []string{"entries: must be a list"}},
		{"duplicate names", schedulesFile + "  - name: hourly-sync\n    schedule: \"@daily\"\n    job: {kind: k}\n", []string{`entry "hourly-sync" (line 20): name: given twice (also at line 13)`}},
		{"unknown fields", strings.Replace(strings.Replace(schedulesFile, "    missed: once", "    shedule: x", 1), "kind: sync", "kind: sync, priorty: 3", 1),
			[]string{`entry "nightly-report" (line 11): shedule: unknown field`, `entry "hourly-sync" (line 15): job.priorty: unknown field`}},
		{"wrong types and missing fields", "entries:\n  - name: a\n    schedule: \"@daily\"\n    job: {kind: k, priority: high}\n    paused: maybe\n  - schedule: \"@daily\"\n  - name: c\n    job: {kind: k, args: {x: .inf}}\n",
			[]string{`entry "a" (line 4): job.priority: must be a whole number`, `entry "a" (line 5): paused: must be true or false`, `entry #2 (line 6): name: is required`,
				`entry #2 (line 6): job: is required`, `entry "c" (line 7): schedule: is required`, `job.args: line 8: ".inf" is not a number JSON can hold`}},
		{"refused by the server", strings.Replace(strings.Replace(schedulesFile, `"@at 2030-01-01T09:00"`, `"@at someday"`, 1), "timezone: America/New_York", "timezone: Mars/Olympus", 1),
			[]string{`entry "nightly-report" (line 3): timezone:`, `IANA`, `entry "launch" (line 16): schedule:`, `RFC 3339`}},
		{"in the past", strings.Replace(schedulesFile, `"@at 2030-01-01T09:00"`, `"@at 2020-01-01T09:00"`, 1), []string{`entry "launch"`, "not in the future"}},
	}
	for _, c := range cases {
		out, errOut, err := a.apply(a.writer, c.text, "--prune")
		if err == nil || !strings.Contains(err.Error(), "nothing was applied") {
			t.Errorf("%s: err %v, want a refusal\nstdout %s", c.name, err, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, errOut)
			}
		}
		if a.snapshot() != before {
			t.Fatalf("%s: entries changed:\n%s", c.name, diffLines(before, a.snapshot()))
		}
	}
}

// Per tenant: a spanning token names the tenant; a tenant token acts for
// its own and is refused another's, and --prune never reaches another
// tenant's entries.
func TestCronApplyPerTenant(t *testing.T) {
	t.Parallel()
	a := newApplyEnv(t)
	a.applyOK(a.writer, schedulesFile)
	out := a.applyOK(a.admin, schedulesFile, "--tenant", "acme")
	if !strings.Contains(out, "tenant acme: 3 created") || !strings.Contains(a.snapshot(), "acme/launch") {
		t.Fatalf("admin --tenant acme:\n%s", out)
	}
	before := a.snapshot()
	if _, _, err := a.apply(a.acme, schedulesFile, "--tenant", "default", "--prune"); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("acme's token applying to default: %v", err)
	}
	// An empty file with --prune deletes the tenant's own entries only.
	if _, _, err := a.apply(a.acme, "entries: []\n", "--tenant", "default", "--prune"); err == nil {
		t.Fatalf("acme's token pruning default: allowed")
	}
	if a.snapshot() != before {
		t.Fatalf("refused applies changed entries:\n%s", diffLines(before, a.snapshot()))
	}
	out = a.applyOK(a.acme, "entries: []\n", "--prune")
	if !strings.Contains(out, "tenant acme: 0 created, 0 updated, 0 unchanged, 3 deleted") || strings.Contains(a.snapshot(), "acme/") || !strings.Contains(a.snapshot(), "default/launch") {
		t.Fatalf("acme prunes its own:\n%s\n%s", out, a.snapshot())
	}
}
