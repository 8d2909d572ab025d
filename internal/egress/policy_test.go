package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// These tests decide on addresses only: nothing here connects anywhere.

func newPolicy(t *testing.T, cfg Config) *Policy {
	t.Helper()
	p, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// check runs the decision for host and addr ("ip:port") and reports
// whether it refused; a refusal must carry the one uniform text.
func check(t *testing.T, p *Policy, host, addr string) bool {
	t.Helper()
	err := p.Check(host, netip.MustParseAddrPort(addr))
	if err == nil {
		return false
	}
	var be *BlockedError
	if !errors.Is(err, ErrBlocked) || !errors.As(err, &be) || err.Error() != "destination not allowed" || be.Reason == "" {
		t.Fatalf("Check(%q, %s) = %v (%T), want a *BlockedError with the uniform text and a reason", host, addr, err, err)
	}
	return true
}

func TestDefaultRefusesInternalRanges(t *testing.T) {
	t.Parallel()
	p := newPolicy(t, Config{})
	refused := []string{
		// IPv4
		"127.0.0.1:8080", "127.255.255.254:80", "0.0.0.0:80", "0.1.2.3:80",
		"10.0.0.1:80", "10.255.255.255:443", "172.16.0.1:80", "172.31.255.255:80",
		"192.168.0.1:80", "192.168.255.255:80", "100.64.0.1:80", "100.127.255.255:80",
		"169.254.169.254:80", "169.254.0.1:80", "224.0.0.1:80", "239.255.255.250:1900",
		"255.255.255.255:80", "240.0.0.1:80", "192.0.0.8:80", "198.18.0.1:80", "198.19.255.255:80",
		// IPv6
		"[::1]:80", "[::]:80", "[fe80::1]:80", "[fe80::1%eth0]:80", "[fc00::1]:80", "[fd12:3456::1]:80",
		"[ff02::1]:80", "[fec0::1]:80", "[100::1]:80", "[64:ff9b:1::1]:80",
		// IPv4-mapped
		"[::ffff:127.0.0.1]:80", "[::ffff:10.0.0.1]:80", "[::ffff:169.254.169.254]:80", "[::ffff:0.0.0.0]:80", "[::ffff:7f00:1]:80",
		// IPv4-compatible
		"[::127.0.0.1]:80", "[::10.0.0.1]:80", "[::169.254.169.254]:80", "[::192.168.1.1]:80",
		// SIIT
		"[::ffff:0:127.0.0.1]:80", "[::ffff:0:a00:1]:80",
		// NAT64
		"[64:ff9b::127.0.0.1]:80", "[64:ff9b::a9fe:a9fe]:80", "[64:ff9b::10.1.2.3]:80",
		// 6to4
		"[2002:7f00:1::1]:80", "[2002:a9fe:a9fe::1]:80", "[2002:c0a8:101::1]:80",
		// Teredo: server 127.0.0.1; client ^80ff:fffe = 127.0.0.1
		"[2001:0:7f00:1::1]:80", "[2001:0:cb00:7107::80ff:fffe]:80",
	}
	for _, a := range refused {
		if !check(t, p, "", a) {
			t.Errorf("%s allowed, want refused", a)
		}
	}
	allowed := []string{
		"203.0.113.7:443", "198.51.100.10:80", "192.0.2.1:80", "8.8.8.8:53", "1.1.1.1:443",
		"172.32.0.1:80", "172.15.255.255:80", "100.128.0.1:80", "100.63.255.255:80", "169.255.0.1:80", "11.0.0.1:80",
		"192.169.0.1:80", "223.255.255.255:80", "198.20.0.1:80",
		"[2001:db8::1]:443", "[2606:4700::1111]:443", "[::ffff:203.0.113.7]:80",
		"[64:ff9b::203.0.113.7]:80", "[2002:cb00:7107::1]:80",
		// Teredo, server 203.0.113.7 and client ^34ff:8ef7 = 203.0.113.8
		"[2001:0:cb00:7107::34ff:8ef7]:80",
	}
	for _, a := range allowed {
		if check(t, p, "", a) {
			t.Errorf("%s refused, want allowed", a)
		}
	}
}

func TestAllowEntriesOpenWhatTheyName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		allow    []string
		host     string
		addr     string
		wantOpen bool
	}{
		{[]string{"10.1.0.0/16"}, "", "10.1.2.3:80", true},
		{[]string{"10.1.0.0/16"}, "", "10.2.0.1:80", false},
		{[]string{"10.1.0.0/16"}, "", "127.0.0.1:80", false},
		{[]string{"10.1.0.0/16"}, "", "[64:ff9b::10.1.2.3]:80", false}, // a translator's 10.1.2.3 is not ours
		{[]string{"::ffff:10.0.0.0/104"}, "", "10.9.9.9:80", true},
		{[]string{"127.0.0.1:9000"}, "", "127.0.0.1:9000", true},
		{[]string{"127.0.0.1:9000"}, "localhost", "127.0.0.1:9000", true},
		{[]string{"127.0.0.1:9000"}, "", "127.0.0.1:9001", false},
		{[]string{"127.0.0.1:9000"}, "", "[::1]:9000", false},
		{[]string{"127.0.0.1:9000"}, "", "[::ffff:127.0.0.1]:9000", true},
		{[]string{"127.0.0.1"}, "", "127.0.0.1:1", true},
		{[]string{"127.0.0.1"}, "", "127.0.0.2:1", false},
		{[]string{"hooks.internal"}, "hooks.internal", "10.0.0.5:443", true},
		{[]string{"hooks.internal"}, "HOOKS.Internal.", "10.0.0.5:8443", true},
		{[]string{"hooks.internal"}, "other.internal", "10.0.0.5:443", false},
		{[]string{"hooks.internal"}, "", "10.0.0.5:443", false},
		{[]string{"hooks.internal:8443"}, "hooks.internal", "10.0.0.5:8443", true},
		{[]string{"hooks.internal:8443"}, "hooks.internal", "10.0.0.5:443", false},
		{[]string{"[::1]:9000"}, "", "[::1]:9000", true},
		{[]string{"[::1]:9000"}, "", "127.0.0.1:9000", false},
		{[]string{"::1"}, "", "[::1]:1234", true},
		{[]string{"fd00::/8"}, "", "[fd00::5]:80", true},
		{[]string{"fd00::/8"}, "", "[fe80::5]:80", false},
		{[]string{"bücher.internal"}, "xn--bcher-kva.internal", "10.0.0.7:80", true},
	}
	for _, c := range cases {
		p := newPolicy(t, Config{Allow: c.allow})
		if open := !check(t, p, c.host, c.addr); open != c.wantOpen {
			t.Errorf("allow %v: Check(%q, %s) open = %v, want %v", c.allow, c.host, c.addr, open, c.wantOpen)
		}
	}
}

