package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// explainTimeout adds the likely cause to an etcd call that timed out.
// The etcd client waits for a usable connection until its deadline and
// then reports only "context deadline exceeded", hiding why no connection
// came up: etcd down, a TLS handshake refused (no or wrong client
// certificate, etcd's CA not trusted). It probes each endpoint once with
// a plain dial and, for TLS, a handshake, and names the first failure.
// ctx ends the probes early (the node is stopping).
func (c *Cluster) explainTimeout(ctx context.Context, err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	for _, ep := range c.cfg.Endpoints {
		if why := probeEndpoint(ctx, ep, c.cfg.TLS, time.Second); why != nil && ctx.Err() == nil {
			return fmt.Errorf("%w (%v)", err, why)
		}
	}
	return err
}

// probeEndpoint dials ep and, when it is https:// (or TLS is configured
// for an endpoint without a scheme), completes a TLS handshake and waits
// briefly for etcd to reject the client certificate, which under TLS 1.3
// arrives only after the client's side of the handshake is done. It
// returns nil when nothing is wrong at this level.
func probeEndpoint(ctx context.Context, ep string, tc *tls.Config, timeout time.Duration) error {
	host, secure := ep, tc != nil
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		host, secure = u.Host, u.Scheme == "https" || (u.Scheme != "http" && tc != nil)
	}
	conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("%s: %w", host, err)
	}
	defer conn.Close()
	if !secure {
		return nil
	}
	cfg := &tls.Config{}
	if tc != nil {
		cfg = tc.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(host)
	}
	tconn := tls.Client(conn, cfg)
	tconn.SetDeadline(time.Now().Add(timeout))
	if err := tconn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake with %s: %w", host, err)
	}
	// etcd says nothing until the client does; a refused certificate is an
	// alert that arrives now.
	var b [1]byte
	tconn.SetReadDeadline(time.Now().Add(timeout / 2))
	if _, err := tconn.Read(b[:]); err != nil && !isTimeout(err) && !strings.Contains(err.Error(), "EOF") {
		return fmt.Errorf("TLS handshake with %s: %w", host, err)
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
