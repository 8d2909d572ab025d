package egress

import "net/netip"

// blockedRange is a range refused by default, and why (for the log).
type blockedRange struct {
	prefix netip.Prefix
	why    string
}

func ranges(list ...string) []blockedRange {
	out := make([]blockedRange, 0, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		out = append(out, blockedRange{netip.MustParsePrefix(list[i]), list[i+1]})
	}
	return out
}

// blockedV4 and blockedV6 are refused by default (IANA special-purpose
// registries, less the documentation ranges, which route nowhere).
var (
	blockedV4 = ranges(
		"0.0.0.0/8", "this network (including 0.0.0.0)",
		"10.0.0.0/8", "private",
		"100.64.0.0/10", "shared address space (CGNAT)",
		"127.0.0.0/8", "loopback",
		"169.254.0.0/16", "link-local (including cloud metadata)",
		"172.16.0.0/12", "private",
		"192.0.0.0/24", "IETF protocol assignments",
		"192.168.0.0/16", "private",
		"198.18.0.0/15", "benchmarking",
		"224.0.0.0/4", "multicast",
		"240.0.0.0/4", "reserved (including broadcast)",
	)
	blockedV6 = ranges(
		"::/128", "unspecified",
		"::1/128", "loopback",
		"64:ff9b:1::/48", "local-use NAT64",
		"100::/64", "discard-only",
		"fc00::/7", "unique local",
		"fe80::/10", "link-local",
		"fec0::/10", "site-local",
		"ff00::/8", "multicast",
	)
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
	compat    = netip.MustParsePrefix("::/96")
	siit      = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// normal is a as a dialled address: no zone, IPv4-mapped IPv6 as IPv4
// (which is what the kernel connects to).
func normal(a netip.Addr) netip.Addr { return a.WithZone("").Unmap() }

// embedded returns the IPv4 addresses an IPv6 address carries and that a
// translator or tunnel would deliver to: IPv4-compatible, SIIT, NAT64,
// 6to4, and Teredo's server and (obfuscated) client addresses.
func embedded(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	last := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	switch {
	case compat.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return []netip.Addr{last}
	case siit.Contains(a), nat64.Contains(a):
		return []netip.Addr{last}
	case sixToFour.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})}
	case teredo.Contains(a):
		server := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{server, client}
	}
	return nil
}

// forms are the addresses a connection to a reaches: a itself and what
// it embeds.
func forms(a netip.Addr) []netip.Addr {
	a = normal(a)
	return append([]netip.Addr{a}, embedded(a)...)
}

// blockedReason says why a is refused by default, or "" if it is not.
func blockedReason(a netip.Addr) string {
	for i, f := range forms(a) {
		list := blockedV6
		if f.Is4() {
			list = blockedV4
		}
		for _, r := range list {
			if r.prefix.Contains(f) {
				if i > 0 {
					return "IPv6 form of " + f.String() + ": " + r.why
				}
				return r.why
			}
		}
	}
	return ""
}
