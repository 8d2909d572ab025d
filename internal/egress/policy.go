package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
)

// ErrBlocked is what every refused connection matches (errors.Is). Its
// text is the same whatever the reason, so that an error shown to a
// tenant says nothing about what the address is or what listens there.
var ErrBlocked = errors.New("destination not allowed")

// BlockedError is a refused connection. Error is always ErrBlocked's
// text; Host, Addr and Reason are for the operator's log, never for the
// tenant.
type BlockedError struct {
	// Host is the name being dialled ("" when unknown).
	Host string
	// Addr is the address refused.
	Addr netip.AddrPort
	// Reason says which rule refused it, e.g. "loopback".
	Reason string
}

func (e *BlockedError) Error() string { return ErrBlocked.Error() }

// Is makes errors.Is(err, ErrBlocked) hold.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// Config configures a Policy. The zero Config refuses every range the
// package documentation lists and opens nothing.
type Config struct {
	// Allow opens destinations refused by default. Each entry is a CIDR
	// ("10.20.0.0/16"), an address ("10.20.0.7", "[fd00::7]"), a host name
	// ("hooks.internal": the addresses it resolves to, any port) or
	// host:port ("hooks.internal:8443", "10.20.0.7:9000", "[::1]:9000").
	// Only an exact host:port entry opens one of Own, or an own port on
	// an address of this host.
	Allow []string
	// Own are the node's own endpoints (its API, PostgreSQL, etcd),
	// refused even on public addresses: "host:port", or a URL with a host
	// ("http://etcd-1:2379", "postgres://db:5432/gaffer"). Host names are
	// refused by name and by the addresses New resolves them to. Whatever
	// its host, an endpoint's port is also refused on every address of
	// this host: all of 127.0.0.0/8 and ::1, 0.0.0.0 and ::, the
	// machine's interface addresses, and OwnHosts — a service bound to
	// every interface answers on each of them.
	Own []string
	// OwnHosts are further addresses and host names of this cluster that
	// the machine's interfaces do not show: a NAT's or load balancer's
	// public address, a name for the nodes. Every port of Own is refused
	// on them, by address and by name. An entry with a port
	// ("203.0.113.7:15432", a port forwarded to PostgreSQL) is one more
	// endpoint of Own instead. SplitOwnHosts checks a list.
	OwnHosts []string
	// Resolver resolves the host names in Own and OwnHosts. Default
	// net.DefaultResolver.
	Resolver *net.Resolver
}

// Policy decides which destinations may be connected to. It is safe for
// concurrent use and does not change after New.
type Policy struct {
	allow rules
	own   ownEndpoints
	// localAddrs lists the machine's interface addresses (tests fake it).
	localAddrs func() ([]netip.Addr, error)
}

// New checks cfg and returns its policy; the error names a bad entry. ctx
// bounds resolving the host names in cfg.Own and cfg.OwnHosts. A name
// that does not resolve is refused by name only: Unresolved lists them,
// for the log.
func New(ctx context.Context, cfg Config) (*Policy, error) {
	p := &Policy{localAddrs: interfaceAddrs}
	for _, e := range cfg.Allow {
		if err := p.allow.add(e); err != nil {
			return nil, err
		}
	}
	if p.allow.names == nil {
		p.allow.names, p.allow.exact = map[string]bool{}, map[string]bool{}
	}
	resolver := cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	p.own = newOwnEndpoints()
	for _, e := range cfg.Own {
		if err := p.own.add(ctx, resolver, e); err != nil {
			return nil, err
		}
	}
	for _, e := range cfg.OwnHosts {
		if err := p.own.addHost(ctx, resolver, e); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Unresolved lists the entries of Config.Own and OwnHosts whose host
// names did not resolve when the policy was made: connections to their
// addresses by another name or by address are not known to be the
// node's own.
func (p *Policy) Unresolved() []string { return p.own.unresolved }

// Check decides whether a connection to addr, the resolved address about
// to be connected, may be made; host is the name being dialled (or "" if
// unknown), for allow entries that name hosts. It returns nil or a
// *BlockedError. It never resolves or connects.
func (p *Policy) Check(host string, addr netip.AddrPort) error {
	name, _, _ := canonicalHost(host)
	a, port := normal(addr.Addr()), addr.Port()
	exact := (name != "" && p.allow.exact[hostPort(name, port)]) || p.allow.exact[hostPort(a.String(), port)]
	if why := p.ownReason(name, a, port); why != "" {
		if exact {
			return nil
		}
		return &BlockedError{Host: host, Addr: addr, Reason: why}
	}
	if exact || (name != "" && p.allow.names[name]) || p.allow.containsAddr(a) {
		return nil
	}
	if why := blockedReason(a); why != "" {
		return &BlockedError{Host: host, Addr: addr, Reason: why}
	}
	return nil
}

// ownReason says how a connection is one to the node itself, or "".
func (p *Policy) ownReason(name string, a netip.Addr, port uint16) string {
	if name != "" && (p.own.names[hostPort(name, port)] || p.own.ports[port] && p.own.hostNames[name]) {
		return "the node's own endpoint, by name"
	}
	for _, f := range forms(a) {
		if p.own.addrs[netip.AddrPortFrom(f, port)] {
			return "the node's own endpoint"
		}
		if p.own.ports[port] && p.isThisHost(f) {
			return "an own endpoint's port on an address of this host"
		}
	}
	return ""
}

// isThisHost reports whether a connection to a reaches this machine (or
// what the operator named as the cluster's): loopback (all of
// 127.0.0.0/8 and ::1 is one host), unspecified (which Linux connects to
// locally), an interface address or one of OwnHosts.
func (p *Policy) isThisHost(a netip.Addr) bool {
	return a.IsLoopback() || a.IsUnspecified() || p.own.hosts[a] || p.isLocal(a)
}

// isLocal reports whether a is one of this machine's addresses. If they
// cannot be listed, every address counts as local: refusing a port too
// many beats reaching the node itself.
func (p *Policy) isLocal(a netip.Addr) bool {
	local, err := p.localAddrs()
	return err != nil || slices.Contains(local, a)
}
