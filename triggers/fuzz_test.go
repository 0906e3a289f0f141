package triggers

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// addFileSeeds adds every file of dir/github and dir/vercel, when dir
// exists, as a FuzzMap seed.
func addFileSeeds(f *testing.F, dir string) {
	for _, sub := range []string{"github", "vercel"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			continue // an absent corpus only means fewer seeds
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dir, sub, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			event, _, _ := strings.Cut(e.Name(), ".")
			f.Add(sub == "vercel", event, data)
		}
	}
}

// FuzzMap checks that Map never panics, returns only *PayloadError errors,
// and that every event it returns has a valid kind, an id and a well-formed
// subject.
func FuzzMap(f *testing.F) {
	addFileSeeds(f, corpusPath)
	addFileSeeds(f, projectDir)
	f.Add(false, "issues", []byte(`{"action":"opened","issue":{"body":"@a `+"`@b`"+` > @c"},"repository":{"name":"x.y","owner":{"login":"A B"}}}`))
	f.Add(false, "push", []byte(`{"ref":"refs/tags/v1","commits":[{"id":"1","distinct":true}]}`))
	f.Add(true, "", []byte(`{"id":"u","type":"deployment.ready","payload":{"team":{"id":"t.*>"},"project":{"id":" "}}}`))
	// Small seeds mutate into more shapes than the large files do.
	f.Add(false, "issue_comment", []byte(`{"action":"created","issue":{"number":1},"comment":{"id":2,"body":"`+"```\n@x\n```\n> @y\n@z"+`"},"sender":{"login":"z"}}`))
	f.Add(false, "pull_request", []byte(`{"action":"review_requested","pull_request":{"id":1},"requested_team":{"slug":"core"},"organization":{"login":"O"}}`))
	f.Add(false, "pull_request_review", []byte(`{"action":"submitted","pull_request":{"number":1},"review":{"state":"CHANGES_REQUESTED","body":null}}`))
	f.Add(false, "projects_v2_item", []byte(`{"action":"edited","projects_v2_item":{"id":1},"changes":{"field_value":{"field_type":"single_select","field_name":"Status","from":{"name":"A"},"to":"B"}}}`))
	f.Add(false, "create", []byte(`{"ref":"v1","ref_type":"tag","repository":{"full_name":"a/b.c"}}`))
	f.Fuzz(func(t *testing.T, deploy bool, event string, payload []byte) {
		d := Delivery{Connector: CodeHost, ID: "fuzz-delivery", Event: event, Payload: payload}
		if deploy {
			d.Connector, d.ID, d.Event = Deploy, "", ""
		}
		res, err := Map(d)
		if err != nil {
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PayloadError", err)
			}
			if len(res.Events) != 0 {
				t.Fatalf("%d events with an error", len(res.Events))
			}
			return
		}
		// The payload is spliced into events as raw bytes, so whatever the
		// (fast) decoder accepts must be valid JSON to the standard library.
		if !json.Valid(payload) {
			t.Fatalf("Map accepted a payload encoding/json calls invalid: %q", payload)
		}
		if (len(res.Events) == 0) == (res.Ignored == "") {
			t.Fatalf("%d events, Ignored %q", len(res.Events), res.Ignored)
		}
		for i := range res.Events {
			e := &res.Events[i]
			if !e.Kind.Valid() || e.Kind.Connector() != d.Connector {
				t.Fatalf("event %d: kind %q", i, e.Kind)
			}
			if e.ID == "" {
				t.Fatalf("event %d: empty id", i)
			}
			subj := e.Subject()
			toks := strings.Split(subj, ".")
			if len(toks) != 5 {
				t.Fatalf("subject %q: %d tokens", subj, len(toks))
			}
			for _, tok := range toks {
				if tok == "" || strings.ContainsAny(tok, "*>") || strings.ContainsFunc(tok, unicode.IsSpace) {
					t.Fatalf("subject %q: bad token %q", subj, tok)
				}
			}
			b, err := e.MarshalJSON()
			if err != nil || !json.Valid(b) {
				t.Fatalf("event %d: MarshalJSON %v, valid %v", i, err, json.Valid(b))
			}
		}
	})
}

// FuzzEncodeToken checks that EncodeToken is reversible and only writes
// [A-Za-z0-9_%~-].
func FuzzEncodeToken(f *testing.F) {
	for _, s := range []string{"", "socket.io", "~", "%", "%2E", "a b", "*", ">", "é", "\x00", "Hello-World_1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EncodeToken(s)
		if tok == "" {
			t.Fatalf("EncodeToken(%q) is empty", s)
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; !tokenSafe(c) && c != '%' && c != '~' {
				t.Fatalf("EncodeToken(%q) = %q: byte %q", s, tok, c)
			}
		}
		back, ok := DecodeToken(tok)
		if !ok || back != s {
			t.Fatalf("DecodeToken(EncodeToken(%q)) = %q, %v", s, back, ok)
		}
	})
}
