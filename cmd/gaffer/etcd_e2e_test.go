package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/etcdserver"
)

// `gaffer server` reaches an etcd with TLS client certificates and
// authentication through --etcd-ca, --etcd-cert, --etcd-key,
// --etcd-username and $GAFFER_ETCD_PASSWORD: with the right ones it leads;
// with a wrong password it still serves (jobs need only PostgreSQL) and
// /readyz says why it is not in the cluster.
func TestServerWithSecuredEtcd(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.ok("migrate", "up")
	etcd, err := etcdserver.StartWith(etcdserver.Options{ClientTLS: true, RootPassword: "root-secret",
		Users: []etcdserver.User{{Name: "gaffer", Password: "gaffer-secret", Prefix: "/gaffer"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	e.etcd = etcd.Endpoint()
	c := etcd.Certs()
	tlsFlags := []string{"--etcd-ca", c.CA, "--etcd-cert", c.ClientCert, "--etcd-key", c.ClientKey, "--etcd-username", "gaffer"}

	base := e.env
	e.env = append(base, "GAFFER_ETCD_PASSWORD=gaffer-secret")
	e.server("secure-1", tlsFlags...)
	e.waitSQL("a leader elected through the secured etcd", `SELECT coalesce(leader, '') FROM gaffer.leader_fence`, "secure-1")

	e.env = append(base, "GAFFER_ETCD_PASSWORD=a-wrong-guess")
	_, url := e.server("secure-2", tlsFlags...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && strings.Contains(string(body), "authentication failed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz of a node with a wrong etcd password: %d %s", resp.StatusCode, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Mistakes in the etcd TLS and auth settings are usage errors naming the
// flag, found before anything starts.
func TestEtcdFlagErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	db := []string{"server", "--database-url", "postgres://127.0.0.1:1/x"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--etcd", "https://127.0.0.1:1", "--etcd-cert", "c.pem"}, nil, "--etcd-cert and --etcd-key go together"},
		{[]string{"--etcd", "https://127.0.0.1:1", "--etcd-ca", filepath.Join(dir, "missing.pem")}, nil, "--etcd-ca: open " + filepath.Join(dir, "missing.pem")},
		{[]string{"--etcd", "https://127.0.0.1:1", "--etcd-ca", notPEM}, nil, "--etcd-ca: " + notPEM + " holds no PEM certificate"},
		{[]string{"--etcd", "https://127.0.0.1:1", "--etcd-cert", notPEM, "--etcd-key", notPEM}, nil, "--etcd-cert/--etcd-key:"},
		{[]string{"--etcd", "http://127.0.0.1:1", "--etcd-ca", notPEM}, nil, "need https:// endpoints"},
		{[]string{"--etcd", "https://127.0.0.1:1", "--etcd-username", "gaffer"}, nil, "--etcd-username and $GAFFER_ETCD_PASSWORD go together"},
		{[]string{"--etcd", "https://127.0.0.1:1", "--etcd-password", "secret"}, nil, "--etcd-password is read only from $GAFFER_ETCD_PASSWORD"},
		{[]string{"--etcd-username", "gaffer"}, map[string]string{"GAFFER_ETCD_PASSWORD": "x"}, "which is not set"},
		{[]string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"}, nil, `--trusted-proxies: "proxy.internal"`},
		{[]string{"--http-read-timeout", "0s"}, nil, "--http-read-timeout must be positive"},
		{[]string{"--dashboard-session-length", "-1h"}, nil, "--dashboard-session-length must be positive"},
	} {
		_, stderr, err := run(t, c.env, append(db, c.args...)...)
		if err == nil || !strings.Contains(err.Error()+stderr, c.want) || exitCode(err) != 2 {
			t.Errorf("gaffer server %v: %v (exit %d); want a usage error saying %q", c.args, err, exitCode(err), c.want)
		}
	}
	// dev runs its own etcd unless --etcd names one.
	if _, _, err := run(t, map[string]string{"GAFFER_ETCD_PASSWORD": "x"}, "dev", "--etcd-username", "u"); err == nil || !strings.Contains(err.Error(), "which is not set") {
		t.Errorf("dev with etcd credentials and no --etcd: %v", err)
	}
}
