package ingest

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/triggers"
)

// errorMessage returns the message of an error answer.
func errorMessage(a answer) string {
	e, _ := a.body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// checkRefusal fails t unless the answer is status and code with a message
// containing every one of want and none of unwanted, and nothing was
// committed.
func checkRefusal(t *testing.T, h *harness, a answer, status int, code string, want, unwanted []string) {
	t.Helper()
	if a.status != status || errorCode(a) != code {
		t.Fatalf("got %d %v, want %d %s", a.status, a.body, status, code)
	}
	msg := errorMessage(a)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q does not contain %q", msg, w)
		}
	}
	for _, u := range unwanted {
		if strings.Contains(msg, u) {
			t.Errorf("message %q contains %q", msg, u)
		}
	}
	if h.fc.count() != 0 {
		t.Fatal("a refused delivery was committed")
	}
}

// noMapper makes the harness fail a test whose delivery reaches the mapper.
func noMapper(o *Options) {
	o.Hooks = fakeHooks{}
	o.Map = func(triggers.Delivery) (triggers.Result, error) {
		panic("the mapper ran on a delivery that should have been refused first")
	}
}

const deployBody = `{"id":"uev_1","type":"deployment.created","createdAt":1,"payload":{}}`

// githubTo is a signed GitHub-format delivery posted to path.
func githubTo(path, contentType string) *http.Request {
	req := codeHostRequest("issues", "d-1", []byte(issueOpened))
	req.URL.Path = path
	req.Header.Set("Content-Type", contentType)
	return req
}

// vercelTo is a signed Vercel-format delivery posted to path.
func vercelTo(path string) *http.Request {
	req := deployRequest([]byte(deployBody))
	req.URL.Path = path
	return req
}

func TestMisdirectedDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		req      func() *http.Request
		status   int
		code     string
		want     []string
		unwanted []string
	}{
		{"github delivery on the deployment endpoint",
			func() *http.Request { return githubTo("/webhooks/deploy", "application/json") },
			401, "missing_signature",
			[]string{"code-hosting (GitHub-format) delivery", "X-GitHub-Event", "send it to /webhooks/codehost"},
			[]string{"set the webhook's secret"}},
		{"github signature header alone on the deployment endpoint",
			func() *http.Request {
				r := githubTo("/webhooks/deploy", "application/json")
				r.Header.Del("X-GitHub-Event")
				r.Header.Del("X-GitHub-Delivery")
				return r
			},
			401, "missing_signature",
			[]string{"X-Hub-Signature-256", "send it to /webhooks/codehost"}, nil},
		{"form-encoded github delivery on the deployment endpoint",
			func() *http.Request {
				return githubTo("/webhooks/deploy", "application/x-www-form-urlencoded")
			},
			415, "unsupported_media_type",
			[]string{"code-hosting (GitHub-format) delivery", "send it to /webhooks/codehost"}, nil},
		{"vercel delivery on the code-hosting endpoint",
			func() *http.Request { return vercelTo("/webhooks/codehost") },
			400, "missing_header",
			[]string{"deployment (Vercel-format) delivery", "x-vercel-signature", "send it to /webhooks/deploy"},
			[]string{"are required"}},
		{"vercel delivery on a code-hosting hook",
			func() *http.Request { return vercelTo("/webhooks/codehost/h1") },
			400, "missing_header",
			[]string{"deployment (Vercel-format) delivery", "deployment endpoint URL, /webhooks/deploy/{endpoint-id}", "instead of this code-hosting hook URL"},
			[]string{"send it to"}},
		{"github delivery on a deployment endpoint",
			func() *http.Request { return githubTo("/webhooks/deploy/e1", "application/json") },
			401, "missing_signature",
			[]string{"code-hosting (GitHub-format) delivery", "code-hosting hook URL, /webhooks/codehost/{hook-id}", "instead of this deployment endpoint URL"},
			[]string{"send it to", "set the webhook's secret"}},
		{"github delivery on a code-hosting hook's id under the deployment path",
			func() *http.Request { return githubTo("/webhooks/deploy/h1", "application/json") },
			404, "unknown_hook",
			[]string{"code-hosting hook URL, /webhooks/codehost/{hook-id}"}, nil},

		// Without the other provider's headers the answers are unchanged.
		{"code-hosting endpoint, no headers at all",
			func() *http.Request {
				r := vercelTo("/webhooks/codehost")
				r.Header.Del("x-vercel-signature")
				return r
			},
			400, "missing_header",
			[]string{"headers X-GitHub-Event and X-GitHub-Delivery are required"}, []string{"/webhooks/deploy"}},
		{"code-hosting endpoint, vercel signature beside a github header",
			func() *http.Request {
				r := vercelTo("/webhooks/codehost")
				r.Header.Set("X-GitHub-Hook-ID", "42")
				return r
			},
			400, "missing_header",
			[]string{"headers X-GitHub-Event and X-GitHub-Delivery are required"}, []string{"/webhooks/deploy"}},
		{"deployment endpoint, no signature and no github headers",
			func() *http.Request {
				r := vercelTo("/webhooks/deploy")
				r.Header.Del("x-vercel-signature")
				return r
			},
			401, "missing_signature",
			[]string{"header x-vercel-signature is missing: set the webhook's secret to triggerd's deployment webhook secret"}, []string{"/webhooks/codehost"}},
		{"deployment endpoint, unknown hook without github headers",
			func() *http.Request { return vercelTo("/webhooks/deploy/nope") },
			404, "unknown_hook",
			[]string{`no deploy hook "nope"`}, []string{"/webhooks/codehost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, noMapper)
			checkRefusal(t, h, h.do(tc.req()), tc.status, tc.code, tc.want, tc.unwanted)
		})
	}
}