func TestOwnEndpointsRefusedEvenWhenPublic(t *testing.T) {
	t.Parallel()
	own := []string{"203.0.113.7:8080", "postgres://gaffer@198.51.100.20:5432/gaffer", "http://198.51.100.30:2379", "localhost:2379"}
	cases := []struct {
		allow    []string
		host     string
		addr     string
		wantOpen bool
	}{
		{nil, "", "203.0.113.7:8080", false},
		{nil, "", "203.0.113.7:8081", true},
		{nil, "", "[::ffff:203.0.113.7]:8080", false},
		{nil, "", "[64:ff9b::203.0.113.7]:8080", false}, // through NAT64
		{nil, "", "[2002:cb00:7107::1]:8080", false},    // through 6to4
		{nil, "", "198.51.100.20:5432", false},
		{nil, "", "198.51.100.30:2379", false},
		{[]string{"198.51.100.0/24"}, "", "198.51.100.20:5432", false}, // a CIDR does not open the node itself
		{[]string{"198.51.100.20"}, "", "198.51.100.20:5432", false},   // nor a bare address
		{[]string{"db.example:5432"}, "other.example", "198.51.100.20:5432", false},
		{[]string{"198.51.100.20:5432"}, "", "198.51.100.20:5432", true}, // an exact host:port does
		{[]string{"127.0.0.0/8"}, "", "127.0.0.1:2379", false},           // resolved from localhost:2379
		{[]string{"127.0.0.0/8"}, "localhost", "127.0.0.2:2379", false},  // refused by name too
		{[]string{"127.0.0.0/8"}, "", "127.0.0.2:2379", false},           // etcd bound to every interface answers there too
		{[]string{"127.0.0.0/8"}, "", "127.0.0.2:2380", true},
		{[]string{"localhost:2379"}, "localhost", "127.0.0.1:2379", true},
	}
	for _, c := range cases {
		p := newPolicy(t, Config{Allow: c.allow, Own: own})
		if open := !check(t, p, c.host, c.addr); open != c.wantOpen {
			t.Errorf("allow %v: Check(%q, %s) open = %v, want %v", c.allow, c.host, c.addr, open, c.wantOpen)
		}
	}
}

