package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/tzdata"
)

// Each node's zone rules release is in the nodes view, and live nodes
// that disagree — a cron entry could fire at another instant after a
// leader change — are named in the cluster's degraded list, until the odd
// one leaves.
func TestNodesReportZoneRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, n := range []struct{ id, tz string }{{"node-1", tzdata.Version}, {"node-2", tzdata.Version}} {
		if err := e.st.RegisterNode(ctx, n.id, "host", "v1", n.tz, map[string]int{"default": 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var nodes struct {
		Data []struct {
			ID     string
			TZData string `json:"tzdata"`
		}
	}
	e.do(e.ops, "GET", "/v1/nodes", nil).decode(t, &nodes)
	if len(nodes.Data) != 2 || nodes.Data[0].TZData != tzdata.Version || nodes.Data[1].TZData != tzdata.Version {
		t.Fatalf("nodes %+v, want each with tzdata %s", nodes.Data, tzdata.Version)
	}
	var cl struct{ Degraded []string }
	degraded := func() string {
		e.do(e.ops, "GET", "/v1/cluster", nil).decode(t, &cl)
		return strings.Join(cl.Degraded, "\n")
	}
	if d := degraded(); strings.Contains(d, "zone rules") {
		t.Fatalf("agreeing nodes reported as degraded: %s", d)
	}
	if err := e.st.RegisterNode(ctx, "node-3", "host", "v0", "2024a", map[string]int{"default": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if d := degraded(); !strings.Contains(d, "different time zone rules") || !strings.Contains(d, "tzdata 2024a on node-3") ||
		!strings.Contains(d, "tzdata "+tzdata.Version+" on node-1, node-2") {
		t.Fatalf("disagreeing nodes: degraded %q", d)
	}
	if err := e.st.NodeLeft(ctx, "node-3", "stopped"); err != nil {
		t.Fatal(err)
	}
	if d := degraded(); strings.Contains(d, "zone rules") {
		t.Fatalf("a node that left still counts: %s", d)
	}
}
