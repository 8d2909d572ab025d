package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/webhook"
)

// The Standard Webhooks specification's own example: a receiver using any
// Standard Webhooks library verifies Gaffer's deliveries.
func TestSignMatchesTheStandardWebhooksExample(t *testing.T) {
	t.Parallel()
	key, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhook.Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

func delivery(keys [][]byte, id string, at time.Time, body string) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, id)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(webhook.HeaderSignature, webhook.Sign(keys, id, at, []byte(body)))
	return h
}

// A receiver refuses a tampered body, another tenant's secret, a captured
// delivery replayed outside the tolerance (or dated in the future), and
// headers with a part missing; during a rotation either secret verifies.
func TestVerifier(t *testing.T) {
	t.Parallel()
	const (
		mine   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		theirs = "whsec_c2VjcmV0LW9mLWFub3RoZXItdGVuYW50LTEyMzQ="
		newer  = "whsec_bmV3ZXItc2VjcmV0LWFmdGVyLWEtcm90YXRpb24h"
	)
	key := func(s string) []byte {
		k, err := webhook.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Unix(1_800_000_000, 0)
	v := webhook.Verifier{Secrets: []string{mine}, Now: func() time.Time { return now }}
	body := `{"order":7}`

	if id, err := v.Verify(delivery([][]byte{key(mine)}, "job_1", now, body), []byte(body)); err != nil || id != "job_1" {
		t.Fatalf("a good delivery: %q, %v", id, err)
	}
	cases := []struct {
		name   string
		h      http.Header
		body   string
		expect error
	}{
		{"tampered body", delivery([][]byte{key(mine)}, "job_1", now, body), `{"order":8}`, webhook.ErrBadSignature},
		{"another tenant's secret", delivery([][]byte{key(theirs)}, "job_1", now, body), body, webhook.ErrBadSignature},
		{"id changed", func() http.Header {
			h := delivery([][]byte{key(mine)}, "job_1", now, body)
			h.Set(webhook.HeaderID, "job_2")
			return h
		}(), body, webhook.ErrBadSignature},
		{"replayed after 6 minutes", delivery([][]byte{key(mine)}, "job_1", now.Add(-6*time.Minute), body), body, webhook.ErrBadTimestamp},
		{"dated 6 minutes ahead", delivery([][]byte{key(mine)}, "job_1", now.Add(6*time.Minute), body), body, webhook.ErrBadTimestamp},
		{"timestamp re-dated to pass", func() http.Header {
			h := delivery([][]byte{key(mine)}, "job_1", now.Add(-time.Hour), body)
			h.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
			return h
		}(), body, webhook.ErrBadSignature},
		{"no signature", func() http.Header {
			h := delivery([][]byte{key(mine)}, "job_1", now, body)
			h.Del(webhook.HeaderSignature)
			return h
		}(), body, webhook.ErrMissingHeaders},
		{"v2 signature only", func() http.Header {
			h := delivery([][]byte{key(mine)}, "job_1", now, body)
			h.Set(webhook.HeaderSignature, strings.Replace(h.Get(webhook.HeaderSignature), "v1,", "v2,", 1))
			return h
		}(), body, webhook.ErrBadSignature},
	}
	for _, c := range cases {
		if _, err := v.Verify(c.h, []byte(c.body)); !errors.Is(err, c.expect) {
			t.Errorf("%s: %v, want %v", c.name, err, c.expect)
		}
	}
	// Within the tolerance either way.
	if _, err := v.Verify(delivery([][]byte{key(mine)}, "job_1", now.Add(-4*time.Minute), body), []byte(body)); err != nil {
		t.Errorf("4 minutes old: %v", err)
	}
	// A rotation: deliveries carry both signatures; a receiver knowing
	// only the old or only the new secret accepts them.
	both := delivery([][]byte{key(newer), key(mine)}, "job_3", now, body)
	if n := len(strings.Fields(both.Get(webhook.HeaderSignature))); n != 2 {
		t.Fatalf("%d signatures during a rotation, want 2", n)
	}
	for _, s := range []string{mine, newer} {
		if _, err := (webhook.Verifier{Secrets: []string{s}, Now: v.Now}).Verify(both, []byte(body)); err != nil {
			t.Errorf("rotation, receiver with %s: %v", s[:12], err)
		}
	}
	if _, err := webhook.ParseSecret("not-a-secret"); err == nil {
		t.Error("a secret without whsec_ parsed")
	}
}
