package ui_test

import (
	"context"
	"html"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/internal/tzdata"
)

// The nodes page shows each node's zone rules, and both it and the
// overview warn while live nodes disagree on them.
func TestNodesPageShowsZoneRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if err := e.st.RegisterNode(ctx, "node-a", "host", "dev", tzdata.Version, map[string]int{"default": 1}, nil); err != nil {
		t.Fatal(err)
	}
	ops := e.browser()
	ops.login(e.token("default", auth.ScopeJobsRead, auth.ScopeClusterRead))
	const warning = "live nodes use different time zone rules"
	p := ops.get("/ui/nodes")
	if p.status != 200 || !strings.Contains(p.body, "tzdata "+tzdata.Version) || strings.Contains(p.body, warning) {
		t.Fatalf("nodes page with one node: %d, shows tzdata %s: %v, warns: %v", p.status, tzdata.Version,
			strings.Contains(p.body, "tzdata "+tzdata.Version), strings.Contains(p.body, warning))
	}
	if err := e.st.RegisterNode(ctx, "node-b", "host", "old", "2024a", map[string]int{"default": 1}, nil); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"/ui/nodes", "/ui/"} {
		body := html.UnescapeString(ops.get(page).body)
		if !strings.Contains(body, warning) || !strings.Contains(body, "tzdata 2024a on node-b") {
			t.Errorf("%s does not warn that node-b's zone rules differ", page)
		}
	}
}
