package patroni

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// What Patroni says of its members, and waiting for a primary and replicas.

// memberStatus is one member in Patroni's GET /cluster.
type memberStatus struct {
	Name  string `json:"name"`
	Role  string `json:"role"`  // leader, sync_standby, replica
	State string `json:"state"` // running, streaming, …
	Lag   any    `json:"lag"`
}

// Status asks any member's REST API for the cluster's members.
func (c *Cluster) status(ctx context.Context) ([]memberStatus, error) {
	var lastErr error
	for _, m := range c.Members {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://127.0.0.1:%d/cluster", m.RestPort), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			lastErr = err
			continue
		}
		var body struct {
			Members []memberStatus `json:"members"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		return body.Members, nil
	}
	return nil, lastErr
}

// Describe is the cluster as Patroni sees it, one member a line.
func (c *Cluster) Describe(ctx context.Context) string {
	ms, err := c.status(ctx)
	if err != nil {
		return "no member answers: " + err.Error()
	}
	var b bytes.Buffer
	for _, m := range ms {
		fmt.Fprintf(&b, "%s %s %s lag=%v; ", m.Name, m.Role, m.State, m.Lag)
	}
	return b.String()
}

// WaitPrimary waits until a member other than except is the running
// leader and accepts writes, and returns it.
func (c *Cluster) WaitPrimary(ctx context.Context, except *Member) (*Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		ms, _ := c.status(ctx)
		for _, s := range ms {
			if s.Role != "leader" || s.State != "running" {
				continue
			}
			for _, m := range c.Members {
				if m.Name == s.Name && m != except && m.writable(ctx) {
					return m, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no primary within 2 minutes: %s", c.Describe(context.Background()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writable reports whether m's PostgreSQL takes writes. (Patroni's
// REST API calls a member primary as soon as it has asked for the
// promotion, a moment before PostgreSQL leaves recovery.)
func (m *Member) writable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, m.URL("postgres")+"&target_session_attrs=read-write")
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

// WaitReplicas waits until every member but the primary streams from it
// and, unless Asynchronous, one of them is the synchronous standby.
func (c *Cluster) WaitReplicas(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		ms, _ := c.status(ctx)
		streaming, sync := 0, 0
		for _, s := range ms {
			if s.Role != "leader" && (s.State == "streaming" || s.State == "running") {
				streaming++
			}
			if s.Role == "sync_standby" && (s.State == "streaming" || s.State == "running") {
				sync++
			}
		}
		if len(ms) == len(c.Members) && streaming == len(c.Members)-1 && (c.cfg.Asynchronous || sync > 0) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standbys not streaming (synchronous: %v) within 3 minutes: %s", !c.cfg.Asynchronous, c.Describe(context.Background()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
