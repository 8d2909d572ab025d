package redact

import (
	"strings"
	"testing"
)

func TestURLs(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`Post "https://bob:hunter2@api.example.com/hook?token=s3cret&x=1": dial tcp: refused`: `Post "https://bob:***@api.example.com/hook?token=***&x=***": dial tcp: refused`,
		`GET http://key@h.test/p failed`:                    `GET http://***@h.test/p failed`,
		`no url here`:                                       `no url here`,
		`https://h.test/path only`:                          `https://h.test/path only`,
		`postgres://gaffer:pw@db:5432/gaffer?sslmode=off`:   `postgres://gaffer:***@db:5432/gaffer?sslmode=***`,
		`see https://h.test/a?b#frag`:                       `see https://h.test/a?b=***#***`,
		`two: http://a:b@x.test and http://c:d@y.test/?q=1`: `two: http://a:***@x.test and http://c:***@y.test/?q=***`,
		`bad http://u:p@[::1%zz/x?k=v`:                      `bad http://***@[::1%zz/x?***`,
	}
	for in, want := range cases {
		if got := URLs(in); got != want {
			t.Errorf("URLs(%q)\n got %q\nwant %q", in, got, want)
		}
	}
}

func TestWriter(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	w := Writer(&b)
	w.Write([]byte("2026 [INFO] postgres started: url=postgres://g:pw@db/g?password=x\n"))
	w.Write([]byte("plain line\n"))
	if got := b.String(); strings.Contains(got, "pw@") || strings.Contains(got, "=x") || !strings.Contains(got, "plain line") {
		t.Fatalf("got %q", got)
	}
}
