package auth_test

import (
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/auth"
)

func TestClientAddr(t *testing.T) {
	proxies, err := auth.ParseTrustedProxies("10.0.0.0/8, 192.168.1.5, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		proxies *auth.TrustedProxies
		peer    string
		xff     []string
		xfp     string
		want    string
		https   bool
	}{
		{nil, "203.0.113.7:5000", []string{"198.51.100.1"}, "https", "203.0.113.7", false},
		{proxies, "203.0.113.7:5000", []string{"198.51.100.1"}, "https", "203.0.113.7", false},
		{proxies, "10.1.2.3:5000", nil, "", "10.1.2.3", false},
		{proxies, "10.1.2.3:5000", []string{"198.51.100.1"}, "https", "198.51.100.1", true},
		{proxies, "10.1.2.3:5000", []string{"6.6.6.6, 198.51.100.1, 10.9.9.9"}, "http, https", "198.51.100.1", true},
		{proxies, "10.1.2.3:5000", []string{"6.6.6.6", "198.51.100.1:4711"}, "https, http", "198.51.100.1", false},
		{proxies, "10.1.2.3:5000", []string{"6.6.6.6, not-an-ip"}, "", "10.1.2.3", false},
		{proxies, "10.1.2.3:5000", []string{"192.168.1.5, 10.0.0.1"}, "", "192.168.1.5", false},
		{proxies, "[fd00::1]:5000", []string{"2001:db8::7"}, "HTTPS", "2001:db8::7", true},
		{proxies, "[::ffff:10.1.2.3]:5000", []string{"198.51.100.1"}, "", "198.51.100.1", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if c.xfp != "" {
			r.Header.Set("X-Forwarded-Proto", c.xfp)
		}
		if got := c.proxies.ClientAddr(r); got != netip.MustParseAddr(c.want) {
			t.Errorf("peer %s, X-Forwarded-For %q: client %s, want %s", c.peer, c.xff, got, c.want)
		}
		if got := c.proxies.HTTPS(r); got != c.https {
			t.Errorf("peer %s, X-Forwarded-Proto %q: https %v, want %v", c.peer, c.xfp, got, c.https)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8,,nope"} {
		if _, err := auth.ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The limiter's memory is bounded: an attacker with a million addresses
// cannot make it track more than MaxAddresses; beyond that they share one
// overflow bucket, which runs dry like any other. Red without the cap:
// every address got an entry.
func TestFailureLimiterIsBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := auth.NewFailureLimiter(auth.FailureLimiterConfig{Burst: 3, Every: time.Second, MaxAddresses: 100})
	l.SetClock(func() time.Time { return now })
	for i := range 20000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.Fail(a)
	}
	if n := l.Tracked(); n > 100 {
		t.Fatalf("tracking %d addresses, cap 100", n)
	}
	if _, blocked := l.Blocked(netip.MustParseAddr("192.0.2.1")); !blocked {
		t.Fatal("the overflow bucket did not run dry under 19,900 failures")
	}
	// Buckets refill; refilled addresses are forgotten, making room again.
	now = now.Add(5 * time.Second)
	l.Fail(netip.MustParseAddr("192.0.2.1"))
	if n := l.Tracked(); n != 1 {
		t.Fatalf("after every bucket refilled: tracking %d addresses, want 1", n)
	}
}

func TestFailureLimiterBuckets(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := auth.NewFailureLimiter(auth.FailureLimiterConfig{Burst: 2, Every: 10 * time.Second})
	l.SetClock(func() time.Time { return now })
	a := netip.MustParseAddr("2001:db8:1:2::7")
	l.Fail(a)
	if _, blocked := l.Blocked(a); blocked {
		t.Fatal("blocked after 1 failure of 2")
	}
	// The same /64 is the same subscriber.
	l.Fail(netip.MustParseAddr("2001:db8:1:2:ffff::1"))
	wait, blocked := l.Blocked(a)
	if !blocked || wait != 10*time.Second {
		t.Fatalf("after 2 failures in one /64: blocked %v for %s, want 10s", blocked, wait)
	}
	if _, blocked := l.Blocked(netip.MustParseAddr("2001:db8:1:3::7")); blocked {
		t.Fatal("another /64 is blocked")
	}
	now = now.Add(4 * time.Second)
	if wait, _ := l.Blocked(a); (wait - 6*time.Second).Abs() > time.Millisecond {
		t.Fatalf("4s later: wait %s, want 6s", wait)
	}
	now = now.Add(6 * time.Second)
	if _, blocked := l.Blocked(a); blocked {
		t.Fatal("still blocked once a failure refilled")
	}
}
