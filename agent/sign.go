package agent

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

// The Standard Webhooks headers triggerd signs HTTP runs with.
const (
	// HeaderID carries the run id.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the signing time in unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries one or more space-separated signatures,
	// each "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret; the rest is the base64 of the
// HMAC key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a signature's timestamp may be from the
// verifier's clock, either way, when Verify is given no tolerance.
const DefaultTolerance = 5 * time.Minute

// secretBytes is the size of the keys NewSecret makes.
const secretBytes = 32

// Verification errors. Verify wraps them with details; test with errors.Is.
var (
	// ErrMissingHeaders: the webhook-id, webhook-timestamp or
	// webhook-signature header is absent or empty.
	ErrMissingHeaders = errors.New("agent: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrTimestamp: the timestamp is not a unix time, or too far from now.
	ErrTimestamp = errors.New("agent: webhook timestamp rejected")
	// ErrSignature: no signature matches the body under any of the secrets.
	ErrSignature = errors.New("agent: no matching webhook signature")
	// ErrSecret: a signing secret is empty or not base64. Messages wrapping
	// it never contain the secret.
	ErrSecret = errors.New("agent: invalid signing secret")
)

// NewSecret returns a new signing secret: SecretPrefix followed by the
// base64 of 32 random bytes.
func NewSecret() (string, error) {
	key := make([]byte, secretBytes)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("agent: new secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// decodeSecret returns the HMAC key of secret. The prefix is optional, as
// in the Standard Webhooks reference libraries.
func decodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil {
		// The decoder's error names an offset only; keep even that out so
		// that no part of a secret can ever reach a log.
		return nil, fmt.Errorf("%w: not %s followed by base64", ErrSecret, SecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrSecret)
	}
	return key, nil
}

// Sign returns the webhook-signature value for a message with the given id,
// timestamp and body: "v1," + base64(HMAC-SHA256(key, id.timestamp.body)),
// where key is the base64-decoded part of secret. Only the whole seconds of
// ts are signed; send ts.Unix() as the webhook-timestamp header. To sign
// with several secrets while rotating, join their signatures with a space.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)), nil
}

func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks that header carries a valid Standard Webhooks signature of
// body made with one of secrets (several secrets let a receiver rotate its
// own), and that the signature's timestamp is within tolerance of now
// (DefaultTolerance when tolerance is not positive). Every v1 signature in
// the header counts, so a sender rotating its secret can sign with both.
// Comparisons take constant time. The error wraps ErrMissingHeaders,
// ErrTimestamp, ErrSignature or ErrSecret.
//
// Verify does not remember message ids: a receiver that must not act twice
// on a replayed message deduplicates on the webhook-id within the
// tolerance window.
func Verify(secrets []string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secrets) == 0 {
		return fmt.Errorf("%w: none given", ErrSecret)
	}
	keys := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		k, err := decodeSecret(s)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	id, tsText, sigs := header.Get(HeaderID), header.Get(HeaderTimestamp), header.Values(HeaderSignature)
	if id == "" || tsText == "" || strings.TrimSpace(strings.Join(sigs, "")) == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: not a unix time", ErrTimestamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	t := time.Unix(ts, 0)
	if d := now.Sub(t); d > tolerance {
		return fmt.Errorf("%w: %s old, tolerance %s", ErrTimestamp, d.Truncate(time.Second), tolerance)
	}
	if d := t.Sub(now); d > tolerance {
		return fmt.Errorf("%w: %s in the future, tolerance %s", ErrTimestamp, d.Truncate(time.Second), tolerance)
	}
	want := make([][]byte, len(keys))
	for i, k := range keys {
		want[i] = mac(k, id, ts, body)
	}
	for _, v := range sigs {
		for _, sig := range strings.Fields(v) {
			version, enc, ok := strings.Cut(sig, ",")
			if !ok || version != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				continue
			}
			for _, w := range want {
				if hmac.Equal(got, w) {
					return nil
				}
			}
		}
	}
	return ErrSignature
}
