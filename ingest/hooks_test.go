package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/triggers"
)

// fakeHooks knows hook h1 (code hosting) and e1 (deployment endpoint).
type fakeHooks struct{}

func (fakeHooks) Hook(_ context.Context, c triggers.Connector, id string) (triggers.Scope, *Verifier, error) {
	switch {
	case c == triggers.CodeHost && id == "h1":
		v, err := NewVerifier(CodeHostScheme, "hook-one-secret")
		return triggers.Scope{Hook: "h1", Tenant: "t1", Account: "a1"}, v, err
	case c == triggers.Deploy && id == "e1":
		v, err := NewVerifier(DeployScheme, "endpoint-secret")
		return triggers.Scope{Hook: "e1", Tenant: "t1", Agent: "ag1"}, v, err
	}
	return triggers.Scope{}, nil, fmt.Errorf("%w: %s", ErrUnknownHook, id)
}

func TestPerHookEndpoints(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Hooks = fakeHooks{} })
	body := []byte(`{"action":"opened","issue":{"number":1,"title":"t","user":{"login":"x"}},"repository":{"name":"api","full_name":"octo/api","owner":{"login":"octo"}},"sender":{"login":"x"}}`)
	hookReq := func(path, secret string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-GitHub-Delivery", "dup-id")
		req.Header.Set("X-Hub-Signature-256", CodeHostScheme.Sign([]byte(secret), body))
		return req
	}
	if a := h.do(hookReq("/webhooks/codehost/nope", "hook-one-secret")); a.status != http.StatusNotFound || errorCode(a) != "unknown_hook" {
		t.Fatalf("unknown hook: %d %v", a.status, a.body)
	}
	// The shared secret does not open a tenant's hook.
	if a := h.do(hookReq("/webhooks/codehost/h1", testCodeHostSecret)); a.status != http.StatusUnauthorized {
		t.Fatalf("shared secret on a hook: %d, want 401", a.status)
	}
	a := h.do(hookReq("/webhooks/codehost/h1", "hook-one-secret"))
	if a.status != http.StatusAccepted {
		t.Fatalf("hook delivery: %d %v", a.status, a.body)
	}
	c := h.fc.commits[0]
	if c.Scope == nil || c.Scope.Tenant != "t1" || c.Scope.Account != "a1" || c.Key() != "h1/dup-id" {
		t.Fatalf("capture scope %+v key %q", c.Scope, c.Key())
	}
	ev := h.fc.events[0][0]
	if ev.Scope == nil || ev.Scope.Hook != "h1" || ev.ID != triggers.EventID(triggers.CodeHost, "h1/dup-id", ev.Kind, 0) {
		t.Fatalf("event %s scope %+v: want the hook's scope and an id keyed by hook and delivery", ev.ID, ev.Scope)
	}
	// The same delivery id on the shared endpoint is another delivery.
	if a := h.do(codeHostRequest("issues", "dup-id", body)); a.status != http.StatusAccepted {
		t.Fatalf("shared endpoint after a hook delivery with the same id: %d %v", a.status, a.body)
	}
	if h.fc.events[1][0].Scope != nil || h.fc.events[1][0].ID == ev.ID {
		t.Fatal("the shared endpoint's event must be unscoped with its own id")
	}

	dbody := []byte(`{"id":"evt_1","type":"deployment.created","createdAt":1700000000000,"payload":{"deployment":{"id":"dpl_1","url":"x.vercel.app"},"target":"production","project":{"id":"prj_1"}}}`)
	req := httptest.NewRequest(http.MethodPost, "/webhooks/deploy/e1", bytes.NewReader(dbody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-vercel-signature", DeployScheme.Sign([]byte("endpoint-secret"), dbody))
	if a := h.do(req); a.status != http.StatusAccepted {
		t.Fatalf("deploy endpoint: %d %v", a.status, a.body)
	}
	if s := h.fc.events[2][0].Scope; s == nil || s.Agent != "ag1" {
		t.Fatalf("deploy endpoint event scope = %+v", s)
	}
}

// heardActivity records what an Activity hears, a line per call.
type heardActivity struct {
	mu    sync.Mutex
	heard []string
}

func (a *heardActivity) Accepted(c triggers.Connector, hook string, _ time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.heard = append(a.heard, fmt.Sprintf("accepted %s/%s", c, hook))
}

func (a *heardActivity) Refused(c triggers.Connector, hook string, _ time.Time, status int, code, _ string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.heard = append(a.heard, fmt.Sprintf("refused %s/%s %d %s", c, hook, status, code))
}

func (a *heardActivity) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.heard
	a.heard = nil
	return out
}

func TestActivityHearsEachHookDelivery(t *testing.T) {
	heard := &heardActivity{}
	h := newHarness(t, func(o *Options) { o.Hooks, o.Activity = fakeHooks{}, heard })
	body := []byte(issueOpened)
	to := func(path, secret, delivery string) *http.Request {
		req := codeHostRequest("issues", delivery, body)
		req.URL.Path = path
		req.Header.Set("X-Hub-Signature-256", CodeHostScheme.Sign([]byte(secret), body))
		return req
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		want []string
	}{
		{"taken", to("/webhooks/codehost/h1", "hook-one-secret", "a1"), []string{"accepted codehost/h1"}},
		{"a duplicate", to("/webhooks/codehost/h1", "hook-one-secret", "a1"), []string{"accepted codehost/h1"}},
		{"wrongly signed", to("/webhooks/codehost/h1", "not-the-secret", "a2"), []string{"refused codehost/h1 401 invalid_signature"}},
		{"an unknown hook", to("/webhooks/codehost/nope", "hook-one-secret", "a3"), nil},
		{"the shared endpoint", to("/webhooks/codehost", testCodeHostSecret, "a4"), nil},
		{"the shared endpoint, wrongly signed", to("/webhooks/codehost", "not-the-secret", "a5"), nil},
	} {
		h.do(tc.req)
		if got := heard.take(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: heard %q, want %q", tc.name, got, tc.want)
		}
	}
	h.fc.mu.Lock()
	h.fc.err = errors.New("nats: timeout")
	h.fc.mu.Unlock()
	if a := h.do(to("/webhooks/codehost/h1", "hook-one-secret", "a6")); a.status != http.StatusServiceUnavailable {
		t.Fatalf("with the committer down: %d", a.status)
	}
	if got, want := heard.take(), []string{"refused codehost/h1 503 unavailable"}; !slices.Equal(got, want) {
		t.Errorf("a 503: heard %q, want %q", got, want)
	}
}