func TestMalformedSignatureHeaders(t *testing.T) {
	body := []byte(issueOpened)
	sha256Hex := strings.TrimPrefix(CodeHostScheme.Sign([]byte(testCodeHostSecret), body), "sha256=")
	sha1Hex := DeployScheme.Sign([]byte(testDeploySecret), []byte(deployBody))
	// Digests sent by the tests below; no message or log may show them.
	digests := []string{sha256Hex, sha1Hex, sha256Hex[:8], sha1Hex[:8]}
	for _, tc := range []struct {
		name     string
		req      func() *http.Request
		want     []string
		unwanted []string
	}{
		{"code hosting, sha1= label",
			func() *http.Request {
				r := codeHostRequest("issues", "d", body)
				r.Header.Set("X-Hub-Signature-256", "sha1="+sha1Hex)
				return r
			},
			[]string{`X-Hub-Signature-256 must be "sha256=" followed by 64 hex digits (HMAC-SHA256 of the raw body)`, `got a value starting "sha1="`},
			[]string{"does not match"}},
		{"code hosting, no prefix",
			func() *http.Request {
				r := codeHostRequest("issues", "d", body)
				r.Header.Set("X-Hub-Signature-256", sha256Hex)
				return r
			},
			[]string{`without the "sha256=" prefix`}, []string{"does not match"}},
		{"code hosting, 40 hex digits",
			func() *http.Request {
				r := codeHostRequest("issues", "d", body)
				r.Header.Set("X-Hub-Signature-256", "sha256="+sha1Hex)
				return r
			},
			[]string{`got "sha256=" followed by 40 characters`}, []string{"does not match"}},
		{"code hosting, well-formed but the wrong secret",
			func() *http.Request {
				r := codeHostRequest("issues", "d", body)
				r.Header.Set("X-Hub-Signature-256", CodeHostScheme.Sign([]byte("not-the-secret"), body))
				return r
			},
			[]string{"X-Hub-Signature-256 does not match the body"}, []string{"must be"}},
		{"code hosting hook, sha1= label",
			func() *http.Request {
				r := codeHostRequest("issues", "d", body)
				r.URL.Path = "/webhooks/codehost/h1"
				r.Header.Set("X-Hub-Signature-256", "sha1="+sha1Hex)
				return r
			},
			[]string{`X-Hub-Signature-256 must be "sha256=" followed by 64 hex digits`}, nil},
		{"deployment, sha1= label",
			func() *http.Request {
				r := deployRequest([]byte(deployBody))
				r.Header.Set("x-vercel-signature", "sha1="+sha1Hex)
				return r
			},
			[]string{"x-vercel-signature must be 40 hex digits (HMAC-SHA1 of the raw body) with no prefix", `got a value starting "sha1="`},
			[]string{"does not match"}},
		{"deployment, sha256 digest",
			func() *http.Request {
				r := deployRequest([]byte(deployBody))
				r.Header.Set("x-vercel-signature", sha256Hex)
				return r
			},
			[]string{"x-vercel-signature must be 40 hex digits", "got 64 characters"}, []string{"does not match"}},
		{"deployment, well-formed but the wrong secret",
			func() *http.Request {
				r := deployRequest([]byte(deployBody))
				r.Header.Set("x-vercel-signature", DeployScheme.Sign([]byte(testCodeHostSecret), []byte(deployBody)))
				return r
			},
			[]string{"x-vercel-signature does not match the body"}, []string{"must be"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := newHarness(t, func(o *Options) {
				noMapper(o)
				o.Logger = zerolog.New(&logs)
			})
			a := h.do(tc.req())
			checkRefusal(t, h, a, 401, "invalid_signature", tc.want, append(tc.unwanted, digests...))
			if logs.Len() == 0 {
				t.Fatal("the refusal was not logged")
			}
			for _, d := range digests {
				if strings.Contains(logs.String(), d) {
					t.Fatalf("the log shows a digest: %s", logs.String())
				}
			}
		})
	}
}

