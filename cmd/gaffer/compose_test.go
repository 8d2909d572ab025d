package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Ports      []string `yaml:"ports"`
		StopSignal string   `yaml:"stop_signal"`
	} `yaml:"services"`
}

// The compose file must agree with the binary: every variable a node gets
// is one of `gaffer server`'s, each value parses, the etcd members and
// endpoints match, the nodes sign in to etcd as the user the setup service
// creates, and health checks hit the port the node listens on.
func TestComposeFileMatchesServerFlags(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	fs, _ := NewMain().serverFlagSet()
	known := map[string]string{} // variable → flag
	for flagName, env := range fs.env {
		known[env] = flagName
	}
	for _, want := range []string{"postgres", "etcd-1", "etcd-2", "etcd-3", "setup-etcd-auth", "migrate", "gaffer-1", "gaffer-2", "gaffer-3"} {
		if _, ok := c.Services[want]; !ok {
			t.Errorf("service %s missing", want)
		}
	}
	var members []string
	for name, s := range c.Services {
		if strings.HasPrefix(name, "etcd-") {
			members = append(members, name)
			if s.Environment["ETCD_NAME"] != name || !strings.Contains(s.Environment["ETCD_INITIAL_CLUSTER"], name+"=http://"+name+":2380") {
				t.Errorf("%s: ETCD_NAME %q / initial cluster %q disagree", name, s.Environment["ETCD_NAME"], s.Environment["ETCD_INITIAL_CLUSTER"])
			}
			if len(s.Healthcheck.Test) == 0 {
				t.Errorf("%s has no health check", name)
			}
		}
	}
	ids := map[string]bool{}
	for name, s := range c.Services {
		if !strings.HasPrefix(name, "gaffer-") {
			continue
		}
		if !slices.Equal(s.Command, []string{"server"}) {
			t.Errorf("%s: command %v, want [server]", name, s.Command)
		}
		// Every variable is a server flag's, and the values parse: run the
		// server's flag parsing on exactly this environment.
		for k := range s.Environment {
			if _, ok := known[k]; !ok {
				t.Errorf("%s: %s is not a gaffer server variable", name, k)
			}
		}
		fs, sf := NewMain().serverFlagSet()
		fs.m.Getenv = func(k string) string { return s.Environment[k] }
		if err := fs.parse(nil); err != nil {
			t.Errorf("%s: its environment does not parse: %v", name, err)
			continue
		}
		if _, err := sf.config(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if *sf.dbURL == "" || *sf.nodeID == "" {
			t.Errorf("%s: DATABASE_URL and GAFFER_NODE_ID are required", name)
		}
		if ids[*sf.nodeID] {
			t.Errorf("%s: node id %s used twice", name, *sf.nodeID)
		}
		ids[*sf.nodeID] = true
		for _, m := range members {
			if !strings.Contains(*sf.etcd, "http://"+m+":2379") {
				t.Errorf("%s: GAFFER_ETCD %q lacks %s", name, *sf.etcd, m)
			}
		}
		port := (*sf.addr)[strings.LastIndex(*sf.addr, ":")+1:]
		hc := strings.Join(s.Healthcheck.Test, " ")
		if !strings.Contains(hc, "/gaffer healthcheck") || !strings.Contains(hc, ":"+port+"/readyz") {
			t.Errorf("%s: health check %q does not check /readyz on port %s", name, hc, port)
		}
		if len(s.Ports) != 1 || !strings.HasSuffix(s.Ports[0], ":"+port) {
			t.Errorf("%s: ports %v do not publish %s", name, s.Ports, port)
		}
		if s.DependsOn["migrate"].Condition != "service_completed_successfully" {
			t.Errorf("%s: does not wait for migrations", name)
		}
		if s.StopSignal != "SIGTERM" {
			t.Errorf("%s: stop signal %q: SIGTERM drains", name, s.StopSignal)
		}
		// etcd runs with authentication on: the node signs in as the user
		// the setup service created, with a role on the node's prefix, and
		// starts only once authentication is on.
		auth := c.Services["setup-etcd-auth"]
		if *sf.etcdUsername == "" || *sf.etcdPassword == "" {
			t.Errorf("%s: no etcd credentials (GAFFER_ETCD_USERNAME, GAFFER_ETCD_PASSWORD)", name)
		}
		if auth.Environment["GAFFER_ETCD_USERNAME"] != *sf.etcdUsername || auth.Environment["GAFFER_ETCD_PASSWORD"] != *sf.etcdPassword ||
			auth.Environment["GAFFER_CLUSTER_PREFIX"] != *sf.prefix {
			t.Errorf("%s: etcd user %s on prefix %s, but setup-etcd-auth creates %s on %s", name, *sf.etcdUsername, *sf.prefix,
				auth.Environment["GAFFER_ETCD_USERNAME"], auth.Environment["GAFFER_CLUSTER_PREFIX"])
		}
		if s.DependsOn["setup-etcd-auth"].Condition != "service_completed_successfully" {
			t.Errorf("%s: does not wait for etcd's authentication to be set up", name)
		}
	}
	auth := c.Services["setup-etcd-auth"]
	script := strings.Join(auth.Command, " ")
	for _, want := range []string{"auth enable", "role grant-permission \"$$GAFFER_ETCD_USERNAME\" --prefix=true readwrite \"$$GAFFER_CLUSTER_PREFIX\"", "user grant-role"} {
		if !strings.Contains(script, want) {
			t.Errorf("setup-etcd-auth's script lacks %q", want)
		}
	}
	for _, m := range members {
		if auth.DependsOn[m].Condition != "service_healthy" {
			t.Errorf("setup-etcd-auth does not wait for %s", m)
		}
		// With authentication on, an anonymous health check fails.
		if hc := strings.Join(c.Services[m].Healthcheck.Test, " "); !strings.Contains(hc, "--user root:"+auth.Environment["ETCD_ROOT_PASSWORD"]) {
			t.Errorf("%s: health check %q does not sign in as root", m, hc)
		}
	}
	if len(members) != 3 || len(ids) != 3 {
		t.Fatalf("%d etcd members, %d gaffer nodes; want 3 and 3", len(members), len(ids))
	}
	m := c.Services["migrate"]
	if !slices.Equal(m.Command, []string{"migrate", "up"}) || m.Environment["DATABASE_URL"] == "" {
		t.Errorf("migrate service: %v %v", m.Command, m.Environment)
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/gaffer", `ENTRYPOINT ["/gaffer"]`} {
		if !strings.Contains(string(docker), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
