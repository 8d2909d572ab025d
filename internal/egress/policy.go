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
	// Only an exact host:port entry opens one of Own.
	Allow []string
	// Own are the node's own endpoints (its API, PostgreSQL, etcd),
	// refused even on public addresses: "host:port", or a URL with a host
	// ("http://etcd-1:2379", "postgres://db:5432/gaffer"). An empty or
	// unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") means every
	// local interface address with that port. Host names are refused by
	// name and by the addresses New resolves them to.
	Own []string
	// Resolver resolves the host names in Own. Default net.DefaultResolver.
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
// bounds resolving the host names in cfg.Own. A name that does not
// resolve is refused by name only: Unresolved lists them, for the log.
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
	p.own = ownEndpoints{addrs: map[netip.AddrPort]bool{}, names: map[string]bool{}, anyPorts: map[uint16]bool{}}
	for _, e := range cfg.Own {
		if err := p.own.add(ctx, resolver, e); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Unresolved lists the entries of Config.Own whose host names did not
// resolve when the policy was made: connections to their addresses by
// another name or by address are not known to be the node's own.
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
	if name != "" && p.own.names[hostPort(name, port)] {
		return "the node's own endpoint, by name"
	}
	for _, f := range forms(a) {
		if p.own.addrs[netip.AddrPortFrom(f, port)] {
			return "the node's own endpoint"
		}
		if p.own.anyPorts[port] && (f.IsUnspecified() || f.IsLoopback() || p.isLocal(f)) {
			return "the node's own endpoint (listening on every interface)"
		}
	}
	return ""
}

// isLocal reports whether a is one of this machine's addresses. If they
// cannot be listed, every address counts as local: refusing a port too
// many beats reaching the node itself.
func (p *Policy) isLocal(a netip.Addr) bool {
	local, err := p.localAddrs()
	return err != nil || slices.Contains(local, a)
}
