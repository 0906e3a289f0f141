package oascheck

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// petstore is a small description: a path-level parameter, nested
// component references, a multi-segment {path} and an unused component
// that pruning drops.
const petstore = `{
  "openapi": "3.0.3",
  "info": {"title": "pets", "version": "1"},
  "servers": [{"url": "https://pets.example/api"}],
  "paths": {
    "/pets/{id}": {
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
      "get": {
        "operationId": "pets/get",
        "responses": {
          "200": {"description": "a pet", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/pet"}}}},
          "404": {"$ref": "#/components/responses/not_found"}
        }
      }
    },
    "/pets/mine": {
      "get": {"operationId": "pets/mine", "responses": {"204": {"description": "none"}}}
    },
    "/pets": {
      "post": {
        "operationId": "pets/create",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
          "type": "object", "required": ["name"],
          "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["cat", "dog"]}}}}}},
        "responses": {"201": {"description": "made", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/pet"}}}}}
      }
    },
    "/files/{path}": {
      "get": {"operationId": "files/get", "parameters": [{"name": "path", "in": "path", "required": true, "schema": {"type": "string"}, "x-multi-segment": true}],
        "responses": {"200": {"description": "a file"}}}
    }
  },
  "components": {
    "schemas": {
      "pet": {"type": "object", "required": ["id", "name", "owner"], "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "owner": {"$ref": "#/components/schemas/owner"}}},
      "owner": {"type": "object", "required": ["login", "url"], "properties": {
        "login": {"type": "string"}, "url": {"type": "string", "format": "uri"}}},
      "unused": {"type": "object", "properties": {"broken": {"$ref": "#/components/schemas/nowhere"}}}
    },
    "responses": {
      "not_found": {"description": "not found", "content": {"application/json": {"schema": {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}}}}
    }
  }
}`

// pets answers as the description says, except where the test asks it
// not to.
func pets(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/pets/1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id": 1, "name": "rex", "owner": {"login": "ann", "url": "https://pets.example/ann"}}`))
	})
	mux.HandleFunc("GET /api/pets/2", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id": 2, "name": "tom", "owner": {"login": "bob", "url": ""}}`))
	})
	mux.HandleFunc("GET /api/pets/3", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"message": "Not Found"}`))
	})
	mux.HandleFunc("GET /api/pets/4", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	mux.HandleFunc("GET /api/pets/mine", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /api/pets", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id": 5, "name": "new", "owner": {"login": "ann", "url": "https://pets.example/ann"}}`))
	})
	mux.HandleFunc("GET /api/files/", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /api/toys", func(w http.ResponseWriter, r *http.Request) {})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestCheckReportsPerOperation(t *testing.T) {
	d, err := Parse("pets", []byte(petstore))
	if err != nil {
		t.Fatal(err)
	}
	srv := pets(t)
	rec := &Recorder{}
	c := &http.Client{Transport: rec}
	do := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	do("GET", "/api/pets/1", "")                              // conforms
	do("GET", "/api/pets/2", "")                              // owner.url is no URI
	do("GET", "/api/pets/3", "")                              // a listed 404
	do("GET", "/api/pets/4", "")                              // a status the description does not list
	do("GET", "/api/pets/mine", "")                           // the literal path wins over {id}
	do("POST", "/api/pets", `{"name": "new"}`)                // conforms
	do("POST", "/api/pets", `{"name": "new", "kind": "cow"}`) // the request does not
	do("GET", "/api/files/a/b/c.txt", "")                     // {path} spans segments
	do("GET", "/api/toys", "")                                // no such path

	report, err := d.Check(rec.Exchanges())
	if err != nil {
		t.Fatal(err)
	}
	if len(report) != 9 {
		t.Fatalf("%d findings for 9 exchanges", len(report))
	}
	wantOK := []bool{true, false, true, false, true, true, false, true, false}
	for i, f := range report {
		if f.OK() != wantOK[i] {
			t.Errorf("exchange %d (%s %d): OK = %v, want %v: %v %v", i, f.Operation, f.Status, f.OK(), wantOK[i], f.Request, f.Response)
		}
	}
	if report[4].OperationID != "pets/mine" || report[7].OperationID != "files/get" {
		t.Errorf("routed to %q and %q, want pets/mine and files/get", report[4].OperationID, report[7].OperationID)
	}
	fails := report.Failures()
	if got := fails["GET /pets/{id}"]; len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), "url") {
		t.Errorf("GET /pets/{id} failures = %q, want the bad url and the 418", got)
	}
	if got := fails["POST /pets"]; len(got) != 1 || !strings.HasPrefix(got[0], "request: ") {
		t.Errorf("POST /pets failures = %q, want one about the request", got)
	}
	if got := fails["GET /api/toys"]; len(got) != 1 || !strings.Contains(got[0], "no path of pets") {
		t.Errorf("GET /api/toys failures = %q", got)
	}
	if s := report.String(); !strings.HasPrefix(s, "3 of 5 operations do not conform") {
		t.Errorf("String() = %s", s)
	}
}

func TestPruneKeepsWhatIsReached(t *testing.T) {
	d, err := Parse("pets", []byte(petstore))
	if err != nil {
		t.Fatal(err)
	}
	out, err := prune(d.doc, map[string]map[string]bool{"/pets/{id}": {"get": true}})
	if err != nil {
		t.Fatal(err)
	}
	schemas := out["components"].(map[string]any)["schemas"].(map[string]any)
	var names []string
	for n := range schemas {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"owner", "pet"}) {
		t.Errorf("kept schemas %v, want owner and pet", names)
	}
	if _, ok := out["components"].(map[string]any)["responses"].(map[string]any)["not_found"]; !ok {
		t.Error("the referenced response was dropped")
	}
	item := out["paths"].(map[string]any)["/pets/{id}"].(map[string]any)
	if _, ok := item["parameters"]; !ok {
		t.Error("the path-level parameters were dropped")
	}
	if _, err := prune(d.doc, map[string]map[string]bool{"/nowhere": {"get": true}}); err == nil {
		t.Error("pruning to a path the description lacks succeeded")
	}
}

func TestRouterPrefersLiteralSegments(t *testing.T) {
	rt := newRouter(map[string]any{
		"/repos/{owner}/{repo}":                 nil,
		"/repos/{owner}/{repo}/contents/{path}": nil,
		"/repos/{owner}/{repo}/pulls/{n}":       nil,
		"/repos/{owner}/{repo}/pulls/comments":  nil,
		"/gists/{id}.json":                      nil,
	}, func(t string) bool { return strings.HasSuffix(t, "{path}") })
	for path, want := range map[string]string{
		"/repos/a/b":                 "/repos/{owner}/{repo}",
		"/repos/a/b/pulls/comments":  "/repos/{owner}/{repo}/pulls/comments",
		"/repos/a/b/pulls/7":         "/repos/{owner}/{repo}/pulls/{n}",
		"/repos/a/b/contents/x/y.go": "/repos/{owner}/{repo}/contents/{path}",
		"/repos/a/b%2Fc":             "/repos/{owner}/{repo}",
		"/gists/12.json":             "/gists/{id}.json",
		"/repos/a":                   "",
		"/repos/a/b/contents":        "/repos/{owner}/{repo}/contents/{path}",
		"/repos/a/b/pulls/7/files":   "",
	} {
		u, _ := url.Parse(path)
		if got, _ := rt.find(u, ""); got != want {
			t.Errorf("find(%s) = %q, want %q", path, got, want)
		}
	}
}
