package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBadListQueriesAnswerOnce checks that a bad limit or status gets one
// 400 answer and nothing else: the handler must stop there, not go on to
// list with a zero limit and write a second body after the error.
func TestBadListQueriesAnswerOnce(t *testing.T) {
	v, key := newBoltEnv(t)
	withRegistry(t, v, key)
	e := v.e
	get := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		return v.check.Serve(e, req)
	}
	for _, c := range []struct{ path, want string }{
		{"/v1/runs?limit=0", `limit \"0\": want an integer from 1 to 1000`},
		{"/v1/runs?limit=5000", `limit \"5000\"`},
		{"/v1/runs?limit=ten", `limit \"ten\"`},
		{"/v1/runs?status=done", `status \"done\": want one of claimed, started, succeeded, failed`},
	} {
		rec := get(c.path)
		dec := json.NewDecoder(rec.Body)
		var first map[string]any
		if err := dec.Decode(&first); err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if rec.Code != http.StatusBadRequest || first["error"] == nil || dec.More() {
			t.Errorf("%s: %d, more after the first JSON value: %v; want one 400 error answer", c.path, rec.Code, dec.More())
		}
		if b, _ := json.Marshal(first); !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %s, want it to say %s", c.path, b, c.want)
		}
	}
	if rec := get("/v1/runs?limit=5&status=failed"); rec.Code != http.StatusOK || !strings.HasPrefix(rec.Body.String(), `{"runs":[]}`) {
		t.Errorf("good query: %d %s", rec.Code, rec.Body)
	}

	// A refused trigger says what is wrong once: the code names the
	// class, the message does not repeat it, nor name the store.
	req := httptest.NewRequest(http.MethodPost, "/v1/triggers", strings.NewReader(`{"kind":"new_issue","account":"acc_nope","agent":"a","params":{"repositories":["octocat/hello-world"]}}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	rec := v.check.Serve(e, req)
	want := `{"error":{"code":"invalid_request","message":"account \"acc_nope\": no such account in this tenant (triggerctl accounts list shows them)"}}`
	if rec.Code != http.StatusBadRequest || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("trigger for an unknown account: %d %s, want 400 %s", rec.Code, rec.Body, want)
	}
}
