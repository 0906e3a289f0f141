package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// BenchmarkVerifyAndMap measures what the ingest path does to a delivery
// before it reaches NATS: the signature check over the raw body and the
// mapping onto events, per file of the shared corpus and of the project's
// testdata (one file per kind or variant). Together the files produce
// every kind a webhook delivers; the benchmark fails when one is missing.
func BenchmarkVerifyAndMap(b *testing.B) {
	testenv.Corpus(b)
	benched := map[triggers.Kind]bool{}
	for _, dir := range []string{corpusDir, filepath.Join("..", "testdata", "webhooks")} {
		for _, sub := range []string{"github", "vercel"} {
			files, _ := filepath.Glob(filepath.Join(dir, sub, "*.json"))
			if len(files) == 0 {
				b.Fatalf("no files in %s", filepath.Join(dir, sub))
			}
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
				d := triggers.Delivery{Connector: conn, ID: "d", Event: event, ReceivedAt: time.Time{}, Payload: body}
				res, err := triggers.Map(d)
				if err != nil {
					b.Fatalf("%s: %v", f, err)
				}
				for _, e := range res.Events {
					benched[e.Kind] = true
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
						if _, err := triggers.Map(d); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
	for _, k := range triggers.Kinds() {
		if k.Webhook && !benched[k.Kind] {
			b.Errorf("no benchmarked file maps to %s", k.Kind)
		}
	}
}
