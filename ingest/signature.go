package ingest

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // the deployment platform signs with HMAC-SHA1; it is its wire format.
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrEmptySecret is returned when a verifier would be built with no secret,
// or with an empty one: an empty key would accept forged deliveries.
var ErrEmptySecret = errors.New("ingest: webhook secret is empty")

// Scheme is a webhook signature scheme: how a provider signs a raw body.
type Scheme struct {
	// Header is the HTTP header that carries the signature.
	Header string
	// Prefix is written before the hex digest ("sha256=").
	Prefix  string
	newHash func() hash.Hash
	size    int // of the digest, in bytes
	// shown is how messages spell Header (the provider's spelling), mac
	// names the MAC.
	shown, mac string
}

// The two schemes the ingest server verifies.
var (
	// CodeHostScheme is GitHub's X-Hub-Signature-256:
	// "sha256=" + hex(HMAC-SHA256(secret, raw body)).
	CodeHostScheme = Scheme{Header: "X-Hub-Signature-256", Prefix: "sha256=", newHash: sha256.New, size: sha256.Size,
		shown: "X-Hub-Signature-256", mac: "HMAC-SHA256"}
	// DeployScheme is Vercel's x-vercel-signature:
	// hex(HMAC-SHA1(secret, raw body)), no prefix.
	DeployScheme = Scheme{Header: "X-Vercel-Signature", Prefix: "", newHash: sha1.New, size: sha1.Size,
		shown: "x-vercel-signature", mac: "HMAC-SHA1"}
)

// Sign returns the header value s would send for body signed with secret.
func (s Scheme) Sign(secret, body []byte) string {
	m := hmac.New(s.newHash, secret)
	m.Write(body)
	return s.Prefix + hex.EncodeToString(m.Sum(nil))
}

// Verifier checks signatures of one scheme against one or more secrets, so
// that a secret can be rotated without a window of rejected deliveries.
// Its secrets can be replaced while it verifies (Rotate).
type Verifier struct {
	scheme  Scheme
	secrets atomic.Pointer[[]*keyedMACs]
}

// keyedMACs hands out MACs keyed with one secret. Keying an HMAC costs two
// hash blocks and a handful of allocations (a fifth of Verify's time in a
// profile of triggerd under load); a MAC that was keyed once resets to its
// keyed state by copying it (crypto/hmac keeps the precomputed pads), so
// they are pooled.
type keyedMACs struct{ pool sync.Pool }

func newKeyedMACs(s Scheme, secret []byte) *keyedMACs {
	k := &keyedMACs{}
	k.pool.New = func() any { return hmac.New(s.newHash, secret) }
	return k
}

// NewVerifier returns a verifier accepting a signature made with any of
// secrets. It refuses an empty list and any empty secret.
func NewVerifier(s Scheme, secrets ...string) (*Verifier, error) {
	v := &Verifier{scheme: s}
	if err := v.Rotate(secrets...); err != nil {
		return nil, err
	}
	return v, nil
}

// Rotate replaces the secrets v accepts, at once for every Verify that
// starts after it returns. Like NewVerifier it refuses an empty list and
// any empty secret, and then keeps the secrets it had.
func (v *Verifier) Rotate(secrets ...string) error {
	if len(secrets) == 0 {
		return ErrEmptySecret
	}
	keys := make([]*keyedMACs, 0, len(secrets))
	for _, sec := range secrets {
		if sec == "" {
			return ErrEmptySecret
		}
		keys = append(keys, newKeyedMACs(v.scheme, []byte(sec)))
	}
	v.secrets.Store(&keys)
	return nil
}

// maxDigestSize bounds the digest of every Scheme (SHA-512's, with room to
// spare: GitHub's and Vercel's are SHA-256's and SHA-1's).
const maxDigestSize = 64

