package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// apiClient talks to a Gaffer node's HTTP API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// problemError is an API error as the CLI reports it.
type problemError struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

func (e *problemError) Error() string {
	if e.Field != "" && !strings.Contains(e.Detail, e.Field) {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Field, e.Detail)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

// do sends a request; a 2xx answer's JSON goes into out (when not nil),
// anything else becomes an error carrying the problem's code and detail.
func (c *apiClient) do(ctx context.Context, method, path string, body any, out any, headers ...string) error {
	var rd io.Reader
	if body != nil {
		b, err := job.EncodeJSON(body) // args as typed, < > & included
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the Gaffer API at %s (set --url or $GAFFER_URL): %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var p problemError
		if json.Unmarshal(raw, &p) != nil || p.Code == "" {
			return fmt.Errorf("HTTP %d from %s: %s", resp.StatusCode, c.base, strings.TrimSpace(string(raw)))
		}
		return &p
	}
	if out != nil && len(raw) > 0 {
		if r, ok := out.(*json.RawMessage); ok {
			*r = raw
			return nil
		}
		return json.Unmarshal(raw, out)
	}
	return nil
}

// clientFlags are the flags every API command takes.
type clientFlags struct {
	url   *string
	token *string
	json  *bool
}

func addClientFlags(fs *flagSet) *clientFlags {
	return &clientFlags{
		url:   fs.String("url", "GAFFER_URL", "http://127.0.0.1:8080", "the Gaffer API"),
		token: fs.String("token", "GAFFER_TOKEN", "", "API token"),
		json:  fs.Bool("json", "", false, "print JSON instead of a table"),
	}
}

// start parses the command's flags, checks it got n positional arguments
// (what names them for the usage error), and returns the API client.
func (f *clientFlags) start(fs *flagSet, args []string, n int, what string) (*apiClient, error) {
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	if err := needArgs(fs, n, what); err != nil {
		return nil, err
	}
	return f.client()
}

func (f *clientFlags) client() (*apiClient, error) {
	if *f.token == "" {
		return nil, usageError("an API token is required: --token or $GAFFER_TOKEN (gaffer dev prints one; gaffer tokens create makes one)")
	}
	u, err := url.Parse(*f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError(fmt.Sprintf("--url must be an http(s) URL, got %q", *f.url))
	}
	return &apiClient{base: strings.TrimRight(*f.url, "/"), token: *f.token, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// action is one subcommand of a resource group.
type action struct {
	name    string
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

// runGroup describes a group's actions (see commandTree): cobra runs
// each action itself.
func (m *Main) runGroup(ctx context.Context, group string, actions []action, _ []string) error {
	if m.collect == nil {
		return fmt.Errorf("gaffer %s is run through its actions", group)
	}
	return m.collectActions(ctx, group, actions)
}

// fmtTime prints t in m's zone (the local one; UTC with --utc), named.
func (m *Main) fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	loc := m.Location
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).Format("2006-01-02 15:04:05 MST")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func queueList(q map[string]int) string {
	var parts []string
	for name, n := range q {
		parts = append(parts, fmt.Sprintf("%s=%d", name, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// queueNames lists a remote worker's queues.
func queueNames(q map[string]int) string {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// needArgs checks the count of positional arguments.
func needArgs(fs *flagSet, n int, what string) error {
	if fs.NArg() != n {
		fs.Usage()
		return usageError(fmt.Sprintf("expected %s", what))
	}
	return nil
}
