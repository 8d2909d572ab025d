package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/internal/tzdata"
)

func (m *Main) runQueues(ctx context.Context, args []string) error {
	simple := func(action, method string) func(m *Main, ctx context.Context, args []string) error {
		return func(m *Main, ctx context.Context, args []string) error {
			fs := m.newFlagSet("queues "+action, "queues "+action+" QUEUE [flags]")
			cf := addClientFlags(fs)
			c, err := cf.start(fs, args, 1, "a queue name")
			if err != nil {
				return err
			}
			return show(m, ctx, cf, c, method, "/v1/queues/"+url.PathEscape(fs.Arg(0))+"/"+action, nil, func(tw *tabwriter.Writer, _ json.RawMessage) {
				fmt.Fprintf(tw, "queue %s: %sd\n", fs.Arg(0), action)
			})
		}
	}
	return m.runGroup(ctx, "queues", []action{
		{"list", "list queues with their counts", (*Main).queuesList},
		{"pause", "stop every node claiming from a queue", simple("pause", "POST")},
		{"resume", "let nodes claim from a queue again", simple("resume", "POST")},
	}, args)
}

func (m *Main) queuesList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("queues list", "queues list [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	type queueRow struct {
		Name     string  `json:"name"`
		Paused   bool    `json:"paused"`
		Pending  int64   `json:"pending"`
		Retrying int64   `json:"retrying"`
		Running  int64   `json:"running"`
		Oldest   float64 `json:"oldest_due_age_seconds"`
		Workers  int64   `json:"workers"`
		Warning  string  `json:"warning"`
	}
	return list(m, ctx, cf, c, "/v1/queues", table[queueRow]{
		header: "QUEUE\tPAUSED\tPENDING\tRETRYING\tRUNNING\tOLDEST DUE\tWORKERS",
		row: func(q queueRow) []any {
			return []any{q.Name, q.Paused, q.Pending, q.Retrying, q.Running, time.Duration(q.Oldest * float64(time.Second)).Round(time.Millisecond), q.Workers}
		},
		footer: func(qs []queueRow) string {
			var b strings.Builder
			for _, q := range qs {
				if q.Warning != "" {
					fmt.Fprintf(&b, "warning: queue %s: %s\n", q.Name, q.Warning)
				}
			}
			return strings.TrimSuffix(b.String(), "\n")
		},
	})
}

type nodeRow struct {
	ID       string         `json:"id"`
	Hostname string         `json:"hostname"`
	Version  string         `json:"version"`
	TZData   string         `json:"tzdata"`
	Queues   map[string]int `json:"queues"`
	State    string         `json:"state"`
	InFlight int            `json:"in_flight"`
	Leader   bool           `json:"leader"`
	LastSeen *time.Time     `json:"last_seen"`
	Since    float64        `json:"seconds_since_seen"`
	Deadline *time.Time     `json:"drain_deadline"`
	Reason   string         `json:"left_reason"`
	Kind     string         `json:"kind"`
	Tenant   string         `json:"tenant"`
}

func (m *Main) runNodes(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "nodes", []action{
		{"list", "list every node the cluster has seen", (*Main).nodesList},
		{"drain", "drain a node: stop claiming, finish or release its jobs, leave", (*Main).nodesDrain},
		{"undrain", "put a draining node back to work", (*Main).nodesUndrain},
	}, args)
}

