package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/triggerd/triggerd/internal/testenv"
)

// corpusDir is the shared webhook corpus, read in place (never copied).
var corpusDir = testenv.CorpusPath()

// requireCorpus skips loudly when the shared corpus is absent, and fails
// under CI, where it must be present.
func requireCorpus(t *testing.T) {
	t.Helper()
	testenv.Corpus(t)
}

func TestSignatureVectors(t *testing.T) {
	t.Run("github docs vector", func(t *testing.T) {
		// From GitHub's "Validating webhook deliveries".
		v, err := NewVerifier(CodeHostScheme, "It's a Secret to Everybody")
		if err != nil {
			t.Fatal(err)
		}
		const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
		if got := CodeHostScheme.Sign([]byte("It's a Secret to Everybody"), []byte("Hello, World!")); got != want {
			t.Fatalf("Sign = %s, want %s", got, want)
		}
		if !v.Verify(want, []byte("Hello, World!")) {
			t.Fatal("the documented vector does not verify")
		}
	})
	requireCorpus(t)
	for _, tc := range []struct{ file, sig string }{
		{"deployment.created.sentry-fixture.json", "cecad6333f8652af7d4e9c7b6ad87f1c922a76d3"},
		{"deployment.legacy-v1.sentry-fixture.json", "74b587857986545361e8a4253b74cd6224d34869"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(corpusDir, "vercel", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewVerifier(DeployScheme, "AiK52QASLJXmCXX3X9gO2Zyh")
			if err != nil {
				t.Fatal(err)
			}
			if !v.Verify(tc.sig, body) {
				t.Fatal("the corpus vector does not verify")
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	body := []byte(`{"action":"opened","number":1}`)
	secret := "s3cret"
	good := CodeHostScheme.Sign([]byte(secret), body)
	v, err := NewVerifier(CodeHostScheme, secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sig  string
		body []byte
	}{
		{"flipped body byte", good, []byte(`{"action":"opened","number":2}`)},
		{"re-serialised json", good, []byte(`{"action": "opened", "number": 1}`)},
		{"sha1 prefix", "sha1=" + strings.TrimPrefix(good, "sha256="), body},
		{"no prefix", strings.TrimPrefix(good, "sha256="), body},
		{"empty", "", body},
		{"prefix only", "sha256=", body},
		{"non-hex", "sha256=" + strings.Repeat("zz", 32), body},
		{"truncated", good[:len(good)-2], body},
		{"too long", good + "00", body},
		{"other secret", CodeHostScheme.Sign([]byte("other"), body), body},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v.Verify(tc.sig, tc.body) {
				t.Fatalf("Verify(%q) accepted a bad signature", tc.sig)
			}
		})
	}
	if !v.Verify("sha256="+strings.ToUpper(strings.TrimPrefix(good, "sha256=")), body) {
		t.Fatal("upper-case hex of the right digest was refused")
	}
}

// TestVerifyReusesMACsSafely verifies many bodies, good and forged, under
// two secrets from several goroutines at once: a MAC reused for the next
// delivery must start from its key, whatever the last one hashed.
func TestVerifyReusesMACsSafely(t *testing.T) {
	v, err := NewVerifier(CodeHostScheme, "first", "second")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				body := []byte(fmt.Sprintf(`{"goroutine":%d,"delivery":%d}`, g, i))
				secret := []string{"first", "second", "forged"}[i%3]
				got := v.Verify(CodeHostScheme.Sign([]byte(secret), body), body)
				if want := secret != "forged"; got != want {
					t.Errorf("goroutine %d, delivery %d signed with %q: Verify = %v, want %v", g, i, secret, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestVerifierRotation(t *testing.T) {
	body := []byte(`{}`)
	v, err := NewVerifier(DeployScheme, SplitSecrets(" new-secret , old-secret ,")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"new-secret", "old-secret"} {
		if !v.Verify(DeployScheme.Sign([]byte(s), body), body) {
			t.Fatalf("a delivery signed with %s was refused during rotation", s)
		}
	}
	// Rotated in place: the old secret stops verifying, the new goes on.
	if err := v.Rotate("new-secret"); err != nil {
		t.Fatal(err)
	}
	if v.Verify(DeployScheme.Sign([]byte("old-secret"), body), body) {
		t.Fatal("the removed secret still verifies")
	}
	if !v.Verify(DeployScheme.Sign([]byte("new-secret"), body), body) {
		t.Fatal("the kept secret no longer verifies")
	}
	// A rotation to nothing is refused and changes nothing.
	for _, secrets := range [][]string{nil, {"", "x"}} {
		if err := v.Rotate(secrets...); !errors.Is(err, ErrEmptySecret) {
			t.Fatalf("Rotate(%q) = %v, want ErrEmptySecret", secrets, err)
		}
	}
	if !v.Verify(DeployScheme.Sign([]byte("new-secret"), body), body) || v.Verify(DeployScheme.Sign([]byte("x"), body), body) {
		t.Fatal("a refused rotation changed the secrets")
	}
}

// TestRotateWhileVerifying rotates while deliveries are verified (run
// with -race): every Verify sees one set of secrets or the other.
func TestRotateWhileVerifying(t *testing.T) {
	body := []byte(`{"a":1}`)
	v, err := NewVerifier(CodeHostScheme, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	sig := CodeHostScheme.Sign([]byte("b"), body)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if i%2 == 0 {
				v.Rotate("b", "c")
			} else {
				v.Rotate("a", "b")
			}
		}
	}()
	for range 2000 {
		if !v.Verify(sig, body) {
			t.Fatal("a secret kept by every rotation failed to verify")
		}
	}
	<-done
}

func TestEmptySecretsRefused(t *testing.T) {
	for _, secrets := range [][]string{nil, {""}, {"ok", ""}, SplitSecrets(" , ")} {
		if _, err := NewVerifier(CodeHostScheme, secrets...); !errors.Is(err, ErrEmptySecret) {
			t.Fatalf("NewVerifier(%q) = %v, want ErrEmptySecret", secrets, err)
		}
	}
}

// BenchmarkVerify measures checking the signature of an 11.6 KB delivery
// (the minified issues.opened payload's size) against one secret.
func BenchmarkVerify(b *testing.B) {
	body := bytes.Repeat([]byte(`{"a":"0123456789"}`), 11600/18)
	v, err := NewVerifier(CodeHostScheme, "bench-secret")
	if err != nil {
		b.Fatal(err)
	}
	sig := CodeHostScheme.Sign([]byte("bench-secret"), body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !v.Verify(sig, body) {
			b.Fatal("rejected a good signature")
		}
	}
}

func TestMalformed(t *testing.T) {
	body := []byte(`{"action":"opened","number":1}`)
	good := CodeHostScheme.Sign([]byte("s3cret"), body)
	digest := strings.TrimPrefix(good, "sha256=")
	sha1Digest := DeployScheme.Sign([]byte("s3cret"), body)
	for _, tc := range []struct {
		name   string
		scheme Scheme
		header string
		want   []string // substrings of the message; none for well-formed
	}{
		{"code hosting, well-formed", CodeHostScheme, good, nil},
		{"code hosting, upper-case hex", CodeHostScheme, "sha256=" + strings.ToUpper(digest), nil},
		{"code hosting, well-formed other secret", CodeHostScheme, CodeHostScheme.Sign([]byte("other"), body), nil},
		{"code hosting, sha1 label", CodeHostScheme, "sha1=" + sha1Digest,
			[]string{`X-Hub-Signature-256 must be "sha256=" followed by 64 hex digits (HMAC-SHA256 of the raw body)`, `got a value starting "sha1="`}},
		{"code hosting, upper-case label", CodeHostScheme, "SHA256=" + digest, []string{`got a value starting "SHA256="`}},
		{"code hosting, no prefix", CodeHostScheme, digest, []string{`got a value without the "sha256=" prefix`}},
		{"code hosting, short digest", CodeHostScheme, "sha256=" + sha1Digest, []string{`got "sha256=" followed by 40 characters`}},
		{"code hosting, prefix only", CodeHostScheme, "sha256=", []string{`got "sha256=" followed by 0 characters`}},
		{"code hosting, non-hex", CodeHostScheme, "sha256=" + strings.Repeat("zz", 32), []string{"64 characters that are not all hex digits"}},
		{"code hosting, empty", CodeHostScheme, "", []string{`without the "sha256=" prefix`}},
		{"deployment, well-formed", DeployScheme, sha1Digest, nil},
		{"deployment, sha1 label", DeployScheme, "sha1=" + sha1Digest,
			[]string{"x-vercel-signature must be 40 hex digits (HMAC-SHA1 of the raw body) with no prefix", `got a value starting "sha1="`}},
		{"deployment, sha256 digest", DeployScheme, digest, []string{"got 64 characters"}},
		{"deployment, non-hex", DeployScheme, strings.Repeat("g", 40), []string{"got 40 characters that are not all hex digits"}},
		// Only a short label that is not hex is shown: never a digest or a
		// secret that happens to contain "=".
		{"deployment, long label", DeployScheme, "averylongsecretvalue=" + sha1Digest, []string{"got 61 characters"}},
		{"deployment, hex before =", DeployScheme, "deadbeef=" + sha1Digest, []string{"got 49 characters"}},
		{"deployment, base64 padding", DeployScheme, "q83vEjRWeJA=", []string{"got 12 characters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.scheme.Malformed(tc.header)
			if tc.want == nil {
				if msg != "" {
					t.Fatalf("Malformed(%q) = %q, want \"\" for a well-formed header", tc.header, msg)
				}
				return
			}
			if msg == "" {
				t.Fatalf("Malformed(%q) = \"\", want a message", tc.header)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Malformed(%q) = %q, want it to contain %q", tc.header, msg, w)
				}
			}
			for _, d := range []string{digest[:8], sha1Digest[:8], "averylong", "deadbeef", "q83vEjRW"} {
				if strings.Contains(strings.ToLower(msg), strings.ToLower(d)) {
					t.Errorf("Malformed(%q) = %q shows part of the value (%q)", tc.header, msg, d)
				}
			}
		})
	}
	// The Verifier's Malformed is its scheme's, and a header it calls
	// well-formed is one Verify decodes: Verify then fails only on the MAC.
	v, err := NewVerifier(CodeHostScheme, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if msg := v.Malformed("sha1=" + sha1Digest); !strings.Contains(msg, "X-Hub-Signature-256 must be") {
		t.Fatalf("Verifier.Malformed = %q, want the code-hosting scheme's message", msg)
	}
	if v.Malformed(good) != "" || !v.Verify(good, body) {
		t.Fatal("a good signature is malformed or refused")
	}
}
