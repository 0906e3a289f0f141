package triggers

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

// testDeliveryID is the X-GitHub-Delivery the file-based tests use.
const testDeliveryID = "72d3162e-cc78-11e3-81ab-4c9367dc0958"

// testReceivedAt is the receive time the file-based tests use.
var testReceivedAt = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)

// corpusPath is the shared webhook corpus folder.
var corpusPath = testenv.CorpusPath()

// corpusDir returns the shared webhook corpus folder; when it is absent the
// test is skipped loudly, or fails when CI=true.
func corpusDir(tb testing.TB) string {
	tb.Helper()
	return testenv.Corpus(tb)
}

// projectDir is the project's own webhook testdata folder.
var projectDir = filepath.Join("..", "testdata", "webhooks")

// fileDelivery reads dir/sub/name and returns the delivery a webhook with
// that body would be: for sub "github" a code-hosting delivery whose
// X-GitHub-Event is the name's first dot-separated segment, for "vercel" a
// deployment delivery.
func fileDelivery(tb testing.TB, dir, sub, name string) Delivery {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(dir, sub, name))
	if err != nil {
		tb.Fatal(err)
	}
	if sub == "vercel" {
		return Delivery{Connector: Deploy, ReceivedAt: testReceivedAt, Payload: data}
	}
	event, _, _ := strings.Cut(name, ".")
	return Delivery{Connector: CodeHost, ID: testDeliveryID, Event: event, ReceivedAt: testReceivedAt, Payload: data}
}

// jsonFiles lists the .json files of dir/sub, sorted.
func jsonFiles(tb testing.TB, dir, sub string) []string {
	tb.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// ks builds an expected kind list.
func ks(k ...Kind) []Kind { return k }

// kindsOf returns the kinds of res's events, in order.
func kindsOf(res Result) []Kind {
	out := make([]Kind, len(res.Events))
	for i, e := range res.Events {
		out[i] = e.Kind
	}
	return out
}

// mapChecked maps d, failing the test when Map fails, and checks the
// invariants of the result (checkResult).
func mapChecked(t *testing.T, d Delivery) Result {
	t.Helper()
	res, err := Map(d)
	if err != nil {
		t.Fatalf("Map: %v", err)
	}
	checkResult(t, d, res)
	return res
}

// checkKinds checks that res's events have exactly the kinds want, in
// order.
func checkKinds(t *testing.T, res Result, want []Kind) {
	t.Helper()
	if got := kindsOf(res); !slices.Equal(got, want) {
		if len(got) > 8 || len(want) > 8 {
			t.Errorf("got %d kinds, want %d", len(got), len(want))
		} else {
			t.Errorf("kinds %v, want %v (ignored %q)", got, want, res.Ignored)
		}
	}
}

// checkResult checks the invariants every mapped delivery must satisfy.
func checkResult(t *testing.T, d Delivery, res Result) {
	t.Helper()
	if len(res.Events) == 0 && res.Ignored == "" {
		t.Errorf("no events and no Ignored reason")
	}
	if len(res.Events) > 0 && res.Ignored != "" {
		t.Errorf("events and Ignored %q", res.Ignored)
	}
	if d.Connector == CodeHost {
		if res.DeliveryID != d.ID || res.SourceEvent != d.Event {
			t.Errorf("result delivery %q event %q, want %q %q", res.DeliveryID, res.SourceEvent, d.ID, d.Event)
		}
	}
	counts := map[Kind]int{}
	seen := map[string]bool{}
	for i := range res.Events {
		e := &res.Events[i]
		if !e.Kind.Valid() || e.Kind.Connector() != d.Connector {
			t.Errorf("event %d: kind %q invalid for %q", i, e.Kind, d.Connector)
		}
		if want := EventID(d.Connector, res.DeliveryID, e.Kind, counts[e.Kind]); e.ID != want {
			t.Errorf("event %d: id %s, want %s", i, e.ID, want)
		}
		counts[e.Kind]++
		if seen[e.ID] {
			t.Errorf("event %d: duplicate id %s", i, e.ID)
		}
		seen[e.ID] = true
		if e.Connector != d.Connector || e.DeliveryID != res.DeliveryID || e.SourceEvent != res.SourceEvent ||
			e.Action != res.Action || !e.ReceivedAt.Equal(d.ReceivedAt) {
			t.Errorf("event %d: header %+v does not match result %+v", i, e, res)
		}
		if len(e.Payload) != len(d.Payload) || (len(d.Payload) > 0 && &e.Payload[0] != &d.Payload[0]) {
			t.Errorf("event %d: payload is not the delivery's slice", i)
		}
		if e.Resource.Type == "" {
			t.Errorf("event %d: empty resource type", i)
		}
		if e.Kind == NewMention && e.Resource.Mentioned == "" {
			t.Errorf("event %d: mention without login", i)
		}
		checkSubject(t, e.Subject())
	}
}

// checkSubject checks that subj is "triggers" plus four EncodeToken-safe
// tokens.
func checkSubject(t *testing.T, subj string) {
	t.Helper()
	toks := strings.Split(subj, ".")
	if len(toks) != 5 || toks[0] != SubjectPrefix {
		t.Errorf("subject %q: want 5 tokens starting with %q", subj, SubjectPrefix)
		return
	}
	for _, tok := range toks {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			t.Errorf("subject %q: bad token %q", subj, tok)
		}
		if _, ok := DecodeToken(tok); !ok {
			t.Errorf("subject %q: token %q does not decode", subj, tok)
		}
	}
}