func (m *Main) nodesList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("nodes list", "nodes list [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	return list(m, ctx, cf, c, "/v1/nodes", table[nodeRow]{
		header: "NODE\tKIND\tSTATE\tLEADER\tIN FLIGHT\tQUEUES\tLAST SEEN\tHOST\tVERSION\tTZDATA",
		row: func(n nodeRow) []any {
			state := cluster.ShownState(n.State, n.Reason)
			if n.Reason != "" {
				state += " (" + n.Reason + ")"
			}
			leader := ""
			if n.Leader {
				leader = "*"
			}
			kind, queues := "node", queueList(n.Queues)
			if n.Kind == "remote" {
				// A remote worker has no slots: it asks for what it wants.
				kind, queues = "remote ("+n.Tenant+")", queueNames(n.Queues)
			}
			return []any{n.ID, kind, state, leader, n.InFlight, queues, fmt.Sprintf("%.0fs ago", n.Since), n.Hostname, n.Version, orDash(n.TZData)}
		},
		footer: func(nodes []nodeRow) string {
			if d := tzdata.Disagreement(nodes, func(n nodeRow) (string, string, bool) { return n.ID, n.TZData, n.State != "dead" && n.Kind != "remote" }); d != "" {
				return "warning: " + d
			}
			return ""
		},
	})
}

func (m *Main) nodesDrain(ctx context.Context, args []string) error {
	fs := m.newFlagSet("nodes drain", "nodes drain NODE [--deadline 30s] [--wait]")
	cf := addClientFlags(fs)
	deadline := fs.Duration("deadline", "-", 30*time.Second, "how long running jobs get before they are released")
	wait := fs.Bool("wait", "-", false, "wait until the node has left, showing its in-flight count")
	c, err := cf.start(fs, args, 1, "a node id")
	if err != nil {
		return err
	}
	path := "/v1/nodes/" + url.PathEscape(fs.Arg(0))
	n, raw, err := call[nodeRow](ctx, c, "POST", path+"/drain", map[string]string{"deadline": deadline.String()})
	if err != nil {
		return err
	}
	if !*wait {
		return m.output(*cf.json, raw, func(tw *tabwriter.Writer) {
			fmt.Fprintf(tw, "draining %s: deadline %s, %d jobs in flight\n", n.ID, m.fmtTime(n.Deadline), n.InFlight)
		})
	}
	for {
		nodes, _, err := call[listPage[nodeRow]](ctx, c, "GET", "/v1/nodes", nil)
		if err != nil {
			return err
		}
		for _, n := range nodes.Data {
			if n.ID != fs.Arg(0) {
				continue
			}
			if n.State == "dead" {
				fmt.Fprintf(m.Stdout, "%s left (%s)\n", n.ID, orDash(n.Reason))
				return nil
			}
			fmt.Fprintf(m.Stdout, "%s %s: %d jobs in flight\n", n.ID, n.State, n.InFlight)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (m *Main) nodesUndrain(ctx context.Context, args []string) error {
	fs := m.newFlagSet("nodes undrain", "nodes undrain NODE [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 1, "a node id")
	if err != nil {
		return err
	}
	return show(m, ctx, cf, c, "POST", "/v1/nodes/"+url.PathEscape(fs.Arg(0))+"/undrain", nil, func(tw *tabwriter.Writer, _ json.RawMessage) {
		fmt.Fprintf(tw, "%s is active again\n", fs.Arg(0))
	})
}

func (m *Main) runCluster(ctx context.Context, args []string) error {
	fs := m.newFlagSet("cluster", "cluster [flags]: the leader, its epoch, node counts, and what is degraded")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	type clusterView struct {
		Leader   string         `json:"leader"`
		Epoch    int64          `json:"epoch"`
		Since    *time.Time     `json:"leader_since"`
		Nodes    map[string]int `json:"nodes"`
		Etcd     bool           `json:"etcd_connected"`
		Degraded []string       `json:"degraded"`
	}
	return show(m, ctx, cf, c, "GET", "/v1/cluster", nil, func(tw *tabwriter.Writer, cl clusterView) {
		fmt.Fprintf(tw, "leader\t%s (epoch %d, since %s)\nnodes\tactive %d, draining %d, dead %d\netcd\t%v\n",
			orDash(cl.Leader), cl.Epoch, m.fmtTime(cl.Since), cl.Nodes["active"], cl.Nodes["draining"], cl.Nodes["dead"], cl.Etcd)
		if len(cl.Degraded) > 0 {
			fmt.Fprintf(tw, "degraded\t%s\n", strings.Join(cl.Degraded, "; "))
		}
	})
}
