// Package egress is the outbound guard: it decides which network
// destinations the cluster may connect to on a tenant's behalf (today the
// built-in "http" job kind; anything that calls out for a tenant later).
//
// The decision is made at dial time, on the address actually being
// connected (a net.Dialer Control function sees the resolved ip:port), so
// a name that resolves inside, every redirect hop and DNS rebinding are
// all covered by one check. Refused unless opened by the operator:
//
//   - loopback, unspecified (0.0.0.0, ::), 0.0.0.0/8
//   - private (10/8, 172.16/12, 192.168/16), CGNAT 100.64/10,
//     link-local (169.254/16 including 169.254.169.254, fe80::/10),
//     IPv6 unique local fc00::/7 and site-local fec0::/10
//   - multicast, broadcast and reserved (224/4, 240/4, ff00::/8),
//     192.0.0.0/24, 198.18/15, 100::/64, 64:ff9b:1::/48
//   - the IPv6 forms that carry one of the IPv4 ranges above: IPv4-mapped
//     and IPv4-compatible, SIIT, NAT64 64:ff9b::/96, 6to4 2002::/16 and
//     Teredo 2001::/32 (server and client addresses)
//   - the node's own endpoints (its API, PostgreSQL and etcd), even on
//     public addresses; and their ports on every address of this host —
//     all of 127.0.0.0/8 and ::1, 0.0.0.0 and ::, each interface address
//     (listed at each check) — and of the operator's OwnHosts (a NAT's
//     public address), since a service bound to every interface answers
//     on each of them.
//
// Operators open destinations with allow rules (--webhook-allow): a CIDR
// or address opens those addresses, a host name opens the addresses it
// resolves to, and host:port opens just that port. Only an exact
// host:port rule opens one of the node's own endpoints.
//
// What the package must never do: connect before deciding, resolve names
// to make an enqueue-time decision (CheckLiteral looks only at the
// spelling), or say in an error why an address was refused — every
// refusal has one text (ErrBlocked), so a tenant cannot map what listens
// behind the guard. The reason is kept in BlockedError for the operator's
// log.
package egress
