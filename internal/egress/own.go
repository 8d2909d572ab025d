package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// ownEndpoints are the node's own API, PostgreSQL and etcd endpoints.
type ownEndpoints struct {
	addrs map[netip.AddrPort]bool
	names map[string]bool // host:port as configured by name
	// anyPorts: endpoints listening on every interface — any local
	// address with one of these ports is the node itself.
	anyPorts map[uint16]bool
	// unresolved are endpoints whose names did not resolve: refused by
	// name only.
	unresolved []string
}

// defaultPorts are assumed for URLs without one.
var defaultPorts = map[string]uint16{"http": 80, "https": 443, "postgres": 5432, "postgresql": 5432}

// add records one endpoint, "host:port" or a URL, resolving a host name.
// A name that does not resolve is recorded as unresolved, not an error:
// a node must start while, say, etcd's name is gone (jobs flow without
// etcd), and the name itself is still refused.
func (o *ownEndpoints) add(ctx context.Context, resolver *net.Resolver, endpoint string) error {
	if o.addrs == nil {
		o.addrs, o.names, o.anyPorts = map[netip.AddrPort]bool{}, map[string]bool{}, map[uint16]bool{}
	}
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
	if host == "" {
		o.anyPorts[port] = true
		return nil
	}
	name, a, isIP := canonicalHost(host)
	if isIP {
		o.addAddr(a, port)
		return nil
	}
	o.names[hostPort(name, port)] = true
	addrs, err := resolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		o.unresolved = append(o.unresolved, endpoint)
		return nil
	}
	for _, a := range addrs {
		o.addAddr(normal(a), port)
	}
	return nil
}

func (o *ownEndpoints) addAddr(a netip.Addr, port uint16) {
	if a.IsUnspecified() {
		o.anyPorts[port] = true
		return
	}
	o.addrs[netip.AddrPortFrom(a, port)] = true
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