// A service bound to every interface answers on each address of the
// machine, whatever address its URL names: an own endpoint's port is
// refused on all of loopback, on 0.0.0.0 and ::, and on every interface
// address — however the operator opened loopback or the private ranges —
// while the same port elsewhere, and other ports here, stay as allowed.
func TestOwnPortsRefusedOnEveryAddressOfThisHost(t *testing.T) {
	t.Parallel()
	noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in this test")
	}}
	ifaces := func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.4"), netip.MustParseAddr("2001:db8::9"),
			netip.MustParseAddr("fe80::1")}, nil
	}
	for _, own := range [][]string{
		{"127.0.0.1:5432", "http://127.0.0.1:2379", "127.0.0.1:8080"},               // all on loopback, as in gaffer dev
		{"postgres://gaffer@10.0.0.4:5432/gaffer", "http://10.0.0.4:2379", ":8080"}, // an interface address; the API on every interface
		{"postgres://db.example:5432/gaffer", "http://[::1]:2379", "[2001:db8::9]:8080"},
		{"postgres://localhost/gaffer", "http://etcd.gone.example:2379", "0.0.0.0:8080"}, // a default port, an unresolvable name
		// Elsewhere: a database VIP may move onto this machine, and a
		// remote service may be forwarded to a local port of the same number.
		{"postgres://198.51.100.20:5432/gaffer", "http://198.51.100.30:2379", "203.0.113.7:8080"},
	} {
		p := newPolicy(t, Config{Own: own, Allow: []string{"127.0.0.0/8", "::1", "10.0.0.0/8", "fe80::/10"}, Resolver: noDNS})
		p.localAddrs = ifaces
		for addr, wantOpen := range map[string]bool{
			"127.0.0.1:5432": false, "127.0.0.2:5432": false, "127.255.255.254:5432": false, "[::1]:5432": false,
			"0.0.0.0:5432": false, "[::]:5432": false, "10.0.0.4:5432": false, "[2001:db8::9]:5432": false, "[fe80::1%eth0]:5432": false,
			"127.0.0.2:2379": false, "[::ffff:127.0.0.2]:2379": false, "[::127.0.0.2]:2379": false, "10.0.0.4:2379": false,
			"127.0.0.2:8080": false, "127.9.9.9:8080": false, "[::1]:8080": false, "[::ffff:10.0.0.4]:8080": false,
			// Other ports of this host, and the same ports on addresses
			// that are not this host's, are as the allow list says.
			"127.0.0.2:9000": true, "10.0.0.4:9000": true, "[::1]:9000": true,
			"10.0.0.5:5432": true, "10.0.0.5:2379": true, "10.0.0.5:8080": true, "[fe80::2]:5432": true,
		} {
			if open := !check(t, p, "", addr); open != wantOpen {
				t.Errorf("own %q: Check(%s) open = %v, want %v", own, addr, open, wantOpen)
			}
		}
		// Reached by a name that resolved to this host (the dialler
		// checks the address it connects to, whatever the name).
		if !check(t, p, "rebind.example", "127.0.0.2:5432") {
			t.Errorf("own %q: a name resolving to 127.0.0.2 reached the database port", own)
		}
		// Only an exact host:port opens an own port on this host.
		exact := newPolicy(t, Config{Own: own, Allow: []string{"127.0.0.0/8", "127.0.0.2:5432"}, Resolver: noDNS})
		exact.localAddrs = ifaces
		if check(t, exact, "", "127.0.0.2:5432") || !check(t, exact, "", "127.0.0.3:5432") {
			t.Errorf("own %q: an exact allow entry does not open just its own address", own)
		}
	}
}