func TestDeliveryIDMessages(t *testing.T) {
	h := newHarness(t, nil)
	a := h.do(codeHostRequest("issues", "a b", []byte(issueOpened)))
	checkRefusal(t, h, a, 400, "invalid_header",
		[]string{"X-GitHub-Delivery must be 1 to 200 characters, without spaces or control characters"}, []string{"printable"})

	a = h.do(deployRequest([]byte(`{"id":"a b","type":"deployment.created","createdAt":1,"payload":{}}`)))
	checkRefusal(t, h, a, 400, "malformed_payload",
		[]string{`the envelope's "id" (the delivery id) must be 1 to 200 characters, without spaces or control characters`}, []string{"printable"})
}

func TestFormEncodingErrors(t *testing.T) {
	form := func(body string) *http.Request {
		req := codeHostRequest("issues", "d", []byte(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	}
	for _, tc := range []struct {
		name, body     string
		want, unwanted []string
	}{
		{"bad escape in the payload", "payload=%ZZ",
			[]string{"the form-encoded body is not valid URL encoding", `invalid URL escape "%ZZ"`}, []string{"must carry"}},
		{"bad escape in another field", "payload=" + url.QueryEscape(issueOpened) + "&x=%G1",
			[]string{"not valid URL encoding", `"%G1"`}, nil},
		{"no payload field", "other=1",
			[]string{`a form-encoded delivery must carry the JSON in the form field "payload"`}, []string{"URL encoding"}},
		{"empty payload field", "payload=",
			[]string{`form field "payload"`}, []string{"URL encoding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			checkRefusal(t, h, h.do(form(tc.body)), 400, "malformed_payload", tc.want, tc.unwanted)
		})
	}
	// triggerctl redeliver reads archived form deliveries the same way.
	_, err := triggers.Capture{
		Header: map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}},
		Body:   []byte("payload=%ZZ"),
	}.Payload()
	if err == nil || !strings.Contains(err.Error(), "not valid URL encoding") {
		t.Fatalf("Capture.Payload of a body that is not URL encoding: %v", err)
	}
}
