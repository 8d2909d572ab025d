package egress

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeResolver answers A and AAAA queries for the names in zone from
// memory, over an in-process pipe: no packet leaves the test. Any other
// name does not exist.
func fakeResolver(t *testing.T, zone map[string][]string) *net.Resolver {
	t.Helper()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(t, server, zone)
		return client, nil
	}}
}

// serveDNS answers the queries on one stream connection (RFC 1035 4.2.2:
// each message after its two-byte length), until the resolver hangs up.
func serveDNS(t *testing.T, c net.Conn, zone map[string][]string) {
	defer c.Close()
	for {
		var n uint16
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		var q dnsmessage.Message
		if err := q.Unpack(msg); err != nil || len(q.Questions) != 1 {
			t.Errorf("fake DNS: bad query: %v", err)
			return
		}
		question := q.Questions[0]
		answer := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true}, Questions: q.Questions}
		addrs, ok := zone[strings.TrimSuffix(question.Name.String(), ".")]
		if !ok {
			answer.RCode = dnsmessage.RCodeNameError
		}
		for _, s := range addrs {
			a := netip.MustParseAddr(s)
			h := dnsmessage.ResourceHeader{Name: question.Name, Class: dnsmessage.ClassINET, TTL: 60}
			switch {
			case a.Is4() && question.Type == dnsmessage.TypeA:
				h.Type = dnsmessage.TypeA
				answer.Answers = append(answer.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AResource{A: a.As4()}})
			case a.Is6() && question.Type == dnsmessage.TypeAAAA:
				h.Type = dnsmessage.TypeAAAA
				answer.Answers = append(answer.Answers, dnsmessage.Resource{Header: h, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
			}
		}
		out, err := answer.Pack()
		if err != nil {
			t.Errorf("fake DNS: %v", err)
			return
		}
		if err := binary.Write(c, binary.BigEndian, uint16(len(out))); err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