// An API listening on every interface is reachable on any of the
// machine's addresses, public ones included.
func TestOwnEndpointOnEveryInterface(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{":8080", "0.0.0.0:8080", "[::]:8080"} {
		p := newPolicy(t, Config{Own: []string{listen}, Allow: []string{"127.0.0.0/8", "::1", "10.0.0.0/8"}})
		p.localAddrs = func() ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("10.0.0.4"), netip.MustParseAddr("2001:db8::9")}, nil
		}
		for addr, wantOpen := range map[string]bool{
			"203.0.113.9:8080": false, "10.0.0.4:8080": false, "[2001:db8::9]:8080": false,
			"127.0.0.1:8080": false, "127.9.9.9:8080": false, "[::1]:8080": false, "0.0.0.0:8080": false,
			"[::ffff:203.0.113.9]:8080": false,
			"203.0.113.10:8080":         true, "203.0.113.9:8081": true, "10.0.0.5:8080": true, "127.0.0.1:9000": true,
		} {
			if open := !check(t, p, "", addr); open != wantOpen {
				t.Errorf("listening on %s: Check(%s) open = %v, want %v", listen, addr, open, wantOpen)
			}
		}
		// When the interfaces cannot be listed, the port is refused
		// everywhere rather than risk reaching the node.
		p.localAddrs = func() ([]netip.Addr, error) { return nil, errors.New("netlink down") }
		if !check(t, p, "", "203.0.113.10:8080") {
			t.Errorf("listening on %s with unknown interfaces: a public address on the API port was allowed", listen)
		}
	}
}

// Behind a NAT or load balancer the cluster is also reachable at
// addresses no interface shows: the operator names them (OwnHosts), and
// every own port is refused there — by address, by the addresses a named
// host resolves to, and by name — while an entry with a port adds that
// one endpoint (a forwarded port).
func TestOwnHostsAreThisCluster(t *testing.T) {
	t.Parallel()
	resolver := fakeResolver(t, map[string][]string{"gaffer.example.com": {"198.51.100.40", "2001:db8::40"}})
	p := newPolicy(t, Config{
		Own:      []string{"127.0.0.1:8080", "postgres://127.0.0.1:5432/gaffer"},
		OwnHosts: []string{"203.0.113.7", "[2001:db8::7]", "gaffer.example.com", "gaffer-gone.example", "203.0.113.8:15432"},
		Resolver: resolver,
	})
	p.localAddrs = func() ([]netip.Addr, error) { return nil, nil }
	if got := p.Unresolved(); len(got) != 1 || got[0] != "gaffer-gone.example" {
		t.Fatalf("Unresolved() = %q", got)
	}
	for c, wantOpen := range map[[2]string]bool{
		{"", "203.0.113.7:8080"}: false, {"", "203.0.113.7:5432"}: false, {"", "[::ffff:203.0.113.7]:5432"}: false,
		{"", "[64:ff9b::203.0.113.7]:5432"}: false, {"", "[2001:db8::7]:8080"}: false,
		{"", "198.51.100.40:8080"}: false, {"", "[2001:db8::40]:5432"}: false,
		{"gaffer.example.com", "203.0.113.99:8080"}: false, {"Gaffer-Gone.Example.", "203.0.113.99:5432"}: false,
		{"", "203.0.113.8:15432"}: false, {"", "127.0.0.2:15432"}: false,
		{"", "203.0.113.7:9000"}: true, {"gaffer.example.com", "198.51.100.41:443"}: true, {"", "198.51.100.41:8080"}: true,
		{"", "203.0.113.8:8081"}: true, {"", "203.0.113.9:15432"}: true,
	} {
		if open := !check(t, p, c[0], c[1]); open != wantOpen {
			t.Errorf("Check(%q, %s) open = %v, want %v", c[0], c[1], open, wantOpen)
		}
	}
	if _, err := New(context.Background(), Config{OwnHosts: []string{"10.0.0.0/8"}}); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/8"`) {
		t.Fatalf("a range as an own host: %v, want an error naming it", err)
	}
}

