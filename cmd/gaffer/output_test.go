package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/internal/tzdata"
)

// fakeAPI answers every request with status 200 and the body answer
// gives for its path.
func fakeAPI(t *testing.T, answer func(r *http.Request) string) map[string]string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(answer(r)))
	}))
	t.Cleanup(srv.Close)
	return map[string]string{"GAFFER_URL": srv.URL, "GAFFER_TOKEN": "a-token-for-the-fake-api"}
}

// An answer the CLI cannot read is an error, never an empty table: every
// command that decodes an answer says so and exits non-zero.
func TestUnreadableAnswersAreErrors(t *testing.T) {
	t.Parallel()
	// Valid JSON, every field the CLI reads of the wrong type.
	env := fakeAPI(t, func(*http.Request) string {
		return `{"data":"x","id":"x","job":"x","times":"x","replayed":"x","deleted":"x","job_id":"x","entry_id":"x","nodes":"x",
			"degraded":"x","queues":"x","secret":5,"concurrency":"x","steps":"x","existing":"x"}`
	})
	def := filepath.Join(t.TempDir(), "wf.json")
	if err := os.WriteFile(def, []byte(`{"name":"w","steps":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"jobs", "enqueue", "--kind", "k"}, {"jobs", "get", "1"}, {"jobs", "list"}, {"jobs", "cancel", "1"}, {"jobs", "retry", "1"},
		{"dlq", "list"}, {"dlq", "get", "1"}, {"dlq", "replay", "1"}, {"dlq", "replay", "--all", "--kind", "k"}, {"dlq", "purge", "--yes"},
		{"cron", "add", "c", "--schedule", "@daily", "--kind", "k"}, {"cron", "update", "c", "--schedule", "@hourly"}, {"cron", "list"},
		{"cron", "get", "c"}, {"cron", "next", "c"}, {"cron", "pause", "c"}, {"cron", "resume", "c"}, {"cron", "trigger", "c"}, {"cron", "history", "c"},
		{"workflows", "submit", "--file", def}, {"workflows", "list"}, {"workflows", "get", "1"}, {"workflows", "cancel", "1"}, {"workflows", "signal", "1", "s"},
		{"queues", "list"}, {"nodes", "list"}, {"nodes", "drain", "n"}, {"cluster"},
		{"limits", "list"}, {"limits", "get", "l"}, {"limits", "set", "l", "--concurrency", "1"}, {"tenants", "list"},
		{"webhook-secrets", "rotate"}, {"webhook-secrets", "list"},
	} {
		out, _, err := run(t, env, args...)
		if err == nil || !strings.Contains(err.Error(), "cannot read the answer") {
			t.Errorf("gaffer %s on an unreadable answer: %v (printed %q), want an error", strings.Join(args, " "), err, out)
		}
	}
}

// Lists print through one helper: a header, a row each, a footer where
// the command has one, and the cursor of the next page; --json prints
// the API's answer.
func TestListOutput(t *testing.T) {
	t.Parallel()
	env := fakeAPI(t, func(r *http.Request) string {
		switch r.URL.Path {
		case "/v1/jobs":
			return `{"data":[{"id":7,"kind":"mail","queue":"default","state":"pending","attempt":0,"max_attempts":25}],"next_cursor":"abc"}`
		case "/v1/nodes":
			return `{"data":[{"id":"n1","state":"active","tzdata":"` + tzdata.Version + `","queues":{"default":1}},
				{"id":"n2","state":"active","tzdata":"2024a","queues":{}},{"id":"n3","state":"dead","tzdata":"2023c","queues":{}}]}`
		case "/v1/queues":
			return `{"data":[{"name":"mail","pending":3,"workers":0,"warning":"no live node or remote worker works this queue: its jobs wait until one does"},
				{"name":"default","pending":1,"workers":2}]}`
		case "/v1/cron/nightly":
			return `{"name":"nightly","schedule":"@daily","timezone":"UTC","paused":true,"next_run_at":null,"job":{"kind":"report","queue":"default"},
				"last_failed_job_id":42,"last_failed_error":"smtp: 550 mailbox unavailable","last_failed_at":"2026-11-27T03:00:00Z"}`
		}
		return `{}`
	})
	// An entry's last failed job and why; a paused entry has no next run.
	if out, _, err := run(t, env, "cron", "get", "nightly", "--utc"); err != nil || !regexp.MustCompile(`last failed job +42 at 2026-11-27 03:00:00 UTC: smtp: 550 mailbox unavailable`).MatchString(out) ||
		!regexp.MustCompile(`next run +- \(paused\)`).MatchString(out) {
		t.Fatalf("cron get: %v\n%s", err, out)
	}
	out, _, err := run(t, env, "queues", "list")
	if err != nil || !strings.Contains(out, "WORKERS") || !strings.HasSuffix(out, "warning: queue mail: no live node or remote worker works this queue: its jobs wait until one does\n") ||
		strings.Contains(out, "queue default:") {
		t.Fatalf("queues list: %v\n%s", err, out)
	}
	out, _, err = run(t, env, "jobs", "list")
	if err != nil || !strings.Contains(out, "ID ") || !strings.Contains(out, "7   mail") || !strings.HasSuffix(out, "(more: --cursor abc)\n") {
		t.Fatalf("jobs list: %v\n%s", err, out)
	}
	out, _, err = run(t, env, "nodes", "list")
	if err != nil || !strings.Contains(out, "TZDATA") || !strings.Contains(out, tzdata.Version) ||
		!strings.Contains(out, "warning: live nodes use different time zone rules (tzdata 2024a on n2; tzdata "+tzdata.Version+" on n1)") {
		t.Fatalf("nodes list: %v\n%s", err, out)
	}
	out, _, err = run(t, env, "nodes", "list", "--json")
	var page struct{ Data []struct{ TZData string } }
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Data) != 3 || page.Data[1].TZData != "2024a" || strings.Contains(out, "warning") {
		t.Fatalf("nodes list --json: %v\n%s", err, out)
	}
}

// tokens list and migrate status, which read the database, print JSON
// too, in the shape of the API's lists; a token's hash never shows.
func TestDatabaseListsPrintJSON(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)}
	if _, _, err := run(t, env, "tokens", "create", "--name", "ops <&>", "--scopes", "jobs:read"); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, env, "tokens", "list", "--json")
	var toks struct {
		Data []map[string]any `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(out), &toks) != nil || len(toks.Data) != 1 || toks.Data[0]["name"] != "ops <&>" || toks.Data[0]["scopes"] == nil {
		t.Fatalf("tokens list --json: %v\n%s", err, out)
	}
	if strings.Contains(strings.ToLower(out), "hash") || !strings.Contains(out, `"ops <&>"`) {
		t.Fatalf("tokens list --json shows a hash or escapes the name:\n%s", out)
	}
	out, _, err = run(t, env, "migrate", "status", "--json")
	var migs struct {
		Data []struct {
			Version int    `json:"version"`
			Name    string `json:"name"`
			Applied bool   `json:"applied"`
			Compat  int    `json:"compatible_from"`
		} `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(out), &migs) != nil || len(migs.Data) < 17 || migs.Data[0].Name != "jobs" || !migs.Data[0].Applied {
		t.Fatalf("migrate status --json: %v\n%s", err, out)
	}
	// 0019_retention and 0018_node_tzdata are expands: nodes of schema
	// 17 work on the schema they leave.
	if r := migs.Data[18]; r.Name != "retention" || r.Compat != 17 {
		t.Fatalf("migrate status --json: %v\n%s", err, out)
	}
}
