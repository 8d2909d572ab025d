package auth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies are the reverse proxies (load balancers, TLS
// terminators) whose X-Forwarded-For and X-Forwarded-Proto headers the
// node believes. A nil *TrustedProxies trusts nobody: the client is the
// TCP peer and the scheme is what the node itself serves.
//
// Anyone can send X-Forwarded-* headers; only a proxy the operator named
// may vouch for them, or an attacker could pick the address its failed
// sign-ins are counted against, or make the node believe a plain-HTTP
// request came over TLS.
type TrustedProxies struct {
	nets []netip.Prefix
}

// ParseTrustedProxies reads a comma-separated list of CIDRs or single
// addresses ("10.0.0.0/8, 192.168.1.5, fd00::/8"). An empty list trusts
// nobody and returns nil.
func ParseTrustedProxies(list string) (*TrustedProxies, error) {
	var p TrustedProxies
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an IP address", s)
			}
			pfx = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if pfx.Addr().Is4In6() {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), max(pfx.Bits()-96, 0))
		}
		p.nets = append(p.nets, pfx.Masked())
	}
	if len(p.nets) == 0 {
		return nil, nil
	}
	return &p, nil
}

func (p *TrustedProxies) trusts(a netip.Addr) bool {
	if p == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// peer is the request's TCP peer address (invalid if RemoteAddr is not
// an IP, as in some tests).
func peer(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// ClientAddr is the address a request came from: the TCP peer, unless
// the peer is a trusted proxy; then the right-most X-Forwarded-For entry
// that is not itself a trusted proxy (entries to its left were written by
// the client and prove nothing). If X-Forwarded-For is missing or that
// entry is not an address, it is the peer.
func (p *TrustedProxies) ClientAddr(r *http.Request) netip.Addr {
	a := peer(r)
	if !p.trusts(a) {
		return a
	}
	hops := forwardedList(r.Header.Values("X-Forwarded-For"))
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			return a
		}
		if !p.trusts(hop) {
			return hop.Unmap()
		}
		a = hop.Unmap()
	}
	return a
}

// HTTPS reports whether the client reached the node over TLS: the node
// serves TLS itself, or a trusted proxy in front of it says so with
// X-Forwarded-Proto: https (the right-most value, which that proxy set).
// The header from anyone else is ignored.
func (p *TrustedProxies) HTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !p.trusts(peer(r)) {
		return false
	}
	protos := forwardedList(r.Header.Values("X-Forwarded-Proto"))
	return len(protos) > 0 && strings.EqualFold(protos[len(protos)-1], "https")
}

// forwardedList splits X-Forwarded-* header lines into their entries, in
// order.
func forwardedList(lines []string) []string {
	var out []string
	for _, l := range lines {
		for _, e := range strings.Split(l, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// parseHop reads an X-Forwarded-For entry: an address, or one with a port
// ("203.0.113.7:4711", "[2001:db8::1]:4711"), as some proxies write.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), true
	}
	return netip.Addr{}, false
}
