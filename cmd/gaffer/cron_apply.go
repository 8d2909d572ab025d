package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// maxSchedulesFile bounds what cron apply reads.
const maxSchedulesFile = 8 << 20

// applyResult is what apply did, or would do, to one entry.
type applyResult struct {
	Name    string   `json:"name"`
	Action  string   `json:"action"` // create, update, unchanged, delete
	Changes []string `json:"changes,omitempty"`
}

type putResponse struct {
	Entry struct {
		Tenant string `json:"tenant"`
	} `json:"entry"`
	Created bool     `json:"created"`
	Changed bool     `json:"changed"`
	Changes []string `json:"changes"`
}

// cronApply makes a tenant's cron entries what a schedules file says.
//
// It checks the whole file before it writes anything: the file itself
// (YAML, fields, types, names), then every entry against the server (a
// dry-run PUT each), and lists every problem by entry and field. Only a
// file with none is applied, entry by entry with PUT (idempotent: an
// entry already as written is left alone) and, with --prune, DELETE for
// the tenant's entries the file does not name. If a write fails midway
// (the network, a concurrent delete), what was applied stays; running
// apply again finishes the job.
func (m *Main) cronApply(ctx context.Context, args []string) error {
	fs := m.newFlagSet("cron apply", "cron apply -f FILE [--dry-run] [--prune] [--tenant T]: make the tenant's entries what FILE (YAML or JSON, - for stdin) says")
	cf := addClientFlags(fs)
	file := fs.String("f", "-", "", "the schedules file (YAML or JSON; - reads stdin)")
	dry := fs.Bool("dry-run", "-", false, "check the file and print what would change; change nothing")
	prune := fs.Bool("prune", "-", false, "also delete the tenant's entries the file does not name")
	tenant := fs.String("tenant", "-", "", "the tenant to apply to (tokens spanning tenants only; default \"default\")")
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	if *file == "" {
		return usageError("-f FILE is required (- for stdin)")
	}
	src, err := m.readSchedules(*file)
	if err != nil {
		return err
	}
	entries, problems := parseSchedules(src)
	if len(problems) > 0 {
		return m.refuse(*file, problems)
	}
	target := *tenant
	if target == "" {
		target = "default" // what a spanning token's PUT means; a tenant token's own tenant wins anyway
	}
	q := url.Values{"tenant": {target}}

	// Check every entry with the server, writing nothing.
	var results []applyResult
	named := map[string]bool{}
	actual := ""
	for _, e := range entries {
		named[e.Name] = true
		var res putResponse
		err := c.withRetry(ctx, func() error {
			return c.do(ctx, "PUT", "/v1/cron/"+url.PathEscape(e.Name)+"?dry_run=true&"+q.Encode(), e.Body, &res)
		})
		var pe *problemError
		if errors.As(err, &pe) && pe.Status < 500 && pe.Status != http.StatusUnauthorized && pe.Status != http.StatusForbidden {
			problems = append(problems, fileProblem{Entry: fmt.Sprintf("%q", e.Name), Line: e.Line, Field: pe.Field, Msg: strings.TrimPrefix(pe.Detail, pe.Field+": ")})
			continue
		}
		if err != nil {
			return fmt.Errorf("check entry %q: %w; nothing was applied", e.Name, err)
		}
		actual = res.Entry.Tenant
		results = append(results, planned(e.Name, res))
	}
	if len(problems) > 0 {
		return m.refuse(*file, problems)
	}
	if *prune {
		existing, err := c.cronNames(ctx, q)
		if err != nil {
			return fmt.Errorf("list the tenant's entries: %w; nothing was applied", err)
		}
		for _, x := range existing {
			// The server confines a tenant token's listing to its own
			// tenant whatever --tenant says: never prune another's.
			if (*tenant != "" && x.Tenant != *tenant) || (actual != "" && x.Tenant != actual) {
				return usageError(fmt.Sprintf("this token lists tenant %q's entries, not %q's; nothing was applied", x.Tenant, target))
			}
			if actual == "" {
				actual = x.Tenant
			}
			if !named[x.Name] {
				results = append(results, applyResult{Name: x.Name, Action: "delete"})
			}
		}
	}
	if actual == "" {
		actual = target
	}
	if *dry {
		return m.printApply(cf, actual, true, results)
	}

	// Apply. Unchanged entries need no write.
	done := make([]applyResult, 0, len(results))
	for _, r := range results {
		var err error
		switch r.Action {
		case "create", "update":
			var res putResponse
			body := entries[indexOf(entries, r.Name)].Body
			err = c.withRetry(ctx, func() error {
				return c.do(ctx, "PUT", "/v1/cron/"+url.PathEscape(r.Name)+"?"+q.Encode(), body, &res)
			})
			if err == nil {
				r = planned(r.Name, res) // what happened, which a concurrent change may have made differ
			}
		case "delete":
			err = c.withRetry(ctx, func() error {
				return c.do(ctx, "DELETE", "/v1/cron/"+url.PathEscape(r.Name)+"?"+q.Encode(), nil, nil)
			})
			var pe *problemError
			if errors.As(err, &pe) && pe.Status == http.StatusNotFound {
				err = nil // gone already
			}
		}
		if err != nil {
			m.printApply(cf, actual, false, done)
			return fmt.Errorf("%s %s: %w; the entries above were applied, the rest not: run apply again to finish (it changes only what differs)", r.Action, r.Name, err)
		}
		done = append(done, r)
	}
	return m.printApply(cf, actual, false, done)
}

