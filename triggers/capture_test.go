package triggers

import (
	"net/url"
	"testing"
)

const issueOpenedJSON = `{"action":"opened","issue":{"number":1}}`

func TestCapturePayload(t *testing.T) {
	form := "payload=" + url.QueryEscape(issueOpenedJSON)
	for _, tc := range []struct {
		name   string
		header map[string][]string
		body   string
		want   string
		err    bool
	}{
		{"json", map[string][]string{"Content-Type": {"application/json"}}, issueOpenedJSON, issueOpenedJSON, false},
		{"form", map[string][]string{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}}, form, issueOpenedJSON, false},
		{"form, header key in another case", map[string][]string{"content-type": {"application/x-www-form-urlencoded"}}, form, issueOpenedJSON, false},
		{"form without payload", map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}, "other=1", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Capture{Header: tc.header, Body: []byte(tc.body)}.Payload()
			if (err != nil) != tc.err || string(got) != tc.want {
				t.Fatalf("Payload = %q, %v; want %q (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}
