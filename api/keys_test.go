package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// send makes a request with a JSON body ("" for none) and returns the
// status, the decoded answer, and the raw answer, to look for secrets in it
// and at its headers.
func (v *env) send(method, path, key, body string) (int, map[string]any, *httptest.ResponseRecorder) {
	v.t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if body != "" {
		req = httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := v.check.Serve(v.e, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			v.t.Fatalf("%s %s: %d %q is not JSON", method, path, rec.Code, rec.Body.String())
		}
	}
	return rec.Code, out, rec
}

// errorOf returns the code and message of an error answer.
func errorOf(body map[string]any) (string, string) {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	return code, msg
}

// TestKeyRotation rotates a tenant's API key through the API, as the
// README tells operators to: create a new key, switch to it, revoke the
// old one, which is refused from its next request on.
func TestKeyRotation(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			defer st.Close()
			v := newEnv(t, st)
			tenantA, oldKey := v.tenant("acme")
			_, keyB := v.tenant("globex")

			// Refused bodies say what to send.
			for _, body := range []string{`{}`, `{"name":"  "}`, `{"name":"` + strings.Repeat("x", 101) + `"}`, `{"name":"ci","scopes":["all"]}`, `not json`} {
				code, ans, _ := v.send(http.MethodPost, "/v1/keys", oldKey, body)
				if c, msg := errorOf(ans); code != http.StatusBadRequest || msg == "" {
					t.Fatalf("POST /v1/keys %s: %d %s %q, want 400 with a message", body, code, c, msg)
				}
			}
			if code, _, _ := v.send(http.MethodPost, "/v1/keys", "", `{"name":"ci"}`); code != http.StatusUnauthorized {
				t.Fatalf("POST /v1/keys without a key: %d, want 401", code)
			}

			code, created, rec := v.send(http.MethodPost, "/v1/keys", oldKey, `{"name":"ci"}`)
			if code != http.StatusCreated {
				t.Fatalf("POST /v1/keys: %d %v", code, created)
			}
			if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("the answer holding the new key has Cache-Control %q, want no-store", cc)
			}
			newKey, _ := created["api_key"].(string)
			meta, _ := created["key"].(map[string]any)
			newID, _ := meta["id"].(string)
			if !strings.HasPrefix(newKey, "tdk_") || newKey == oldKey || newID == "" || meta["name"] != "ci" {
				t.Fatalf("POST /v1/keys answered %v", created)
			}
			if code, body := v.do(http.MethodGet, "/v1/accounts", newKey); code != http.StatusOK {
				t.Fatalf("a request with the new key: %d %v", code, body)
			}

			// Both keys are listed, without the keys or their hashes.
			code, listed, rec := v.send(http.MethodGet, "/v1/keys", newKey, "")
			if code != http.StatusOK {
				t.Fatalf("GET /v1/keys: %d %v", code, listed)
			}
			keys, _ := listed["keys"].([]any)
			if len(keys) != 2 {
				t.Fatalf("GET /v1/keys listed %v, want the initial key and ci", listed)
			}
			var oldID string
			for i, raw := range keys {
				k := raw.(map[string]any)
				var fields []string
				for f := range k {
					fields = append(fields, f)
				}
				slices.Sort(fields)
				if strings.Join(fields, ",") != "created_at,id,name" {
					t.Fatalf("a listed key has the fields %v, want only id, name and created_at", fields)
				}
				if want := []string{"initial", "ci"}[i]; k["name"] != want {
					t.Fatalf("key %d is %v, want %s (oldest first)", i, k, want)
				}
				if i == 0 {
					oldID = k["id"].(string)
				}
			}
			raw := rec.Body.String()
			for _, secret := range []string{oldKey, newKey, oldKey[len("tdk_"):], newKey[len("tdk_"):]} {
				if strings.Contains(raw, secret) {
					t.Fatal("GET /v1/keys shows a key")
				}
			}
			if strings.Contains(raw, "hash") {
				t.Fatalf("GET /v1/keys mentions a hash: %s", raw)
			}

			// Another tenant sees only its own key and cannot revoke ours.
			_, theirs, _ := v.send(http.MethodGet, "/v1/keys", keyB, "")
			if ks, _ := theirs["keys"].([]any); len(ks) != 1 || ks[0].(map[string]any)["id"] == oldID {
				t.Fatalf("the other tenant lists %v", theirs)
			}
			if code, _, _ := v.send(http.MethodDelete, "/v1/keys/"+oldID, keyB, ""); code != http.StatusNotFound {
				t.Fatalf("the other tenant revoked our key: %d, want 404", code)
			}
			if code, _ := v.do(http.MethodGet, "/v1/accounts", oldKey); code != http.StatusOK {
				t.Fatalf("the old key after the other tenant's attempt: %d", code)
			}

			// Revoking the old key refuses it at once; the new one works.
			if code, body, _ := v.send(http.MethodDelete, "/v1/keys/"+oldID, newKey, ""); code != http.StatusNoContent {
				t.Fatalf("DELETE /v1/keys/%s: %d %v", oldID, code, body)
			}
			if code, _ := v.do(http.MethodGet, "/v1/accounts", oldKey); code != http.StatusUnauthorized {
				t.Fatalf("a request with the revoked key: %d, want 401", code)
			}
			if code, _ := v.do(http.MethodGet, "/v1/keys", oldKey); code != http.StatusUnauthorized {
				t.Fatalf("GET /v1/keys with the revoked key: %d, want 401", code)
			}
			code, listed, _ = v.send(http.MethodGet, "/v1/keys", newKey, "")
			if ks, _ := listed["keys"].([]any); code != http.StatusOK || len(ks) != 1 || ks[0].(map[string]any)["id"] != newID {
				t.Fatalf("GET /v1/keys after the revoke: %d %v, want only %s", code, listed, newID)
			}

			// The last key cannot be revoked: the tenant would be locked out.
			code, ans, _ := v.send(http.MethodDelete, "/v1/keys/"+newID, newKey, "")
			if c, msg := errorOf(ans); code != http.StatusConflict || c != "last_key" || !strings.Contains(msg, "create a new key first") {
				t.Fatalf("revoking the last key: %d %s %q, want 409 last_key saying to create a new key first", code, c, msg)
			}
			if code, _ := v.do(http.MethodGet, "/v1/accounts", newKey); code != http.StatusOK {
				t.Fatalf("the last key after the refused revoke: %d", code)
			}
			for _, id := range []string{"key_nope", oldID} {
				code, ans, _ := v.send(http.MethodDelete, "/v1/keys/"+id, newKey, "")
				if c, msg := errorOf(ans); code != http.StatusNotFound || c != "not_found" || !strings.Contains(msg, "GET /v1/keys") {
					t.Fatalf("revoking %s: %d %s %q, want 404 pointing at GET /v1/keys", id, code, c, msg)
				}
			}

			logs := v.logs.String()
			for _, secret := range []string{oldKey, newKey} {
				if strings.Contains(logs, secret) {
					t.Fatal("an API key is in the logs")
				}
			}
			if !strings.Contains(logs, fmt.Sprintf(`"tenant":%q,"key":%q`, tenantA, oldID)) {
				t.Errorf("the revoke of %s is not logged with its tenant:\n%s", oldID, logs)
			}
		})
	}
}
