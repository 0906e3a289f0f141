package ingest

import (
	"github.com/triggerd/triggerd/internal/testenv"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/triggers"
)

// BenchmarkVerifyAndMap measures what the ingest path does to a delivery
// before it reaches NATS: the signature check over the raw body and the
// mapping onto events, per corpus file (one file per kind or variant).
func BenchmarkVerifyAndMap(b *testing.B) {
	testenv.Corpus(b)
	for _, sub := range []string{"github", "vercel"} {
		files, _ := filepath.Glob(filepath.Join(corpusDir, sub, "*.json"))
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			event, _, _ := strings.Cut(name, ".")
			scheme, conn, secret := CodeHostScheme, triggers.CodeHost, "bench-secret"
			if sub == "vercel" {
				scheme, conn, event = DeployScheme, triggers.Deploy, ""
			}
			v, _ := NewVerifier(scheme, secret)
			sig := scheme.Sign([]byte(secret), body)
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if !v.Verify(sig, body) {
						b.Fatal("signature refused")
					}
					if _, err := triggers.Map(triggers.Delivery{Connector: conn, ID: "d", Event: event, ReceivedAt: time.Time{}, Payload: body}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
