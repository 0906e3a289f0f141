package codehost_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// A write to a renamed repository is answered 301 with the repository's
// new place; the step repeats the same POST, body included, there.
func TestCreateIssueOnRenamedRepository(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
	in := `{"owner":"octocat","repo":"` + fakecodehost.SeedRenamedRepo + `","title":"Moved","body":"Still here.","labels":["bug"]}`
	out := h.mustRun(t, "create_issue", in)
	if out["repository"] != "octocat/hello-world" || out["title"] != "Moved" {
		t.Errorf("output %v", out)
	}
	n := int(out["number"].(float64))
	if is, ok := h.fake.Issue("octocat", "hello-world", n); !ok || is.Title != "Moved" || is.Body != "Still here." {
		t.Errorf("the issue did not land on octocat/hello-world: %+v", is)
	}
	reqs := h.fake.RequestsTo("POST /repos/{owner}/{repo}/issues")
	if len(reqs) != 2 {
		t.Fatalf("%d POSTs, want the first and the one repeated at the new place", len(reqs))
	}
	if reqs[0].Status != http.StatusMovedPermanently || reqs[1].Status != http.StatusCreated {
		t.Errorf("statuses %d, %d; want 301, 201", reqs[0].Status, reqs[1].Status)
	}
	if !strings.HasPrefix(reqs[1].Path, "/repositories/") || reqs[1].Method != http.MethodPost || string(reqs[1].Body) != string(reqs[0].Body) {
		t.Errorf("repeated request %s %s %s, first body %s", reqs[1].Method, reqs[1].Path, reqs[1].Body, reqs[0].Body)
	}
}

// tokenCatcher is a server on another host that records the requests it
// gets and whether they carried a credential.
type tokenCatcher struct {
	mu   sync.Mutex
	hits []string
	srv  *httptest.Server
}

func newTokenCatcher(t *testing.T) *tokenCatcher {
	c := &tokenCatcher{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.hits = append(c.hits, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		c.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"number":1,"title":"stolen"}`))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *tokenCatcher) Hits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.hits...)
}

// A redirect to another host is reported, never followed: the account's
// client would add the token to the request it sent there.
func TestRedirectToAnotherHostIsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, step, input string
		status            int
	}{
		{"create issue 307", "codehost.create_issue", `{"owner":"o","repo":"r","title":"x"}`, http.StatusTemporaryRedirect},
		{"create issue 301", "codehost.create_issue", `{"owner":"o","repo":"r","title":"x"}`, http.StatusMovedPermanently},
		{"get repository 301", "codehost.get_repository_info", `{"owner":"o","repo":"r"}`, http.StatusMovedPermanently},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			other := newTokenCatcher(t)
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				loc := other.srv.URL + r.URL.Path
				w.Header().Set("Location", loc)
				w.WriteHeader(tc.status)
				json.NewEncoder(w).Encode(map[string]string{"message": "Moved", "url": loc})
			}))
			defer api.Close()
			tk := codehost.NewToolkit(codehost.ToolkitOptions{APIBaseURL: api.URL})
			step := stepOf(t, tk.Steps, tc.step)
			env := connectors.Env{HTTP: &http.Client{
				Transport:     tk.Wrap("a", connectortest.Bearer{Token: token, Base: http.DefaultTransport}),
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}}
			_, err := step.Run(t.Context(), env, []byte(tc.input))
			if errCode(err) != connectors.CodeUpstream || !strings.Contains(err.Error(), "redirected to "+other.srv.URL) {
				t.Fatalf("error %v, want the redirect reported", err)
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("the error holds the token: %v", err)
			}
			if hits := other.Hits(); len(hits) != 0 {
				t.Errorf("the other host got %v", hits)
			}
		})
	}
}

// A same-host 307 to a write repeats the method and body, whatever the
// path; a same-host 301 to a write outside a repository is reported, not
// followed (its meaning there is not GitHub's renamed-repository one).
func TestWriteRedirectsOnTheSameHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		// want is the requests the server sees (method, path, body).
		want    int
		wantErr bool
	}{
		{"307 is repeated", http.StatusTemporaryRedirect, 2, false},
		{"308 is repeated", http.StatusPermanentRedirect, 2, false},
		{"301 outside a repository is reported", http.StatusMovedPermanently, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []string
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				got = append(got, r.Method+" "+r.URL.Path+" "+string(b))
				mu.Unlock()
				switch r.URL.Path {
				case "/gists":
					w.Header().Set("Location", "/gists-moved")
					w.WriteHeader(tc.status)
				case "/gists-moved":
					w.WriteHeader(http.StatusCreated)
					w.Write([]byte(`{"id":"g1","html_url":"https://gist.example/g1","public":false,"files":{"a.txt":{"filename":"a.txt"}}}`))
				default:
					w.WriteHeader(http.StatusNotFound)
				}
			}))
			defer api.Close()
			tk := codehost.NewToolkit(codehost.ToolkitOptions{APIBaseURL: api.URL})
			step := stepOf(t, tk.Steps, "codehost.create_gist")
			env := connectors.Env{HTTP: &http.Client{
				Transport:     tk.Wrap("a", http.DefaultTransport),
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}}
			_, err := step.Run(t.Context(), env, []byte(`{"files":{"a.txt":{"content":"hello"}}}`))
			if tc.wantErr != (err != nil) || (err != nil && errCode(err) != connectors.CodeUpstream) {
				t.Fatalf("create gist: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != tc.want {
				t.Fatalf("requests %q, want %d", got, tc.want)
			}
			if tc.want == 2 {
				body := strings.TrimPrefix(got[0], "POST /gists ")
				if got[1] != "POST /gists-moved "+body || !strings.Contains(body, "hello") {
					t.Errorf("requests %q, want the POST repeated with its body", got)
				}
			}
		})
	}
}
