// Package etcdserver runs an embedded single-member etcd server, for
// `gaffer dev` and for tests. It can be stopped and started again on the
// same data directory and ports, to simulate an outage.
package etcdserver

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gafferhq/gaffer/internal/localport"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is an embedded etcd member.
type Server struct {
	name           string
	dir            string
	tempDir        bool
	opts           Options
	certs          *Certs // with Options.ClientTLS
	clientURL      url.URL
	peerURL        url.URL
	initialCluster string
	mu             sync.Mutex
	etcd           *embed.Etcd
}

// Options configures a single member beyond a plain local etcd.
type Options struct {
	// Dir keeps the data; "" means a temporary directory removed by Close.
	Dir string
	// ClientTLS serves clients over TLS only (https:// endpoint) and
	// requires a client certificate signed by the member's own test CA;
	// Server.Certs has the files.
	ClientTLS bool
	// RootPassword, when set, creates the user root with this password and
	// enables etcd's authentication before Start returns.
	RootPassword string
	// Users are created (before authentication is enabled), each with a
	// role that may read and write only its Prefix.
	Users []User
}

// User is an etcd user limited to one key prefix.
type User struct {
	Name, Password, Prefix string
}

// portAttempts is how many times a start is tried on fresh ports. A free
// port is found by listening and closing, so another process (a parallel
// test) can take it before etcd binds it.
const portAttempts = 5

// retryOnTakenPort runs start until it succeeds, fails for another reason
// than a port already in use, or has tried portAttempts times.
func retryOnTakenPort[T any](start func() (T, error)) (T, error) {
	var v T
	var err error
	for range portAttempts {
		if v, err = start(); err == nil || !portTaken(err) {
			return v, err
		}
	}
	return v, err
}

func portTaken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// Start starts a member with its data in dir (a new temporary directory,
// removed by Close, when dir is empty) on free loopback ports.
func Start(dir string) (*Server, error) { return StartWith(Options{Dir: dir}) }

// StartWith starts a member configured by opts on free loopback ports.
func StartWith(opts Options) (*Server, error) {
	return retryOnTakenPort(func() (*Server, error) { return startOne(opts) })
}

func startOne(opts Options) (*Server, error) {
	s, err := newServer("gaffer", opts.Dir)
	if err != nil {
		return nil, err
	}
	s.opts = opts
	if opts.ClientTLS {
		s.clientURL.Scheme = "https"
		if s.certs, err = writeCerts(filepath.Join(s.dir, "tls")); err != nil {
			s.cleanup()
			return nil, err
		}
	}
	s.initialCluster = s.name + "=" + s.peerURL.String()
	if err := s.start(); err != nil {
		s.cleanup()
		return nil, err
	}
	if opts.RootPassword != "" {
		if err := s.enableAuth(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func newServer(name, dir string) (*Server, error) {
	s := &Server{name: name, dir: dir}
	if s.dir == "" {
		d, err := os.MkdirTemp("", "gaffer-etcd-")
		if err != nil {
			return nil, err
		}
		s.dir, s.tempDir = d, true
	}
	cp, err := localport.Free()
	if err != nil {
		return nil, err
	}
	pp, err := localport.Free()
	if err != nil {
		return nil, err
	}
	s.clientURL = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cp)}
	s.peerURL = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pp)}
	return s, nil
}

// Cluster is several embedded members forming one etcd cluster.
type Cluster struct {
	Members []*Server
}

// StartCluster starts n members (temporary data directories) and waits
// until they form a cluster.
func StartCluster(n int) (*Cluster, error) {
	return retryOnTakenPort(func() (*Cluster, error) { return startCluster(n) })
}

func startCluster(n int) (*Cluster, error) {
	c := &Cluster{}
	var peers []string
	for i := range n {
		s, err := newServer(fmt.Sprintf("m%d", i+1), "")
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Members = append(c.Members, s)
		peers = append(peers, s.name+"="+s.peerURL.String())
	}
	errs := make(chan error, n)
	for _, s := range c.Members {
		s.initialCluster = strings.Join(peers, ",")
		go func(s *Server) { errs <- s.start() }(s)
	}
	for range n {
		if err := <-errs; err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Endpoints are every member's client URL.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.Endpoint()
	}
	return out
}

// Leader returns the index of the member that leads, or -1.
func (c *Cluster) Leader() int {
	for i, m := range c.Members {
		m.mu.Lock()
		e := m.etcd
		m.mu.Unlock()
		if e != nil && e.Server.Leader() == e.Server.MemberID() {
			return i
		}
	}
	return -1
}

// Close stops every member and removes their data.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.Close()
	}
}

func (s *Server) start() error {
	cfg := embed.NewConfig()
	cfg.Name = s.name
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = s.initialCluster
	cfg.InitialClusterToken = "gaffer-test"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if s.certs != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: s.certs.ServerCert, KeyFile: s.certs.ServerKey,
			TrustedCAFile: s.certs.CA, ClientCertAuth: true}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return errors.New("embedded etcd did not become ready within 30s")
	}
	s.mu.Lock()
	s.etcd = e
	s.mu.Unlock()
	return nil
}

// Endpoint is the client URL.
func (s *Server) Endpoint() string { return s.clientURL.String() }

// PeerEndpoint is the peer URL, which members talk to each other on.
func (s *Server) PeerEndpoint() string { return s.peerURL.String() }

// Stop shuts the member down, keeping its data: Restart brings it back.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.etcd
	s.etcd = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped member again on the same data and ports.
func (s *Server) Restart() error {
	s.Stop()
	var err error
	// The ports may linger for a moment after Close.
	for range 50 {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// RestartEmpty stops the member, deletes its data, and starts it again on
// the same ports: etcd as after a disk loss or a restart without a volume
// (revisions start over).
func (s *Server) RestartEmpty() error {
	s.Stop()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			return err
		}
	}
	return s.Restart()
}

// Close stops the member and removes a temporary data directory.
func (s *Server) Close() {
	s.Stop()
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.tempDir {
		os.RemoveAll(s.dir)
	}
}
