package analytics

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
)

// scopeBody is Google's answer to a token without the method's scope, as
// its APIs send it: the {"error":{code,message,status}} envelope plus the
// legacy errors[] and a google.rpc.ErrorInfo in details[].
const scopeBody = `{
  "error": {
    "code": 403,
    "message": "Request had insufficient authentication scopes.",
    "errors": [{"message": "Insufficient Permission", "domain": "global", "reason": "insufficientPermissions"}],
    "status": "PERMISSION_DENIED",
    "details": [{
      "@type": "type.googleapis.com/google.rpc.ErrorInfo",
      "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
      "domain": "googleapis.com",
      "metadata": {"service": "analyticsadmin.googleapis.com", "method": "google.analytics.admin.v1beta.AnalyticsAdminService.CreateKeyEvent"}
    }]
  }
}`

func TestForbiddenScopeAndRole(t *testing.T) {
	t.Parallel()
	cl := &client{now: time.Now, quota: newQuotaTracker(time.Now, maxConcurrentPerProperty)}
	write := call{op: "create key event x in properties/1", denied: "creating a key event needs the Editor role on properties/1", method: http.MethodPost}
	report := call{op: "run core report on properties/1", denied: "reading reports needs at least the Viewer role on properties/1", method: http.MethodPost, property: "1"}
	for _, tc := range []struct {
		name string
		c    call
		body string
		code connectors.ErrorCode
		want []string
	}{
		{"missing scope on a write", write, scopeBody, connectors.CodeNeedsReauth,
			[]string{"lacks the analytics.edit scope", "reconnect the account", "insufficient authentication scopes"}},
		{"missing scope on a report", report, scopeBody, connectors.CodeNeedsReauth,
			[]string{"lacks the analytics.readonly scope", "reconnect the account"}},
		{"missing scope, message only", write, `{"error":{"code":403,"message":"Request had insufficient authentication scopes.","status":"PERMISSION_DENIED"}}`,
			connectors.CodeNeedsReauth, []string{"analytics.edit", "reconnect"}},
		{"missing role", write, `{"error":{"code":403,"message":"The caller does not have permission","status":"PERMISSION_DENIED"}}`,
			connectors.CodePermissionDenied, []string{"needs the Editor role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := cl.apiError(tc.c, http.StatusForbidden, []byte(tc.body))
			if err.Code != tc.code || err.Status != 403 || err.Retryable {
				t.Fatalf("error = %+v, want %s", err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Message, w) {
					t.Errorf("message %q lacks %q", err.Message, w)
				}
			}
		})
	}
}

// The fake refuses a token without a method's scope as Google does; the
// step tells the user to reconnect rather than to ask for a role.
func TestMissingScopeNeedsReauth(t *testing.T) {
	granted := []string{fakeanalytics.ScopeReadonly}
	h := newHarnessWith(t, fakeanalytics.Options{Scopes: func(string) []string { return granted }})
	h.fake.Grant(fakeanalytics.DefaultUser, "properties/"+h.prop, fakeanalytics.RoleEditor)
	h.fake.CollectEvent(h.prop, "sign_up", 3)

	_, err := h.run(t, StepCreateKeyEvents, `{"property":"properties/`+h.prop+`","event_name":"sign_up"}`)
	ce := connectortest.WantCode(t, err, connectors.CodeNeedsReauth)
	if !strings.Contains(ce.Message, "analytics.edit") || !strings.Contains(ce.Message, "reconnect") || ce.Retryable {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.KeyEvents(h.prop)); n != 0 {
		t.Errorf("%d key events", n)
	}

	granted = []string{fakeanalytics.ScopeEdit}
	err = h.report(t)
	if ce := connectortest.WantCode(t, err, connectors.CodeNeedsReauth); !strings.Contains(ce.Message, "analytics.readonly") {
		t.Errorf("report without analytics.readonly: %+v", ce)
	}
}
