package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMCPHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"codehost_create_issue": "codehost_create_issue",
		"triggerd://events/e-1": "triggerd://events/e-1",
		" padded":               "=?base64?IHBhZGRlZA==?=",
		"café":                  "=?base64?Y2Fmw6k=?=",
		"=?base64?looks-like?=": "=?base64?PT9iYXNlNjQ/bG9va3MtbGlrZT89?=",
		"":                      "",
	} {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMCPReadEvents(t *testing.T) {
	stream := "id: 1\ndata: {\"a\":1}\n\n: comment\nevent: message\nid: 2\ndata: {\"b\":\ndata: 2}\n\nevent: other\ndata: x\n\ndata:\n\n"
	var got []string
	var ids []string
	if err := readEvents(strings.NewReader(stream), func(id string, data []byte) {
		got = append(got, string(data))
		ids = append(ids, id)
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"a":1}`, "{\"b\":\n2}", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") || ids[1] != "2" {
		t.Fatalf("events %q ids %q, want %q", got, ids, want)
	}
}

// A request the endpoint refuses is answered on stdout, so that the
// client does not wait for ever, and the reason goes to stderr.
func TestMCPBridgeAnswersRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tdk_x" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="triggerd"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	t.Setenv("TRIGGERD_API_KEY", "tdk_x")
	var stdout, stderr bytes.Buffer
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	if code := mcpCommand(context.Background(), []string{"--url", srv.URL}, in, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"id":1`) || !strings.Contains(stdout.String(), `"error"`) || strings.Count(stdout.String(), "\n") != 1 {
		t.Fatalf("stdout %q, want one error answer to the request", stdout.String())
	}
	if !strings.Contains(stderr.String(), "401") {
		t.Fatalf("stderr %q, want the refusal", stderr.String())
	}
}
