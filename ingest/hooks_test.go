package ingest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

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