// fileCase is one row of a file-based mapping table.
type fileCase struct {
	name string // "github/<file>" or "vercel/<file>"
	// kinds are the kinds the file must map to, in order; nil means the
	// delivery is ignored.
	kinds []Kind
	// ignored, when set, is the exact Ignored reason expected.
	ignored string
	// subject, when set, is the subject of the first event.
	subject string
	// check, when set, checks further details.
	check func(t *testing.T, res Result)
}

// runFileTable maps every file of dir/github and dir/vercel against cases,
// and fails for a file no case names and for a case naming no file.
func runFileTable(t *testing.T, dir string, cases []fileCase) {
	t.Helper()
	bySub := map[string]map[string]bool{}
	for _, sub := range []string{"github", "vercel"} {
		bySub[sub] = map[string]bool{}
		for _, n := range jsonFiles(t, dir, sub) {
			bySub[sub][n] = true
		}
	}
	named := map[string]bool{}
	for _, tc := range cases {
		sub, file, _ := strings.Cut(tc.name, "/")
		if named[tc.name] {
			t.Errorf("%s named twice", tc.name)
		}
		named[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			if !bySub[sub][file] {
				t.Fatalf("%s: no such file in %s", tc.name, dir)
			}
			res := mapChecked(t, fileDelivery(t, dir, sub, file))
			checkKinds(t, res, tc.kinds)
			if tc.ignored != "" && res.Ignored != tc.ignored {
				t.Errorf("Ignored %q, want %q", res.Ignored, tc.ignored)
			}
			if tc.subject != "" {
				if len(res.Events) == 0 {
					t.Fatalf("no event to check subject %q on", tc.subject)
				}
				if got := res.Events[0].Subject(); got != tc.subject {
					t.Errorf("subject %q, want %q", got, tc.subject)
				}
			}
			if tc.check != nil && !t.Failed() {
				tc.check(t, res)
			}
		})
	}
	for sub, files := range bySub {
		for n := range files {
			if !named[sub+"/"+n] {
				t.Errorf("%s/%s is in %s but not in the table: add a row for it", sub, n, dir)
			}
		}
	}
}

// wantResource compares an event's resource with want.
func wantResource(t *testing.T, e Event, want Resource) {
	t.Helper()
	if !reflect.DeepEqual(e.Resource, want) {
		t.Errorf("%s resource\n got %+v\nwant %+v", e.Kind, e.Resource, want)
	}
}
