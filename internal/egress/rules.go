package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// rules are the operator's allow entries.
type rules struct {
	nets  []netip.Prefix  // CIDRs and bare addresses: any port
	names map[string]bool // host names: the addresses they resolve to, any port
	exact map[string]bool // host:port (a name or a canonical address)
}

// SplitAllow reads a comma-separated allow list (--webhook-allow) and
// returns its entries, checked; the error names the entry at fault.
func SplitAllow(list string) ([]string, error) {
	var out []string
	var r rules
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if err := r.add(e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// add parses one entry: a CIDR, an address, a host name, or host:port.
func (r *rules) add(entry string) error {
	if r.names == nil {
		r.names, r.exact = map[string]bool{}, map[string]bool{}
	}
	bad := func(why string) error { return fmt.Errorf("allow entry %q: %s", entry, why) }
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return bad("not a CIDR such as 10.1.0.0/16 or fd00::/8")
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return bad("write IPv4 ranges as a.b.c.d/n")
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		r.nets = append(r.nets, p.Masked())
		return nil
	}
	bare := entry
	if strings.HasPrefix(bare, "[") && strings.HasSuffix(bare, "]") {
		bare = bare[1 : len(bare)-1]
	}
	if a, err := netip.ParseAddr(bare); err == nil {
		if a.Zone() != "" {
			return bad("an address with a zone cannot be allowed")
		}
		a = normal(a)
		r.nets = append(r.nets, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	host, port := entry, ""
	if h, p, err := net.SplitHostPort(entry); err == nil {
		host, port = h, p
	} else if strings.Contains(entry, "[") || strings.Count(entry, ":") > 0 {
		return bad("not host, host:port, [IPv6]:port, an address or a CIDR")
	}
	name, _, isIP := canonicalHost(host)
	switch {
	case isIP:
	case numericSpelling(name):
		return bad("a number in a non-canonical spelling; write IPv4 addresses as a.b.c.d")
	case !validName(name):
		return bad("not a host name (wildcards are not supported)")
	}
	if port == "" {
		r.names[name] = true
		return nil
	}
	n, ok := parsePort(port)
	if !ok {
		return bad("the port must be a number from 1 to 65535")
	}
	r.exact[hostPort(name, n)] = true
	return nil
}

// containsAddr reports whether a CIDR or address entry covers a.
func (r *rules) containsAddr(a netip.Addr) bool {
	for _, p := range r.nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
