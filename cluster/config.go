package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Worker is what the cluster needs of the node's job worker.
type Worker interface {
	// SetClaiming turns claiming on or off; running jobs go on.
	SetClaiming(on bool)
	// InFlight counts the attempts running on this node.
	InFlight() int
	// ReleaseRunning cancels the running handlers and gives their leases
	// back, so that other nodes run those jobs at once.
	ReleaseRunning() error
}

// Service is a leader-only loop: started when this node wins the
// election, stopped when it loses it.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// NodeInfo describes this node to the cluster.
type NodeInfo struct {
	ID       string         `json:"id"`
	Hostname string         `json:"hostname"`
	Version  string         `json:"version"`
	Queues   map[string]int `json:"queues"`
	// Kinds are the job kinds the node handles (see Cluster.SetKinds).
	Kinds []string `json:"kinds,omitempty"`
}

// Config configures a Cluster. Zero values take the defaults shown.
type Config struct {
	// Endpoints of the etcd cluster. Required.
	Endpoints []string
	// TLS, when set, secures the connections to https:// endpoints:
	// RootCAs verifies etcd, Certificates is the client certificate.
	// Default: plain connections (the system's roots for https://).
	TLS *tls.Config
	// Username and Password authenticate to an etcd with auth enabled.
	// With them the client authenticates as it connects, so refused
	// credentials show as the session failing to start (see Status).
	Username string
	Password string
	// Prefix under which the cluster keeps its keys. Default "/gaffer".
	Prefix string
	// SessionTTL is the etcd lease behind this node's membership and
	// leadership: a node that stops renewing it is gone after this long.
	// Default 10s; at least 2s.
	SessionTTL time.Duration
	// DialTimeout bounds connecting to etcd. Default 5s.
	DialTimeout time.Duration
	// ReportInterval is how often the node reports to the nodes table and
	// reads its drain order there (drain orders also arrive at once by
	// NOTIFY). Default 2s.
	ReportInterval time.Duration

	Pool   *pgxpool.Pool // required
	Node   NodeInfo      // required: at least ID
	Worker Worker        // required
	// RescueNode ends the running attempts of a node that left without
	// draining; it runs under the leader fence it is given. Required.
	RescueNode func(ctx context.Context, fence Fence, node string) (int, error)
	// OnLeave is called, once, when a drain has finished and the node has
	// left the cluster: the node should stop.
	OnLeave func()

	Logger     hclog.Logger
	Registerer prometheus.Registerer
}

// Fence is the leader-only write guard the cluster hands to services: see
// job.Fence, which it satisfies.
type Fence interface {
	Do(ctx context.Context, fn func(q pgx.Tx) error) error
}

func (c *Config) setDefaults() error {
	switch {
	case len(c.Endpoints) == 0:
		return errors.New("cluster: Config.Endpoints is required")
	case c.Pool == nil:
		return errors.New("cluster: Config.Pool is required")
	case c.Node.ID == "":
		return errors.New("cluster: Config.Node.ID is required")
	case (c.Username == "") != (c.Password == ""):
		return errors.New("cluster: Config.Username and Password go together")
	case c.Worker == nil:
		return errors.New("cluster: Config.Worker is required")
	case c.RescueNode == nil:
		return errors.New("cluster: Config.RescueNode is required")
	case c.SessionTTL != 0 && c.SessionTTL < 2*time.Second:
		return fmt.Errorf("cluster: Config.SessionTTL must be at least 2s, got %s", c.SessionTTL)
	case c.SessionTTL%time.Second != 0:
		return fmt.Errorf("cluster: Config.SessionTTL must be whole seconds (an etcd lease), got %s", c.SessionTTL)
	case c.DialTimeout < 0 || c.ReportInterval < 0:
		return errors.New("cluster: Config.DialTimeout and ReportInterval must not be negative")
	}
	if c.Prefix == "" {
		c.Prefix = "/gaffer"
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = 10 * time.Second
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.OnLeave == nil {
		c.OnLeave = func() {}
	}
	return nil
}

// trustMargin is how much of the session TTL the leader does not trust:
// it acts only while its last keepalive answer is younger than TTL minus
// this, so that it stops before etcd could have let the lease expire.
func (c *Config) trustMargin() time.Duration {
	return max(c.SessionTTL/5, time.Second)
}
