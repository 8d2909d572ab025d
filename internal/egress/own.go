package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// ownEndpoints are the node's own API, PostgreSQL and etcd endpoints, and
// the addresses that reach this machine.
//
// A service is rarely reachable only at the address in its URL: bound to
// every interface it answers on all of 127.0.0.0/8, on each interface
// address and on 0.0.0.0, and a floating address (a database VIP) may
// move onto this machine. So an own endpoint's port is refused on every
// address of this host, wherever the endpoint's own address is; its own
// address is refused with its port even when it is another machine's.
type ownEndpoints struct {
	addrs map[netip.AddrPort]bool
	names map[string]bool // host:port as configured by name
	// ports are the ports of every own endpoint: on an address of this
	// host (isThisHost) any of them is the node itself.
	ports map[uint16]bool
	// hosts and hostNames are the addresses and names the operator says
	// are this cluster's besides the machine's interfaces (OwnHosts).
	hosts     map[netip.Addr]bool
	hostNames map[string]bool
	// unresolved are endpoints and hosts whose names did not resolve:
	// refused by name only.
	unresolved []string
}

func newOwnEndpoints() ownEndpoints {
	return ownEndpoints{addrs: map[netip.AddrPort]bool{}, names: map[string]bool{}, ports: map[uint16]bool{},
		hosts: map[netip.Addr]bool{}, hostNames: map[string]bool{}}
}

// defaultPorts are assumed for URLs without one.
var defaultPorts = map[string]uint16{"http": 80, "https": 443, "postgres": 5432, "postgresql": 5432}

// add records one endpoint, "host:port" or a URL, resolving a host name.
// A name that does not resolve is recorded as unresolved, not an error:
// a node must start while, say, etcd's name is gone (jobs flow without
// etcd), and the name itself is still refused.
func (o *ownEndpoints) add(ctx context.Context, resolver *net.Resolver, endpoint string) error {
	host, portText := "", ""
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return fmt.Errorf("own endpoint %q: %w", endpoint, err)
		}
		host, portText = u.Hostname(), u.Port()
		if portText == "" {
			p, ok := defaultPorts[u.Scheme]
			if !ok {
				return fmt.Errorf("own endpoint %q: no port", endpoint)
			}
			portText = fmt.Sprint(p)
		}
	} else {
		var err error
		if host, portText, err = net.SplitHostPort(endpoint); err != nil {
			return fmt.Errorf("own endpoint %q: %w", endpoint, err)
		}
	}
	port, ok := parsePort(portText)
	if !ok {
		return fmt.Errorf("own endpoint %q: bad port %q", endpoint, portText)
	}
	o.ports[port] = true
	if host == "" {
		return nil // every interface: the port is enough
	}
	name, a, isIP := canonicalHost(host)
	if isIP {
		o.addrs[netip.AddrPortFrom(a, port)] = true
		return nil
	}
	o.names[hostPort(name, port)] = true
	addrs, err := resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		o.unresolved = append(o.unresolved, endpoint)
		return nil
	}
	for _, a := range addrs {
		o.addrs[netip.AddrPortFrom(normal(a), port)] = true
	}
	return nil
}

// addHost records one of Config.OwnHosts: an address or a host name that
// is this cluster's (every own port refused there), or host:port (one
// more own endpoint).
func (o *ownEndpoints) addHost(ctx context.Context, resolver *net.Resolver, entry string) error {
	kind, name, a, err := parseOwnHost(entry)
	switch {
	case err != nil:
		return err
	case kind == ownHostPort:
		return o.add(ctx, resolver, entry)
	case kind == ownHostAddr:
		o.hosts[a] = true
		return nil
	}
	o.hostNames[name] = true
	addrs, err := resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		o.unresolved = append(o.unresolved, entry)
		return nil
	}
	for _, a := range addrs {
		o.hosts[normal(a)] = true
	}
	return nil
}

const (
	ownHostAddr = iota
	ownHostName
	ownHostPort
)

// parseOwnHost reads an OwnHosts entry: an address ("203.0.113.7",
// "[2001:db8::7]"), a host name ("gaffer.example.com") or host:port
// ("203.0.113.7:15432"). The error names the entry.
func parseOwnHost(entry string) (kind int, name string, a netip.Addr, err error) {
	bad := func(why string) error { return fmt.Errorf("own host %q: %s", entry, why) }
	bare := entry
	if strings.HasPrefix(bare, "[") && strings.HasSuffix(bare, "]") {
		bare = bare[1 : len(bare)-1]
	}
	if a, err := netip.ParseAddr(bare); err == nil {
		if a.Zone() != "" {
			return 0, "", a, bad("an address with a zone cannot be named")
		}
		if a = normal(a); a.IsUnspecified() {
			return 0, "", a, bad("the unspecified address is always this host's")
		}
		return ownHostAddr, "", a, nil
	}
	host, portText := entry, ""
	if h, p, err := net.SplitHostPort(entry); err == nil {
		host, portText = h, p
	} else if strings.ContainsAny(entry, "[]:/") {
		return 0, "", a, bad("not an address, a host name or host:port")
	}
	name, a, isIP := canonicalHost(host)
	switch {
	case isIP:
	case numericSpelling(name):
		return 0, "", a, bad("a number in a non-canonical spelling; write IPv4 addresses as a.b.c.d")
	case !validName(name):
		return 0, "", a, bad("not a host name (wildcards are not supported)")
	}
	switch {
	case portText == "" && isIP && a.IsUnspecified():
		return 0, "", a, bad("the unspecified address is always this host's")
	case portText == "" && isIP:
		return ownHostAddr, "", a, nil // a spelling IDNA maps to an address
	case portText == "":
		return ownHostName, name, a, nil
	}
	if _, ok := parsePort(portText); ok {
		return ownHostPort, name, a, nil
	}
	return 0, "", a, bad("the port must be a number from 1 to 65535")
}

// SplitOwnHosts reads a comma-separated OwnHosts list (--own-hosts) and
// returns its entries, checked; the error names the entry at fault.
func SplitOwnHosts(list string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if _, _, _, err := parseOwnHost(e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// interfaceAddrs lists this machine's interface addresses.
func interfaceAddrs() ([]netip.Addr, error) {
	list, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range list {
		if n, ok := a.(*net.IPNet); ok {
			if addr, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, normal(addr))
			}
		}
	}
	return out, nil
}
