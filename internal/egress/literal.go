package egress

import (
	"fmt"
	"net/netip"
)

// SpellingError is CheckLiteral's error for a host that is a number in a
// non-canonical spelling ("2130706433", "0x7f.1", "0177.0.0.1", "127.1"):
// some resolvers read it as an address, so it is refused whatever it
// would reach.
type SpellingError struct{ Host string }

func (e *SpellingError) Error() string {
	return fmt.Sprintf("host %q is a number in a non-canonical spelling; write an IPv4 address as four decimal numbers (a.b.c.d)", e.Host)
}

var loopbacks = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}

// CheckLiteral decides, from its spelling alone, whether host (a URL's
// host, without brackets) and port are a destination p refuses: an IP
// address in any spelling, or localhost and names under it (which mean
// loopback). Any other name returns nil without being resolved; Check
// decides on its addresses at dial time. Errors are *BlockedError for a
// refused address and *SpellingError for a non-canonical number.
func (p *Policy) CheckLiteral(host string, port uint16) error {
	name, a, isIP := canonicalHost(host)
	switch {
	case isIP:
		return p.Check(name, netip.AddrPortFrom(a, port))
	case numericSpelling(name):
		return &SpellingError{Host: host}
	case isLocalhost(name):
		for _, a := range loopbacks {
			if err := p.Check(name, netip.AddrPortFrom(a, port)); err != nil {
				return err
			}
		}
	}
	return nil
}
