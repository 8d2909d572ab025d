package egress

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DialContext connects like net.Dialer.DialContext, but first checks every
// address it is about to connect to: the name in address is resolved as
// usual, and a Control function refuses any resulting ip:port that Check
// refuses, before the connection is attempted. Only TCP is dialled. The
// error of a refused connection matches ErrBlocked; ctx bounds resolution
// and connection.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	refuse := func(why string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &BlockedError{Host: host, Reason: why}}
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return refuse("network " + network)
	}
	if name, _, isIP := canonicalHost(host); !isIP && numericSpelling(name) {
		return refuse("non-canonical numeric host")
	}
	// A dialer per call: its Control function knows the host name being
	// dialled, for allow entries that name hosts.
	d := &net.Dialer{Control: func(_, addr string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return &BlockedError{Host: host, Reason: "unparsable address " + addr}
		}
		return p.Check(host, ap)
	}}
	return d.DialContext(ctx, network, address)
}

// Transport returns an HTTP transport that dials only through the policy.
// It uses no proxy — not even one from the environment (HTTP_PROXY…):
// through a proxy the policy would check the proxy's address, not the
// destination's.
func (p *Policy) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
