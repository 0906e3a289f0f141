package console

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/triggerd/triggerd/connectors/apicall"
)

// The API Call steps' forms follow the spec's shape: method (a select),
// endpoint or path, headers (name and value rows), body (a JSON editor).
func TestAPICallFormShape(t *testing.T) {
	for _, tc := range []struct {
		input json.RawMessage
		want  []string
	}{
		{apicall.CodeHost(apicall.CodeHostOptions{}).Input, []string{"method select", "endpoint text", "headers map", "body json"}},
		{apicall.Deploy(apicall.DeployOptions{}).Input, []string{"method select", "path text", "headers map", "body json"}},
		{apicall.Analytics(apicall.AnalyticsOptions{}).Input, []string{"method select", "endpoint text", "api select", "body json"}},
	} {
		fields, err := formFields(tc.input)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range fields {
			got = append(got, f.Name+" "+f.Kind)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("fields %q, want %q", got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("field %d: %q, want %q (all: %q)", i, got[i], tc.want[i], got)
			}
		}
	}
	fields, _ := formFields(apicall.CodeHost(apicall.CodeHostOptions{}).Input)
	form := url.Values{
		"in_method": {"POST"}, "in_endpoint": {"/repos/o/r/issues"},
		"in_headers.name.0": {"accept"}, "in_headers.value.0": {"application/vnd.codehost+json"},
		"in_headers.name.2": {"x-note"}, "in_headers.value.2": {"a, b"},
		"in_body": {`{"title": "Hi"}`},
	}
	in, err := inputOf(fields, form.Get)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(in, &got)
	h, _ := got["headers"].(map[string]any)
	b, _ := got["body"].(map[string]any)
	if got["method"] != "POST" || h["accept"] != "application/vnd.codehost+json" || h["x-note"] != "a, b" || len(h) != 2 || b["title"] != "Hi" {
		t.Errorf("input %s", in)
	}
	form.Set("in_headers.name.1", "")
	form.Set("in_headers.value.1", "orphan")
	if _, err := inputOf(fields, form.Get); err == nil {
		t.Error("a header value without a name: no error")
	}
	form.Del("in_headers.value.1")
	form.Set("in_body", `{"title": `)
	if _, err := inputOf(fields, form.Get); err == nil {
		t.Error("a body that is not JSON: no error")
	}
}