// Verify reports whether signature (the header's value) is a valid signature
// of body under one of the verifier's secrets. The comparison is constant
// time for each secret; a missing prefix, a wrong prefix, non-hex text or a
// wrong length fail.
func (v *Verifier) Verify(signature string, body []byte) bool {
	hexSig, ok := strings.CutPrefix(signature, v.scheme.Prefix)
	// The length is the scheme's, not a secret: checking it first keeps
	// the digests below on the stack.
	if !ok || len(hexSig) != 2*v.scheme.size {
		return false
	}
	var want, got [maxDigestSize]byte
	if _, err := hex.Decode(want[:], []byte(hexSig)); err != nil {
		return false
	}
	valid := false
	for _, k := range *v.secrets.Load() {
		m := k.pool.Get().(hash.Hash)
		m.Reset()
		m.Write(body)
		sum := m.Sum(got[:0])
		k.pool.Put(m)
		// Check every secret, so timing does not reveal which one matched.
		if hmac.Equal(want[:v.scheme.size], sum) {
			valid = true
		}
	}
	return valid
}

// Malformed returns "" when header (a signature header's value) has the
// form s needs, its Prefix and then the digest in hex, whatever the digest;
// otherwise it returns a message saying what form the header must have and
// what is wrong with it. The message shows at most a short label of header
// up to its first "=" ("sha1="), never a digest. It costs a scan of the
// header, so call it only to explain a failed Verify.
func (s Scheme) Malformed(header string) string {
	want := fmt.Sprintf("%s must be %q followed by %d hex digits (%s of the raw body)", s.shown, s.Prefix, 2*s.size, s.mac)
	if s.Prefix == "" {
		want = fmt.Sprintf("%s must be %d hex digits (%s of the raw body) with no prefix", s.shown, 2*s.size, s.mac)
	}
	rest, hasPrefix := strings.CutPrefix(header, s.Prefix)
	var got string
	switch label := signatureLabel(header); {
	case label != "" && label != s.Prefix:
		got = fmt.Sprintf("got a value starting %q", label)
	case !hasPrefix:
		got = fmt.Sprintf("got a value without the %q prefix", s.Prefix)
	case len(rest) != 2*s.size:
		got = fmt.Sprintf("got %d characters", len(rest))
		if s.Prefix != "" {
			got = fmt.Sprintf("got %q followed by %d characters", s.Prefix, len(rest))
		}
	case !isHex(rest):
		got = fmt.Sprintf("got %d characters that are not all hex digits", len(rest))
		if s.Prefix != "" {
			got = fmt.Sprintf("got %q followed by %d characters that are not all hex digits", s.Prefix, len(rest))
		}
	default:
		return ""
	}
	return want + "; " + got
}

// Malformed is the verifier's Scheme's Malformed.
func (v *Verifier) Malformed(header string) string { return v.scheme.Malformed(header) }

// mismatch explains a signature that failed Verify: what is malformed in
// it, or else that it does not match, naming where the secret is set
// (secretName). malformed says which.
func (v *Verifier) mismatch(header, secretName string) (msg string, malformed bool) {
	if m := v.Malformed(header); m != "" {
		return m, true
	}
	return v.scheme.shown + " does not match the body: the webhook's secret differs from " + secretName +
		", or the body was changed on the way", false
}

// signatureLabel returns the algorithm label a signature header starts
// with, "=" included ("sha1=", "v1="), or "" when it has none. A label is 1
// to 10 letters, digits, '-' or '_', starting with a letter and not all hex
// digits, so that a piece of a digest or of a secret pasted into the header
// is not taken for one.
func signatureLabel(header string) string {
	i := strings.IndexByte(header, '=')
	if i < 1 || i > 10 || isHex(header[:i]) {
		return ""
	}
	for j := 0; j < i; j++ {
		switch c := header[j]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case j > 0 && ('0' <= c && c <= '9' || c == '-' || c == '_'):
		default:
			return ""
		}
	}
	return header[:i+1]
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}

// SplitSecrets splits a list of secrets separated by commas or line
// breaks (a file may hold one per line), dropping white space around each
// and empty entries.
func SplitSecrets(list string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == '\n' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ErrNoSecret reports a secret file that holds no secret.
var ErrNoSecret = errors.New("the file holds no secret")

// ReadSecretFile reads a file of secrets as triggerd does (SplitSecrets):
// at least one, else ErrNoSecret. A file that cannot be read gives
// os.ReadFile's error (fs.ErrNotExist and the like).
func ReadSecretFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if s := SplitSecrets(string(b)); len(s) > 0 {
		return s, nil
	}
	return nil, ErrNoSecret
}
