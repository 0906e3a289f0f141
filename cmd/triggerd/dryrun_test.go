package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

// TestEndToEndDryRun tests a changed filter, and a trigger not created
// yet, against the events a real trigger received, through the API.
func TestEndToEndDryRun(t *testing.T) {
	v := newE2E(t)
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "triage"}`, http.StatusCreated)
	draft := fmt.Sprintf(`"kind": "new_issue", "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}`, v.account, ag["id"])
	_, tr := v.api(http.MethodPost, "/v1/triggers", "{"+draft+"}", http.StatusCreated)
	id := tr["id"].(string)
	createIssue(t, v.gh, "Crash on start")
	createIssue(t, v.gh, "Typo in the docs")
	testenv.Eventually(t, 20*time.Second, "both issues' events to reach the trigger", func() bool {
		_, out := v.api(http.MethodGet, "/v1/triggers/"+id+"/events", "", http.StatusOK)
		evs, _ := out["events"].([]any)
		return len(evs) == 2
	})

	// The trigger's events again, under a filter it does not have.
	_, r := v.api(http.MethodPost, "/v1/triggers/"+id+"/test", `{"filter": "event.resource.title.contains('Crash')"}`, http.StatusOK)
	evs, _ := r["events"].([]any)
	if len(evs) != 2 || r["matched"] != float64(1) || r["exhausted"] != true {
		t.Fatalf("test of a new filter = %v", r)
	}
	// The fake delivers each issue's webhook on its own: either may have
	// arrived first.
	byResult := map[string]map[string]any{}
	for _, e := range evs {
		e := e.(map[string]any)
		byResult[e["result"].(string)] = e
	}
	matched, out := byResult["matched"], byResult["filtered_out"]
	if matched == nil || out == nil || out["reason"] != "filter: event.resource.title.contains('Crash') is false" ||
		matched["repository"] != "octocat/hello-world" || matched["action"] != "opened" || matched["event_id"] == "" {
		t.Fatalf("test of a new filter: %v", evs)
	}
	// Its own (no filter): both, and the newest only with a limit.
	_, r = v.api(http.MethodPost, "/v1/triggers/"+id+"/test", "", http.StatusOK)
	if r["matched"] != float64(2) {
		t.Fatalf("test of the trigger as it is = %v", r)
	}
	_, r = v.api(http.MethodPost, "/v1/triggers/"+id+"/test", `{"limit": 1}`, http.StatusOK)
	if evs, _ := r["events"].([]any); len(evs) != 1 || r["exhausted"] != false {
		t.Fatalf("test with limit 1 = %v", r)
	}

	// A trigger not created yet: the same validation as creating it.
	draftBug := fmt.Sprintf(`{"kind": "new_issue", "account": %q, "agent": %q, "params": {"repositories": ["OctoCat/Hello-World"], "labels": ["bug"]}, "limit": 5}`, v.account, ag["id"])
	_, r = v.api(http.MethodPost, "/v1/triggers/test", draftBug, http.StatusOK)
	evs, _ = r["events"].([]any)
	if len(evs) != 2 || r["matched"] != float64(0) || evs[0].(map[string]any)["reason"] != "labels: the event has no labels; want any of [bug]" {
		t.Fatalf("test of a draft with labels = %v", r)
	}
	for body, want := range map[string]string{
		`{` + draft + `, "filter": "event.resource.number >"}`:                                        "filter",
		`{"kind": "new_issue", "account": "nope", "agent": "x", "params": {"repositories": ["a/b"]}}`: "account",
		`{` + draft + `, "limit": 0}`:                                                                 "limit",
		`{` + draft + `, "enabled": true, "extra": 1}`:                                                "extra",
	} {
		_, r := v.api(http.MethodPost, "/v1/triggers/test", body, http.StatusBadRequest)
		if msg := fmt.Sprint(r["error"]); !strings.Contains(msg, want) {
			t.Errorf("POST /v1/triggers/test %s: %s, want it to name %q", body, msg, want)
		}
	}
	v.api(http.MethodPost, "/v1/triggers/no-such/test", "", http.StatusNotFound)

	// Nothing was created or started by testing.
	_, list := v.api(http.MethodGet, "/v1/triggers", "", http.StatusOK)
	if ts, _ := list["triggers"].([]any); len(ts) != 1 {
		t.Fatalf("triggers after testing: %v", list)
	}
	if len(v.gh.Hooks("octocat", "hello-world")) != 1 {
		t.Fatalf("hooks after testing: %+v", v.gh.Hooks("octocat", "hello-world"))
	}
	testenv.Eventually(t, 10*time.Second, "the trigger's two runs", func() bool { return len(v.runs("trigger="+id)) == 2 })
	if rs := v.runs(""); len(rs) != 2 {
		t.Fatalf("runs after testing: %d, want the trigger's 2", len(rs))
	}
}
