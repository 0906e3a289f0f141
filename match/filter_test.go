package match

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/triggerd/triggerd/triggers"
)

func TestFilters(t *testing.T) {
	cases := []struct {
		name   string
		filter string
		want   string // Matched, or the filtered_out reason's prefix
	}{
		{"labels on the envelope", "event.resource.labels.exists(l, l == 'bug')", Matched},
		{"labels absent", "event.resource.labels.exists(l, l == 'security')", "filter: event.resource.labels.exists(l, l == 'security') is false"},
		{"payload field", "event.payload.issue.user.login == 'octocat'", Matched},
		{"payload number as int", "event.payload.issue.number == 7 && event.payload.issue.user.id > 1000", Matched},
		{"envelope fields", "event.kind == 'new_issue' && event.connector == 'codehost' && event.repository.full_name == 'octo-org/api' && event.action == 'opened' && event.sender == 'octocat'", Matched},
		{"received_at", "timestamp(event.received_at) > timestamp('2024-01-01T00:00:00Z')", Matched},
		{"has()", "has(event.payload.issue.assignee)", "filter: has(event.payload.issue.assignee) is false"},
		{"dyn result that is bool", "event.payload.issue.labels[0].name == 'bug' && event.payload.issue.user.login in ['octocat']", Matched},
		{"missing key is an error", "event.payload.pull_request.number == 1", "filter error: no such key: pull_request"},
		{"dyn non-bool result", "event.payload.issue.title", "filter error: result is string, not bool"},
		{"cost limit", "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, a+b+c+d+e > 0)))))",
			"filter error: operation cancelled: actual cost limit exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := sharedIndex()
			tr := trig("t", triggers.NewIssue, Params{})
			tr.Filter = tc.filter
			mustPut(t, x, tr)
			out := x.Match(issueEvent("octo-org/api", "bug"))
			if len(out) != 1 {
				t.Fatalf("%d outcomes", len(out))
			}
			o := out[0]
			if tc.want == Matched {
				if o.Result != Matched {
					t.Fatalf("outcome %+v, want matched", o)
				}
				return
			}
			if o.Result != FilteredOut || !strings.HasPrefix(o.Reason, tc.want) {
				t.Fatalf("outcome %+v, want filtered_out with reason %q", o, tc.want)
			}
		})
	}
}

func TestFilterWithoutPayload(t *testing.T) {
	x := sharedIndex()
	tr := trig("t", triggers.NewIssue, Params{})
	tr.Filter = "event.payload == null && event.resource.number == 7"
	mustPut(t, x, tr)
	ev := issueEvent("octo-org/api")
	ev.Payload = nil
	wantResults(t, x.Match(ev), map[string]string{"t": Matched})
}

func TestFilterRefusedAtPut(t *testing.T) {
	cases := []struct{ filter, want string }{
		{"event.resource.number + 1", "filter must be a boolean expression"},
		{"'text'", "filter must be a boolean expression, but \"'text'\" yields string"},
		{"1 +", "filter does not compile"},
		{"other.thing == 1", "undeclared reference to 'other'"},
		{"event.kind == 1 &&", "filter does not compile"},
		{strings.Repeat("true && ", 1000) + "true", "the limit is 4096"},
	}
	x := sharedIndex()
	for _, tc := range cases {
		tr := trig("t", triggers.NewIssue, Params{})
		tr.Filter = tc.filter
		err := x.Put(tr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Put(filter %.40q): error %v, want it to contain %q", tc.filter, err, tc.want)
		}
	}
	if x.Len() != 0 {
		t.Errorf("Len = %d after refused Puts", x.Len())
	}
}

func TestEventDecodedAtMostOncePerMatch(t *testing.T) {
	cases := []struct {
		name string
		// setup returns the trigger to put for i.
		setup func(i int) Trigger
		want  int64
	}{
		{"many filters, all false", func(i int) Trigger {
			tr := trig(fmt.Sprintf("t%03d", i), triggers.NewIssue, Params{})
			tr.Filter = fmt.Sprintf("event.payload.issue.number == %d", 1000+i)
			return tr
		}, 1},
		{"many filters, all erroring", func(i int) Trigger {
			tr := trig(fmt.Sprintf("t%03d", i), triggers.NewIssue, Params{})
			tr.Filter = "event.payload.nope == 1"
			return tr
		}, 1},
		{"no filters", func(i int) Trigger {
			return trig(fmt.Sprintf("t%03d", i), triggers.NewIssue, Params{Labels: []string{"other"}})
		}, 0},
		{"filters never reached: parameters reject first", func(i int) Trigger {
			tr := trig(fmt.Sprintf("t%03d", i), triggers.NewIssue, Params{Labels: []string{"other"}})
			tr.Filter = "true"
			return tr
		}, 0},
		{"filters of disabled triggers are not run", func(i int) Trigger {
			tr := trig(fmt.Sprintf("t%03d", i), triggers.NewIssue, Params{})
			tr.Filter = "true"
			tr.Enabled = false
			return tr
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := sharedIndex()
			var decoded atomic.Int64
			x.onDecode = func() { decoded.Add(1) }
			for i := 0; i < 50; i++ {
				mustPut(t, x, tc.setup(i))
			}
			for round := 1; round <= 2; round++ {
				out := x.Match(issueEvent("octo-org/api", "bug"))
				if len(out) != 50 {
					t.Fatalf("%d outcomes", len(out))
				}
				for _, o := range out {
					if o.Result == Matched {
						t.Fatalf("unexpected match %+v", o)
					}
				}
				if got := decoded.Load(); got != tc.want*int64(round) {
					t.Fatalf("after %d Match calls the event was decoded %d times, want %d", round, got, tc.want*int64(round))
				}
			}
		})
	}
}