func planned(name string, res putResponse) applyResult {
	switch {
	case res.Created:
		return applyResult{Name: name, Action: "create"}
	case res.Changed:
		return applyResult{Name: name, Action: "update", Changes: res.Changes}
	}
	return applyResult{Name: name, Action: "unchanged"}
}

func indexOf(entries []fileEntry, name string) int {
	for i, e := range entries {
		if e.Name == name {
			return i
		}
	}
	return -1
}

func (m *Main) readSchedules(path string) ([]byte, error) {
	var r io.Reader = m.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, usageError(fmt.Sprintf("-f: %v", err))
		}
		defer f.Close()
		r = f
	}
	src, err := io.ReadAll(io.LimitReader(r, maxSchedulesFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(src) > maxSchedulesFile {
		return nil, usageError(fmt.Sprintf("%s is larger than %d bytes", path, maxSchedulesFile))
	}
	return src, nil
}

// refuse reports every problem found and applies nothing.
func (m *Main) refuse(file string, problems []fileProblem) error {
	for _, p := range problems {
		fmt.Fprintf(m.Stderr, "%s: %s\n", file, p)
	}
	noun := "problem"
	if len(problems) > 1 {
		noun = "problems"
	}
	return fmt.Errorf("%s: %d %s; nothing was applied", file, len(problems), noun)
}

func (m *Main) printApply(cf *clientFlags, tenant string, dry bool, results []applyResult) error {
	raw, _ := json.Marshal(struct {
		Tenant  string        `json:"tenant"`
		DryRun  bool          `json:"dry_run"`
		Results []applyResult `json:"results"`
	}{tenant, dry, results})
	return m.output(*cf.json, raw, func(tw *tabwriter.Writer) {
		counts := map[string]int{}
		for _, r := range results {
			counts[r.Action]++
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Action, r.Name, strings.Join(r.Changes, ", "))
		}
		summary := fmt.Sprintf("tenant %s: %d created, %d updated, %d unchanged, %d deleted", tenant,
			counts["create"], counts["update"], counts["unchanged"], counts["delete"])
		if dry {
			summary = fmt.Sprintf("tenant %s, dry run (nothing changed): would create %d, update %d, delete %d; %d unchanged", tenant,
				counts["create"], counts["update"], counts["delete"], counts["unchanged"])
		}
		fmt.Fprintln(tw, summary)
	})
}

type cronName struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
}

// cronNames lists every entry the listing q shows, page by page.
func (c *apiClient) cronNames(ctx context.Context, q url.Values) ([]cronName, error) {
	var out []cronName
	cursor := ""
	for {
		pq := url.Values{"limit": {"1000"}}
		for k, v := range q {
			pq[k] = v
		}
		if cursor != "" {
			pq.Set("cursor", cursor)
		}
		var page struct {
			Data       []cronName `json:"data"`
			NextCursor string     `json:"next_cursor"`
		}
		if err := c.withRetry(ctx, func() error { return c.do(ctx, "GET", "/v1/cron?"+pq.Encode(), nil, &page) }); err != nil {
			return nil, err
		}
		out = append(out, page.Data...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// withRetry runs call, waiting out the API's rate limit (429) a few
// times: a large file makes two requests an entry.
func (c *apiClient) withRetry(ctx context.Context, call func() error) error {
	for attempt := 0; ; attempt++ {
		err := call()
		var pe *problemError
		if attempt == 10 || !errors.As(err, &pe) || pe.Status != http.StatusTooManyRequests {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
