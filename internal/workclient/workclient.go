// Package workclient is a small Go client of Gaffer's remote worker
// protocol (/v1/workers and /v1/work, docs/workers.md), for the tests and
// `gaffer bench remote`. It speaks only HTTP and JSON, as a client in any
// other language would; it imports nothing of Gaffer's.
package workclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client calls one Gaffer node's API with one token.
type Client struct {
	URL   string // e.g. http://127.0.0.1:8080
	Token string
	HTTP  *http.Client // default http.DefaultClient
}

// Problem is an API error (application/problem+json).
type Problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail) }

// IsLeaseLost reports whether err is a 409 lease_lost.
func IsLeaseLost(err error) bool {
	p, ok := err.(*Problem)
	return ok && p.Code == "lease_lost"
}

// Do sends a JSON request and decodes a 2xx answer into out (when not
// nil); any other answer is a *Problem.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		p := &Problem{Status: resp.StatusCode}
		if json.Unmarshal(b, p) != nil || p.Code == "" {
			p.Detail = string(b)
		}
		return p
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Registration is a worker to register.
type Registration struct {
	Name    string   `json:"name,omitempty"`
	Version string   `json:"version,omitempty"`
	Tenant  string   `json:"tenant,omitempty"`
	Queues  []string `json:"queues"`
	Kinds   []string `json:"kinds,omitempty"`
}

// Worker is a registered worker.
type Worker struct {
	ID               string   `json:"id"`
	Tenant           string   `json:"tenant"`
	Queues           []string `json:"queues"`
	Kinds            []string `json:"kinds"`
	LeaseTTLSeconds  float64  `json:"lease_ttl_seconds"`
	HeartbeatSeconds float64  `json:"heartbeat_interval_seconds"`
	MaxWaitSeconds   float64  `json:"max_wait_seconds"`
}

// HeartbeatInterval is how often the worker must heartbeat.
func (w Worker) HeartbeatInterval() time.Duration {
	return time.Duration(w.HeartbeatSeconds * float64(time.Second))
}

// Register registers a worker.
func (c *Client) Register(ctx context.Context, r Registration) (Worker, error) {
	var w Worker
	err := c.Do(ctx, "POST", "/v1/workers", r, &w)
	return w, err
}

// Leave stops the worker: its running jobs are released.
func (c *Client) Leave(ctx context.Context, worker string) (released int, err error) {
	var out struct {
		Released int `json:"released"`
	}
	err = c.Do(ctx, "DELETE", "/v1/workers/"+worker, nil, &out)
	return out.Released, err
}

// Lease names an attempt.
type Lease struct {
	ID         int64  `json:"id"`
	Attempt    int    `json:"attempt"`
	LeaseToken string `json:"lease_token"`
}

// Job is a claimed job.
type Job struct {
	Lease
	Tenant         string          `json:"tenant"`
	Kind           string          `json:"kind"`
	Queue          string          `json:"queue"`
	Args           json.RawMessage `json:"args"`
	Inputs         json.RawMessage `json:"inputs"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	Timeout        string          `json:"timeout"`
	CreatedAt      time.Time       `json:"created_at"`
	RunAt          time.Time       `json:"run_at"`
	// TraceParent is the W3C trace context the job was enqueued in ("":
	// none).
	TraceParent string `json:"traceparent"`
	TraceState  string `json:"tracestate"`
}

// Claimed is a claim's answer.
type Claimed struct {
	Jobs     []Job `json:"jobs"`
	Draining bool  `json:"draining"`
	// Replaced: a later claim of the same worker came to wait, and this
	// one answered, empty.
	Replaced bool `json:"replaced"`
}

// Claim takes up to max jobs, waiting up to wait for one.
func (c *Client) Claim(ctx context.Context, worker string, max int, wait time.Duration) (Claimed, error) {
	var out Claimed
	err := c.Do(ctx, "POST", "/v1/work/claim", map[string]any{"worker": worker, "max": max, "wait": wait.String()}, &out)
	return out, err
}

// Outcome is one job's part of a batch.
type Outcome struct {
	ID              int64  `json:"id"`
	Status          string `json:"status"`
	CancelRequested bool   `json:"cancel_requested"`
}

// Heartbeat extends leases.
func (c *Client) Heartbeat(ctx context.Context, worker string, leases []Lease) ([]Outcome, error) {
	var out struct {
		Jobs []Outcome `json:"jobs"`
	}
	err := c.Do(ctx, "POST", "/v1/work/heartbeat", map[string]any{"worker": worker, "jobs": leases}, &out)
	return out.Jobs, err
}

// Completion is an attempt that succeeded.
type Completion struct {
	Lease
	Result json.RawMessage `json:"result,omitempty"`
}

// Complete completes attempts in one call.
func (c *Client) Complete(ctx context.Context, cs []Completion) ([]Outcome, error) {
	var out struct {
		Jobs []Outcome `json:"jobs"`
	}
	err := c.Do(ctx, "POST", "/v1/work/complete", map[string]any{"jobs": cs}, &out)
	return out.Jobs, err
}

func leaseBody(l Lease, more map[string]any) map[string]any {
	body := map[string]any{"attempt": l.Attempt, "lease_token": l.LeaseToken}
	for k, v := range more {
		body[k] = v
	}
	return body
}

// CompleteOne completes one attempt: a *Problem with code lease_lost once
// it is no longer current.
func (c *Client) CompleteOne(ctx context.Context, l Lease, result json.RawMessage) error {
	more := map[string]any{}
	if result != nil {
		more["result"] = result
	}
	return c.Do(ctx, "POST", fmt.Sprintf("/v1/work/jobs/%d/complete", l.ID), leaseBody(l, more), nil)
}

// HeartbeatOne extends one lease.
func (c *Client) HeartbeatOne(ctx context.Context, worker string, l Lease) error {
	return c.Do(ctx, "POST", fmt.Sprintf("/v1/work/jobs/%d/heartbeat", l.ID), leaseBody(l, map[string]any{"worker": worker}), nil)
}

// Fail fails one attempt and returns the job's state.
func (c *Client) Fail(ctx context.Context, l Lease, message string, permanent bool) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	err := c.Do(ctx, "POST", fmt.Sprintf("/v1/work/jobs/%d/fail", l.ID), leaseBody(l, map[string]any{"error": message, "permanent": permanent}), &out)
	return out.State, err
}

// Snooze puts the job back for delay.
func (c *Client) Snooze(ctx context.Context, l Lease, delay time.Duration) (string, error) {
	var out struct {
		State string `json:"state"`
	}
	err := c.Do(ctx, "POST", fmt.Sprintf("/v1/work/jobs/%d/snooze", l.ID), leaseBody(l, map[string]any{"delay": delay.String()}), &out)
	return out.State, err
}

// Progress reports how far the attempt got.
func (c *Client) Progress(ctx context.Context, l Lease, percent float64, message string) error {
	return c.Do(ctx, "POST", fmt.Sprintf("/v1/work/jobs/%d/progress", l.ID), leaseBody(l, map[string]any{"percent": percent, "message": message}), nil)
}
