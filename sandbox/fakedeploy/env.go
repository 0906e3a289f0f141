package fakedeploy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Environment variable types and targets.
var (
	envTypes   = []string{"system", "secret", "encrypted", "plain", "sensitive"}
	envTargets = []string{"production", "preview", "development"}
	envKey     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// maxEnvValue is Vercel's limit on one value (64 KB).
const maxEnvValue = 65536

// envBody is one variable of POST /v10/projects/{idOrName}/env, of a
// project's environmentVariables, or the PATCH body (every field
// optional there).
type envBody struct {
	Key                  *string         `json:"key"`
	Value                *string         `json:"value"`
	Type                 *string         `json:"type"`
	Target               json.RawMessage `json:"target"`
	GitBranch            *string         `json:"gitBranch"`
	Comment              *string         `json:"comment"`
	CustomEnvironmentIDs []string        `json:"customEnvironmentIds"`
}

var envKnown = []string{"key", "value", "type", "target", "gitBranch", "comment", "customEnvironmentIds"}

// toEnv checks b and returns the variable it makes: from scratch when old
// is nil (key, value and type required, as Vercel requires them), else old
// with b's fields changed. field names b in messages. Callers hold mu.
func (b *envBody) toEnv(field string, p *Project, old *EnvVar) (EnvVar, string) {
	var e EnvVar
	if old != nil {
		e = *old
		e.Target = slices.Clone(old.Target)
		e.CustomEnvironmentIDs = slices.Clone(old.CustomEnvironmentIDs)
	} else {
		for _, req := range []struct {
			name string
			set  bool
		}{{"key", b.Key != nil}, {"value", b.Value != nil}, {"type", b.Type != nil}} {
			if !req.set {
				return e, fmt.Sprintf("Invalid request: `%s` missing required property `%s`.", field, req.name)
			}
		}
		if len(b.Target) == 0 && len(b.CustomEnvironmentIDs) == 0 {
			return e, fmt.Sprintf("Invalid request: `%s` should have either `target` or `customEnvironmentIds`.", field)
		}
	}
	if b.Key != nil {
		if !envKey.MatchString(*b.Key) {
			return e, "The name of your Environment Variable contains invalid characters. Only letters, digits, and underscores are allowed. Furthermore, the name should not start with a digit."
		}
		e.Key = *b.Key
	}
	if b.Value != nil {
		if len(*b.Value) > maxEnvValue {
			return e, fmt.Sprintf("The value of %s exceeds the limit of 64 KB.", e.Key)
		}
		e.Value = *b.Value
	}
	if b.Type != nil {
		if !slices.Contains(envTypes, *b.Type) {
			return e, fmt.Sprintf("Invalid request: `%s.type` should be equal to one of the allowed values \"%s\".", field, strings.Join(envTypes, "\", \""))
		}
		e.Type = *b.Type
	}
	if len(b.Target) > 0 {
		var list []string
		if err := json.Unmarshal(b.Target, &list); err != nil {
			var one string
			if err := json.Unmarshal(b.Target, &one); err != nil {
				return e, fmt.Sprintf("Invalid request: `%s.target` should be array.", field)
			}
			list = []string{one}
		}
		for _, t := range list {
			if !slices.Contains(envTargets, t) {
				return e, fmt.Sprintf("Invalid request: `%s.target` should be equal to one of the allowed values \"production\", \"preview\", \"development\"; %q is not one.", field, t)
			}
		}
		slices.Sort(list)
		e.Target = slices.Compact(list)
	}
	if b.CustomEnvironmentIDs != nil {
		for _, id := range b.CustomEnvironmentIDs {
			if _, ok := p.customEnvironment(id); !ok {
				return e, fmt.Sprintf("Custom environment %q was not found in project %s.", id, p.Name)
			}
		}
		e.CustomEnvironmentIDs = slices.Clone(b.CustomEnvironmentIDs)
	}
	if b.GitBranch != nil {
		e.GitBranch = *b.GitBranch
	}
	if b.Comment != nil {
		if len(*b.Comment) > 500 {
			return e, "Invalid request: `comment` should NOT be longer than 500 characters."
		}
		e.Comment = *b.Comment
	}
	if e.GitBranch != "" && !slices.Equal(e.Target, []string{"preview"}) {
		return e, "A Git branch can only be set for an Environment Variable that targets only the Preview environment."
	}
	if e.Type == "sensitive" && slices.Contains(e.Target, "development") {
		return e, "Sensitive Environment Variables cannot be created in the Development environment."
	}
	return e, ""
}

// envClash reports whether a and b are the same variable to Vercel: the
// same key for an overlapping environment and the same branch.
func envClash(a, b EnvVar) bool {
	if a.Key != b.Key || a.GitBranch != b.GitBranch {
		return false
	}
	return slices.ContainsFunc(a.Target, func(t string) bool { return slices.Contains(b.Target, t) }) ||
		slices.ContainsFunc(a.CustomEnvironmentIDs, func(t string) bool { return slices.Contains(b.CustomEnvironmentIDs, t) })
}

func branchName(b string) string {
	if b == "" {
		return "undefined"
	}
	return b
}

// fillEnv fills a variable's id, type and times. Callers hold mu.
func (s *Server) fillEnv(e *EnvVar, now time.Time) {
	if e.ID == "" {
		e.ID = s.nextID()[:16]
	}
	if e.Type == "" {
		e.Type = "encrypted"
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	if e.UpdatedAt.IsZero() {
		e.UpdatedAt = e.CreatedAt
	}
	if e.CreatedBy == "" {
		e.CreatedBy = DefaultUserID
	}
	if e.UpdatedBy == "" {
		e.UpdatedBy = e.CreatedBy
	}
}

// envJSON is an environment variable as Vercel answers it.
type envJSON struct {
	ID                   string   `json:"id"`
	Key                  string   `json:"key"`
	Value                string   `json:"value"`
	Type                 string   `json:"type"`
	Target               []string `json:"target,omitempty"`
	GitBranch            string   `json:"gitBranch,omitempty"`
	Comment              string   `json:"comment,omitempty"`
	CustomEnvironmentIDs []string `json:"customEnvironmentIds,omitempty"`
	ConfigurationID      *string  `json:"configurationId"`
	CreatedAt            int64    `json:"createdAt"`
	UpdatedAt            int64    `json:"updatedAt"`
	CreatedBy            string   `json:"createdBy"`
	UpdatedBy            string   `json:"updatedBy"`
	Decrypted            *bool    `json:"decrypted,omitempty"`
	SecurityIssues       *[]any   `json:"securityIssues,omitempty"` // in lists only
}

// toJSON shapes e: an encrypted value is shown as ciphertext unless
// decrypt, a sensitive one never.
func (e *EnvVar) toJSON(decrypt bool) envJSON {
	out := envJSON{
		ID: e.ID, Key: e.Key, Value: e.Value, Type: e.Type, Target: e.Target, GitBranch: e.GitBranch,
		Comment: e.Comment, CustomEnvironmentIDs: e.CustomEnvironmentIDs,
		CreatedAt: e.CreatedAt.UnixMilli(), UpdatedAt: e.UpdatedAt.UnixMilli(),
		CreatedBy: e.CreatedBy, UpdatedBy: e.UpdatedBy,
	}
	switch e.Type {
	case "encrypted":
		out.Decrypted = &decrypt
		if !decrypt {
			out.Value = ciphertext(e.ID, e.Value)
		}
	case "sensitive":
		f := false
		out.Decrypted = &f
		out.Value = ""
	}
	return out
}

// ciphertext is an opaque stand-in for Vercel's encrypted value.
func ciphertext(id, value string) string {
	return base64.RawStdEncoding.EncodeToString([]byte(`{"v":"v2","iv":"` + id + `","c":"` + sha256Hex(id+value) + `"}`))
}

// envProject resolves the request's project, answering 404 itself.
// Callers hold mu.
func (s *Server) envProject(w http.ResponseWriter, r *http.Request, sc scope) *Project {
	p := s.findProject(sc.owner, r.PathValue("idOrName"))
	if p == nil {
		writeError(w, http.StatusNotFound, "not_found", "Project not found")
	}
	return p
}

// listEnv is GET /v9 and /v10/projects/{idOrName}/env: {envs, pagination};
// decrypt=true shows encrypted values, gitBranch and customEnvironmentId
// or customEnvironmentSlug filter.
func (s *Server) listEnv(w http.ResponseWriter, r *http.Request, sc scope) {
	q := r.URL.Query()
	decrypt := q.Get("decrypt") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.envProject(w, r, sc)
	if p == nil {
		return
	}
	ceID := q.Get("customEnvironmentId")
	if slug := q.Get("customEnvironmentSlug"); slug != "" {
		ce, ok := p.customEnvironment(slug)
		if !ok {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("Custom environment %q was not found", slug))
			return
		}
		ceID = ce.ID
	}
	branch := q.Get("gitBranch")
	envs := []envJSON{}
	for i := range p.Env {
		e := &p.Env[i]
		switch {
		case branch != "" && e.GitBranch != "" && e.GitBranch != branch:
		case ceID != "" && !slices.Contains(e.CustomEnvironmentIDs, ceID):
		default:
			j := e.toJSON(decrypt)
			j.SecurityIssues = &[]any{}
			envs = append(envs, j)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"envs": envs, "pagination": paginationJSON{Count: len(envs)}})
}

// getEnv is GET /v1/projects/{idOrName}/env/{id}: the variable, decrypted.
func (s *Server) getEnv(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.envProject(w, r, sc)
	if p == nil {
		return
	}
	i := p.envIndex(r.PathValue("id"))
	if i < 0 {
		writeError(w, http.StatusNotFound, "not_found", "Environment Variable not found")
		return
	}
	writeJSON(w, http.StatusOK, p.Env[i].toJSON(true))
}

func (p *Project) envIndex(id string) int {
	return slices.IndexFunc(p.Env, func(e EnvVar) bool { return e.ID == id })
}

// createEnv is POST /v10/projects/{idOrName}/env: a variable or an array of
// them; 201 {created, failed}. A variable that exists for an overlapping
// target is replaced with upsert=true; otherwise a single one is refused
// (400 ENV_ALREADY_EXISTS) and in an array it is listed in failed.
func (s *Server) createEnv(w http.ResponseWriter, r *http.Request, sc scope) {
	raw, _ := io.ReadAll(r.Body)
	raw = bytes.TrimSpace(raw)
	upsert := r.URL.Query().Get("upsert") == "true"
	var items []json.RawMessage
	array := len(raw) > 0 && raw[0] == '['
	if array {
		if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: the body should be an environment variable or a non-empty array of them.")
			return
		}
	} else {
		items = []json.RawMessage{raw}
	}
	bodies := make([]envBody, len(items))
	for i, it := range items {
		if !decodeStrict(w, it, &bodies[i], envKnown) {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.envProject(w, r, sc)
	if p == nil {
		return
	}
	now := s.now()
	var created []envJSON
	failed := []any{}
	for i, b := range bodies {
		field := "body"
		if array {
			field = fmt.Sprintf("body[%d]", i)
		}
		e, msg := b.toEnv(field, p, nil)
		if msg != "" {
			writeError(w, http.StatusBadRequest, "bad_request", msg)
			return
		}
		clash := slices.IndexFunc(p.Env, func(o EnvVar) bool { return envClash(o, e) })
		if clash >= 0 && !upsert {
			msg := fmt.Sprintf("A variable with the name `%s` already exists for the target %s on branch %s", e.Key, strings.Join(e.Target, ","), branchName(e.GitBranch))
			if !array {
				writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
					"code": "ENV_ALREADY_EXISTS", "message": msg, "key": e.Key, "envVarKey": e.Key, "envVarId": p.Env[clash].ID, "target": e.Target,
				}})
				return
			}
			failed = append(failed, map[string]any{"error": map[string]any{
				"code": "ENV_ALREADY_EXISTS", "message": msg, "key": e.Key, "envVarKey": e.Key, "envVarId": p.Env[clash].ID, "target": e.Target,
			}})
			continue
		}
		e.CreatedBy, e.UpdatedBy = sc.userID, sc.userID
		if clash >= 0 {
			e.ID, e.CreatedAt, e.CreatedBy = p.Env[clash].ID, p.Env[clash].CreatedAt, p.Env[clash].CreatedBy
			e.UpdatedAt = now
			p.Env[clash] = e
		} else {
			s.fillEnv(&e, now)
			p.Env = append(p.Env, e)
		}
		created = append(created, e.toJSON(false))
	}
	p.UpdatedAt = now
	var out any = created
	if !array {
		out = created[0]
	} else if created == nil {
		out = []envJSON{}
	}
	writeJSON(w, http.StatusCreated, map[string]any{"created": out, "failed": failed})
}

