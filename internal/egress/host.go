package egress

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// canonicalHost returns host as a dialer sees it: net/http maps a
// non-ASCII host with IDNA's lookup profile before dialling (so
// "１２７.０.０.１" dials 127.0.0.1), names are case-insensitive, and one
// trailing dot names the same host. An IP literal, however it came, is
// returned in canonical spelling with its address.
func canonicalHost(host string) (string, netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		a = normal(a)
		return a.String(), a, true
	}
	name := host
	if !isASCII(name) {
		if v, err := idna.Lookup.ToASCII(name); err == nil {
			name = v
		}
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if a, err := netip.ParseAddr(name); err == nil {
		a = normal(a)
		return a.String(), a, true
	}
	return name, netip.Addr{}, false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// numericSpelling reports whether name (canonicalHost's) is made only of
// numbers — decimal, octal or 0x-hex labels, as inet_aton reads
// "2130706433", "0x7f.1", "0177.0.0.1" or "127.1" — without being a
// canonical address. No DNS name has an all-numeric last label, so such a
// host can only be an address in disguise (libc resolvers accept them).
func numericSpelling(name string) bool {
	if name == "" {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if !numericLabel(label) {
			return false
		}
	}
	return true
}

func numericLabel(l string) bool {
	if strings.HasPrefix(l, "0x") {
		l = l[2:]
		return strings.Trim(l, "0123456789abcdef") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// isLocalhost reports whether name is localhost or under it (RFC 6761:
// both always mean the loopback interface).
func isLocalhost(name string) bool {
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

// validName reports whether name (canonicalHost's) looks like a DNS name.
func validName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return false
		}
	}
	return true
}

// hostPort is the key of a host and port in the rule sets.
func hostPort(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// parsePort reads a TCP port, 1 to 65535.
func parsePort(s string) (uint16, bool) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	return uint16(n), true
}
