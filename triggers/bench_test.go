package triggers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/internal/testenv"
)

// BenchmarkMap maps a representative set of corpus deliveries.
func BenchmarkMap(b *testing.B) {
	dir := corpusDir(b)
	for _, file := range []string{
		"github/issues.opened.json",
		"github/pull_request.opened.json",
		"github/push.multiple-commits.json",
		"github/issue_comment.created.mention.json",
		"github/workflow_run.completed.json",
		"vercel/deployment.created.sentry-fixture.json",
	} {
		sub, name, _ := strings.Cut(file, "/")
		d := fileDelivery(b, dir, sub, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d.Payload)))
			for b.Loop() {
				if _, err := Map(d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMapBigPush maps a push of 2,048 commits.
func BenchmarkMapBigPush(b *testing.B) {
	d := Delivery{Connector: CodeHost, ID: testDeliveryID, Event: "push", Payload: testenv.Push(2048)}
	b.ReportAllocs()
	b.SetBytes(int64(len(d.Payload)))
	for b.Loop() {
		if _, err := Map(d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeEvent decodes the event of an issues.opened delivery (13.5
// KB payload inline), as the dispatcher does for every event, with
// DecodeEvent and, for comparison, encoding/json.
func BenchmarkDecodeEvent(b *testing.B) {
	res, err := Map(fileDelivery(b, corpusDir(b), "github", "issues.opened.json"))
	if err != nil {
		b.Fatal(err)
	}
	data, err := res.Events[0].AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, dec := range []struct {
		name string
		fn   func([]byte, *Event) error
	}{
		{"DecodeEvent", DecodeEvent},
		{"encoding_json", func(d []byte, e *Event) error { return json.Unmarshal(d, e) }},
	} {
		b.Run(dec.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var e Event
				if err := dec.fn(data, &e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendJSON measures encoding an issue event with its 13.5 KB
// payload inline, as Commit does for every event it publishes.
func BenchmarkAppendJSON(b *testing.B) {
	d := fileDelivery(b, corpusDir(b), "github", "issues.opened.json")
	r, err := Map(d)
	if err != nil || len(r.Events) == 0 {
		b.Fatal(r, err)
	}
	events := r.Events
	b.ReportAllocs()
	b.SetBytes(int64(len(d.Payload)))
	var buf []byte
	for b.Loop() {
		if buf, err = events[0].AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}