// editEnv is PATCH /v9/projects/{idOrName}/env/{id}: 200 with the changed
// variable.
func (s *Server) editEnv(w http.ResponseWriter, r *http.Request, sc scope) {
	raw, _ := io.ReadAll(r.Body)
	var b envBody
	if !decodeStrict(w, raw, &b, envKnown) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.envProject(w, r, sc)
	if p == nil {
		return
	}
	i := p.envIndex(r.PathValue("id"))
	if i < 0 {
		writeError(w, http.StatusNotFound, "not_found", "Environment Variable not found")
		return
	}
	e, msg := b.toEnv("body", p, &p.Env[i])
	if msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	for j, o := range p.Env {
		if j != i && envClash(o, e) {
			writeError(w, http.StatusBadRequest, "ENV_ALREADY_EXISTS", fmt.Sprintf("A variable with the name `%s` already exists for the target %s on branch %s", e.Key, strings.Join(e.Target, ","), branchName(e.GitBranch)))
			return
		}
	}
	e.UpdatedAt, e.UpdatedBy = s.now(), sc.userID
	p.Env[i] = e
	p.UpdatedAt = e.UpdatedAt
	writeJSON(w, http.StatusOK, e.toJSON(false))
}

// deleteEnv is DELETE /v9/projects/{idOrName}/env/{id}: 200 with the
// deleted variable.
func (s *Server) deleteEnv(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.envProject(w, r, sc)
	if p == nil {
		return
	}
	i := p.envIndex(r.PathValue("id"))
	if i < 0 {
		writeError(w, http.StatusNotFound, "not_found", "Environment Variable not found")
		return
	}
	e := p.Env[i]
	p.Env = slices.Delete(p.Env, i, i+1)
	p.UpdatedAt = s.now()
	writeJSON(w, http.StatusOK, e.toJSON(false))
}
