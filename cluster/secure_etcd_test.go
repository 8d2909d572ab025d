package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// clientTLS is a client's TLS config for a member's test certificates:
// trusting ca (a CA file, or the system's roots for ""), presenting
// cert/key ("" for none).
func clientTLS(t *testing.T, ca, cert, key string) *tls.Config {
	t.Helper()
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		c.RootCAs = x509.NewCertPool()
		c.RootCAs.AppendCertsFromPEM(b)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

// A node reaches an etcd that requires TLS client certificates and
// authentication when it has the right CA, certificate and credentials —
// as root, or as a user whose role covers only the cluster's prefix — and
// is refused otherwise: it stays out of the cluster, degraded, with the
// reason in its status, while its jobs keep running from PostgreSQL.
func TestSecuredEtcd(t *testing.T) {
	t.Parallel()
	prefix := "/" + t.Name()
	etcd, err := etcdserver.StartWith(etcdserver.Options{ClientTLS: true, RootPassword: "root-secret",
		Users: []etcdserver.User{{Name: "gaffer", Password: "gaffer-secret", Prefix: prefix}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	if !strings.HasPrefix(etcd.Endpoint(), "https://") {
		t.Fatalf("endpoint %s, want https://", etcd.Endpoint())
	}
	certs := etcd.Certs()
	st := pgtest.NewStore(t)
	secure := func(tc *tls.Config, user, password string) func(*cluster.Config) {
		return func(c *cluster.Config) {
			c.TLS, c.Username, c.Password = tc, user, password
			c.DialTimeout = time.Second
		}
	}
	good := clientTLS(t, certs.CA, certs.ClientCert, certs.ClientKey)

	root := newMember(t, st, etcd.Endpoint(), "root-node", secure(good, "root", "root-secret"))
	waitFor(t, 15*time.Second, "the root-authenticated node to lead", root.IsLeader)
	least := newMember(t, st, etcd.Endpoint(), "gaffer-node", secure(good, "gaffer", "gaffer-secret"))
	waitFor(t, 15*time.Second, "the least-privileged node to join", func() bool { return least.Status().EtcdConnected })

	refused := []struct {
		name, id string
		opt      func(*cluster.Config)
		reason   string
	}{
		{"wrong password", "bad-password", secure(good, "root", "guess"), "authentication failed"},
		{"no credentials", "no-credentials", secure(good, "", ""), "permission denied"},
		{"no client certificate", "no-cert", secure(clientTLS(t, certs.CA, "", ""), "root", "root-secret"), "certificate required"},
		{"a stranger's client certificate", "stranger", secure(clientTLS(t, certs.CA, certs.StrangerCert, certs.StrangerKey), "root", "root-secret"), "tls: "},
		{"etcd's CA not trusted", "no-ca", secure(clientTLS(t, "", certs.ClientCert, certs.ClientKey), "root", "root-secret"), "certificate signed by unknown authority"},
	}
	members := map[string]*member{}
	for _, c := range refused {
		members[c.name] = newMember(t, st, etcd.Endpoint(), c.id, c.opt)
	}
	for _, c := range refused {
		m := members[c.name]
		waitFor(t, 20*time.Second, c.name+": the refusal to show in the status", func() bool {
			s := m.Status()
			return len(s.Degraded) > 0 && strings.Contains(s.Degraded[0], c.reason)
		})
		if s := m.Status(); s.EtcdConnected || s.IsLeader {
			t.Errorf("%s: connected %v, leader %v", c.name, s.EtcdConnected, s.IsLeader)
		}
		t.Logf("%s: %s", c.name, m.Status().Degraded[0])
	}
	// The refused nodes never registered in etcd: the members are the two.
	ms, err := root.Members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("%d members registered in etcd, want the 2 with good credentials: %+v", len(ms), ms)
	}
}