func TestSplitOwnHosts(t *testing.T) {
	t.Parallel()
	got, err := SplitOwnHosts(" 203.0.113.7, [2001:db8::7],2001:db8::8 ,gaffer.example.com,gaffer.example.com:8443,[2001:db8::9]:15432,,")
	if err != nil || len(got) != 6 {
		t.Fatalf("SplitOwnHosts = %q, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.0/8", "*.example.com", "host:0", "host:99999", "2130706433", "0x7f.1:80",
		"fe80::1%eth0", "[::1", "a b", "host:port", "0.0.0.0", "::", "-", "http://gaffer.example.com"} {
		if _, err := SplitOwnHosts(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("SplitOwnHosts(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestCheckLiteral(t *testing.T) {
	t.Parallel()
	p := newPolicy(t, Config{})
	for _, host := range []string{
		"127.0.0.1", "localhost", "LOCALHOST.", "api.localhost", "::1", "::ffff:127.0.0.1", "fe80::1%eth0",
		"１２７.０.０.１", "ｌｏｃａｌｈｏｓｔ", "127.0.0.1.", "169.254.169.254", "0.0.0.0", "::", "10.0.0.1", "::127.0.0.1",
	} {
		if err := p.CheckLiteral(host, 80); !errors.Is(err, ErrBlocked) {
			t.Errorf("CheckLiteral(%q) = %v, want ErrBlocked", host, err)
		}
	}
	for _, host := range []string{"2130706433", "0x7f.1", "0177.0.0.1", "127.1", "0x7f000001", "017700000001", "3405803783", "0x7F.0.0.1", "127.0.1"} {
		var se *SpellingError
		if err := p.CheckLiteral(host, 80); !errors.As(err, &se) {
			t.Errorf("CheckLiteral(%q) = %v, want a *SpellingError", host, err)
		}
	}
	// Names are not resolved at this point, even ones that sound internal.
	for _, host := range []string{"example.com", "hooks.internal", "1.2.3.4.example.com", "0x7f.example", "203.0.113.7", "2001:db8::1", "localhost.example.com"} {
		if err := p.CheckLiteral(host, 80); err != nil {
			t.Errorf("CheckLiteral(%q) = %v, want nil", host, err)
		}
	}
	// Like gaffer dev: loopback open, the node's own API port not.
	dev := newPolicy(t, Config{Allow: []string{"127.0.0.0/8", "::1"}, Own: []string{"127.0.0.1:8080"}})
	for host, port := range map[string]uint16{"localhost": 9000, "127.0.0.1": 9000, "::1": 9000} {
		if err := dev.CheckLiteral(host, port); err != nil {
			t.Errorf("dev: CheckLiteral(%q, %d) = %v, want nil", host, port, err)
		}
	}
	for host, port := range map[string]uint16{"localhost": 8080, "127.0.0.1": 8080, "127.0.0.2": 8080, "::1": 8080, "2130706433": 9000} {
		if err := dev.CheckLiteral(host, port); err == nil {
			t.Errorf("dev: CheckLiteral(%q, %d) allowed", host, port)
		}
	}
}

func TestSplitAllow(t *testing.T) {
	t.Parallel()
	got, err := SplitAllow(" 10.0.0.0/8, hooks.internal ,hooks.internal:8443,[::1]:9000,::1,127.0.0.1:9000,,")
	if err != nil || len(got) != 6 {
		t.Fatalf("SplitAllow = %q, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "*.example.com", "host:0", "host:99999", "2130706433", "0x7f.1:80",
		"fe80::1%eth0", "[::1", "a b", "host:port", "::ffff:0:0/90", "-"} {
		if _, err := SplitAllow(bad); err == nil {
			t.Errorf("SplitAllow(%q) accepted", bad)
		}
	}
}

// An own endpoint whose name does not resolve at start does not stop the
// node (etcd may be gone: jobs flow without it); its name stays refused.
func TestUnresolvedOwnEndpointRefusedByName(t *testing.T) {
	t.Parallel()
	noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in this test")
	}}
	p := newPolicy(t, Config{Own: []string{"http://etcd-gone.example:2379"}, Allow: []string{"10.0.0.0/8"}, Resolver: noDNS})
	if got := p.Unresolved(); len(got) != 1 || got[0] != "http://etcd-gone.example:2379" {
		t.Fatalf("Unresolved() = %q", got)
	}
	if !check(t, p, "etcd-gone.example", "10.0.0.9:2379") {
		t.Fatal("the unresolved own endpoint was allowed by name")
	}
	if check(t, p, "etcd-gone.example", "10.0.0.9:2380") {
		t.Fatal("another port of the name was refused")
	}
}
