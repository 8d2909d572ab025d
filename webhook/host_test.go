package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/webhook"
)

// The http kind's fairness key and the key its per-host limit counts a
// call under are one host read twice: by Go at enqueue (Args.Host, what
// the client dials) and by SQL in the claim (gaffer.url_host). Where they
// differ, a tenant picks the key its calls count under — the outside
// review's `http://x@<8 KB>@host/` took the host after the first '@' in
// SQL and after the last in Go, and poisoned the claim of its queue. This
// generates URLs from the characters that decide the reading (@ : [ ] / ?
// # % and case), keeps those Validate accepts (refused destinations
// included, but for hosts spelled as the kind never takes), and requires the two readings to be
// equal. CLAIM_HOST_SEED replays a run.
func TestURLHostMatchesSQL(t *testing.T) {
	t.Parallel()
	seed := uint64(rand.Int64())
	if s := os.Getenv("CLAIM_HOST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (CLAIM_HOST_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	h, err := webhook.New(context.Background(), webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pieces := []string{"a", "B", "x", "Z", "0", "9", ".", "-", "_", "@", ":", "[", "]", "/", "?", "#", "%", "%40", "%25", "::1", "fe80::1",
		"example.com", "EXAMPLE.com", "127.0.0.1", "80", "8080", "u", "p", "é", "~", "!", "$", "&", "'", "(", "*", "+", ",", ";", "="}
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	var urls, want []string
	for len(urls) < 3000 {
		var u string
		switch rng.IntN(3) {
		case 0: // the shape of a URL, with parts made of the pieces
			u = []string{"http", "https", "HTTP", "hTtPs"}[rng.IntN(4)] + "://"
			if rng.IntN(2) == 0 {
				u += word(rng.IntN(6)) + "@"
			}
			if rng.IntN(3) == 0 {
				u += word(rng.IntN(4)) + "@"
			}
			if rng.IntN(4) == 0 {
				u += "[" + word(1+rng.IntN(4)) + "]"
			} else {
				u += word(1 + rng.IntN(5))
			}
			if rng.IntN(2) == 0 {
				u += ":" + []string{"80", "8080", "", "0080", word(1)}[rng.IntN(5)]
			}
			u += word(rng.IntN(6))
		case 1: // the outside review's attack, and its cousins
			u = fmt.Sprintf("http://%s@%s@%s/%s", word(2), strings.Repeat(word(1), 1+rng.IntN(300)), word(1+rng.IntN(3)), word(3))
		default: // anything after a scheme
			u = "http://" + word(1+rng.IntN(12))
		}
		raw, _ := json.Marshal(map[string]string{"url": u})
		a, _, err := h.Validate(raw)
		var de *webhook.DestinationError
		if err != nil && !errors.As(err, &de) {
			continue
		}
		if err != nil {
			// A refused destination still parses: read it as Go does,
			// unless its host's spelling is one the kind refuses too (an
			// IPv6 zone, a percent escape): such a URL is never stored,
			// whatever its address.
			a = webhook.Args{URL: u}
			if webhook.CheckHost(a.Host()) != nil {
				continue
			}
		}
		urls = append(urls, u)
		want = append(want, a.Host())
	}
	st := pgtest.NewStore(t)
	rows, err := st.Pool().Query(context.Background(), `SELECT gaffer.url_host(u) FROM unnest($1::text[]) WITH ORDINALITY AS x(u, i) ORDER BY i`, urls)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i, bad := 0, 0
	for rows.Next() {
		var got *string
		if err := rows.Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == nil || *got != want[i] {
			if bad++; bad <= 10 {
				t.Errorf("%q: Go reads host %q, SQL %v", urls[i], want[i], deref(got))
			}
		}
		i++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Fatalf("%d of %d accepted URLs read differently (seed %d)", bad, len(urls), seed)
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return strconv.Quote(*s)
}

// A host longer than a DNS name, or not in its one spelling, is refused
// where the job enters, with a 4xx, not stored: a host over ~2.6 KB once
// became a fairness key too large for the claim index (a 500 at enqueue).
func TestValidateRefusesHostsOutOfTheirOneSpelling(t *testing.T) {
	t.Parallel()
	h, err := webhook.New(context.Background(), webhook.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{
		"http://" + strings.Repeat("a", 3000) + ".example.com/",
		"http://" + strings.Repeat("a", 250) + ".com/",
		"http://example.com./", "http://ÄÖ.example/",
	} {
		_, _, err := h.Validate(json.RawMessage(fmt.Sprintf(`{"url":%q}`, u)))
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != "args.url" {
			t.Errorf("Validate(%.60s…) = %v, want an args.url error", u, err)
		}
	}
	for _, u := range []string{"https://Example.COM/x", "https://xn--bcher-kva.example/", "http://user:p%40ss@example.com:8080/a@b"} {
		if _, _, err := h.Validate(json.RawMessage(fmt.Sprintf(`{"url":%q}`, u))); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", u, err)
		}
	}
}
