package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com) headers. Every
// call carries webhook-id (stable across an attempt's retries and
// redirects: receivers drop repeats by it) and webhook-timestamp (Unix
// seconds, at sending); webhook-signature when the job's tenant has a
// signing secret: "v1," and the base64 HMAC-SHA256, under the secret's
// key, of "id.timestamp.body" — one such value per secret that still
// signs, space-separated, during a rotation.
const (
	HeaderID        = "Webhook-Id"
	HeaderTimestamp = "Webhook-Timestamp"
	HeaderSignature = "Webhook-Signature"
)

// SecretPrefix begins every signing secret's text: "whsec_" and the
// base64 of its key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock for Verify to accept it.
const DefaultTolerance = 5 * time.Minute

// MessageID is the webhook-id of job id's deliveries: the same for every
// attempt, so receivers drop repeats by it.
func MessageID(jobID int64) string { return "job_" + strconv.FormatInt(jobID, 10) }

// newKey makes a random 32-byte key and its secret text.
func newKey() ([]byte, string) {
	key := make([]byte, 32)
	rand.Read(key)
	return key, SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// ParseSecret returns the key of a "whsec_…" secret.
func ParseSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("a webhook secret starts with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 24 {
		return nil, errors.New("a webhook secret is whsec_ and the base64 of at least 24 bytes")
	}
	return key, nil
}

// Sign returns the webhook-signature value for one delivery: a "v1,"
// signature under each key, space-separated.
func Sign(keys [][]byte, id string, timestamp time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + signature(k, id, timestamp.Unix(), body)
	}
	return strings.Join(sigs, " ")
}

func signature(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Verification errors.
var (
	ErrMissingHeaders = errors.New("webhook: the webhook-id, webhook-timestamp or webhook-signature header is missing")
	ErrBadTimestamp   = errors.New("webhook: the timestamp is malformed or outside the tolerance (a replay, or a skewed clock)")
	ErrBadSignature   = errors.New("webhook: no signature matches")
)

// Verifier checks deliveries on the receiving side. Secrets are the
// "whsec_…" secrets to accept (during a rotation, the old and the new).
type Verifier struct {
	Secrets []string
	// Tolerance bounds how old (or how far in the future) a delivery's
	// timestamp may be. Default DefaultTolerance.
	Tolerance time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Verify checks a delivery's headers and raw body and returns its
// webhook-id (to drop repeats by). It accepts the delivery when its
// timestamp is within the tolerance and any v1 signature matches any
// secret. The body must be the bytes received, before any parsing.
func (v Verifier) Verify(h http.Header, body []byte) (string, error) {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return "", ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", ErrBadTimestamp
	}
	now, tol := time.Now, v.Tolerance
	if v.Now != nil {
		now = v.Now
	}
	if tol == 0 {
		tol = DefaultTolerance
	}
	if d := now().Sub(time.Unix(sec, 0)); d > tol || d < -tol {
		return "", ErrBadTimestamp
	}
	for _, secret := range v.Secrets {
		key, err := ParseSecret(secret)
		if err != nil {
			return "", err
		}
		want := signature(key, id, sec, body)
		for _, got := range strings.Fields(sigs) {
			version, sig, ok := strings.Cut(got, ",")
			if ok && version == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
				return id, nil
			}
		}
	}
	return "", ErrBadSignature
}
