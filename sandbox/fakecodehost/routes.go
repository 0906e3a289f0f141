package fakecodehost

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// row is one route name (method and path template) and its handler.
type row struct {
	name Route
	h    func(*call) *reply
}

// table is the routing table. Matching is by method and segment; literal
// segments must match exactly.
func (s *Server) table() []route {
	const rp = "/repos/{owner}/{repo}"
	rows := []row{
		{"GET /rate_limit", (*call).rateLimit},
		{"GET /user", (*call).authenticatedUser},
		{"POST /user/repos", (*call).createRepo},
		{"POST /orgs/{org}/repos", (*call).createRepo},
		{"GET " + rp, (*call).getRepo},
		{"GET " + rp + "/contents", (*call).getContents},
		{"GET " + rp + "/contents/{path...}", (*call).getContents},
		{"PUT " + rp + "/contents/{path...}", (*call).putContents},
		{"DELETE " + rp + "/contents/{path...}", (*call).deleteContents},
		{"PUT /user/starred/{owner}/{repo}", (*call).star},
		{"GET /user/starred/{owner}/{repo}", (*call).star},
		{"DELETE /user/starred/{owner}/{repo}", (*call).star},
		{"GET " + rp + "/branches", (*call).listBranches},
		{"GET " + rp + "/branches/{branch}", (*call).getBranch},
		{"GET " + rp + "/git/ref/{ref...}", (*call).getRef},
		{"POST " + rp + "/git/refs", (*call).createRef},
		{"GET " + rp + "/commits", (*call).listCommits},
		{"GET " + rp + "/commits/{ref}", (*call).getCommit},
		{"GET " + rp + "/issues", (*call).listIssues},
		{"POST " + rp + "/issues", (*call).createIssue},
		{"GET " + rp + "/issues/{issue_number}", (*call).getIssue},
		{"PATCH " + rp + "/issues/{issue_number}", (*call).updateIssue},
		{"POST " + rp + "/issues/{issue_number}/comments", (*call).createComment},
		{"GET " + rp + "/assignees", (*call).listAssignees},
		{"GET /search/issues", (*call).searchIssues},
		{"GET " + rp + "/pulls", (*call).listPulls},
		{"POST " + rp + "/pulls", (*call).createPull},
		{"GET " + rp + "/pulls/{pull_number}", (*call).getPull},
		{"PATCH " + rp + "/pulls/{pull_number}", (*call).updatePull},
		{"GET " + rp + "/pulls/{pull_number}/requested_reviewers", (*call).requestedReviewers},
		{"GET " + rp + "/pulls/{pull_number}/reviews", (*call).listReviews},
		{"PUT " + rp + "/pulls/{pull_number}/merge", (*call).mergePull},
		{"GET " + rp + "/pulls/{pull_number}/merge", (*call).isMerged},
		{"GET " + rp + "/collaborators/{username}", (*call).isCollaborator},
		{"GET " + rp + "/collaborators/{username}/permission", (*call).permission},
		{"PUT " + rp + "/collaborators/{username}", (*call).addCollaborator},
		{"DELETE " + rp + "/collaborators/{username}", (*call).removeCollaborator},
		{"GET " + rp + "/actions/workflows/{workflow_id}", (*call).getWorkflow},
		{"POST " + rp + "/actions/workflows/{workflow_id}/dispatches", (*call).dispatch},
		{"PUT " + rp + "/actions/workflows/{workflow_id}/enable", (*call).setWorkflowState},
		{"PUT " + rp + "/actions/workflows/{workflow_id}/disable", (*call).setWorkflowState},
		{"GET " + rp + "/actions/workflows/{workflow_id}/runs", (*call).listRuns},
		{"GET " + rp + "/actions/runs", (*call).listRuns},
		{"GET " + rp + "/actions/runs/{run_id}", (*call).getRun},
		{"GET " + rp + "/releases", (*call).listReleases},
		{"POST /gists", (*call).createGist},
		{"GET /gists/{gist_id}", (*call).getGist},
		{"PATCH /gists/{gist_id}", (*call).updateGist},
		{"GET /users/{username}/gists", (*call).listGists},
		{"GET /gists", (*call).listOwnGists},
		{"GET /notifications", (*call).listNotifications},
		{"POST /graphql", (*call).graphql},
	}
	rows = append(rows, hookRoutes()...)
	rows = append(rows, reachRoutes()...)
	out := make([]route, len(rows))
	for i, r := range rows {
		out[i] = newRoute(r.name, r.h)
	}
	return out
}

// Errors GitHub answers with its own wording.
func missing(field string) *reply {
	return errorf(http.StatusUnprocessableEntity, "Invalid request.\n\n%q wasn't supplied.", field)
}

func (c *call) query(k string) string { return c.r.URL.Query().Get(k) }

// repo resolves {owner}/{repo}: 404 when it does not exist or the caller
// cannot see it, 301 to /repositories/{id} for a renamed one. The 301 is
// given for every method: GitHub's REST description documents 301 for a
// renamed repository's reads and writes alike (get repository, update
// issue) and no other status, and its documentation has clients repeat
// the request at the Location.
func (c *call) repo() (*repo, *reply) {
	key := repoKey(c.p["owner"], c.p["repo"])
	if to, ok := c.s.st.renamed[key]; ok {
		r := c.s.st.repos[to]
		segs := strings.SplitN(c.r.URL.EscapedPath(), "/", 5)
		rest := ""
		if len(segs) == 5 {
			rest = "/" + segs[4]
		}
		loc := fmt.Sprintf("%s/repositories/%d%s", c.base, r.id, rest)
		if c.r.URL.RawQuery != "" {
			loc += "?" + c.r.URL.RawQuery
		}
		return nil, (&reply{status: http.StatusMovedPermanently, body: M{"message": "Moved Permanently", "url": loc, "documentation_url": docsURL}}).set("Location", loc)
	}
	r := c.s.st.repos[key]
	if r == nil || !c.s.st.visible(r, c.login) {
		return nil, notFound()
	}
	return r, nil
}

// repoWith resolves the repository and requires role want; GitHub hides
// write endpoints from callers without the right behind a 404.
func (c *call) repoWith(want string) (*repo, *reply) {
	r, rep := c.repo()
	if rep != nil {
		return nil, rep
	}
	if !c.s.st.can(r, c.login, want) {
		return nil, notFound()
	}
	return r, nil
}

func (c *call) number(r *repo, key string) (*issue, *reply) {
	n, err := strconv.Atoi(c.p[key])
	if err != nil || n < 1 || n > len(r.issues) {
		return nil, notFound()
	}
	return r.issues[n-1], nil
}

func (c *call) rateLimit() *reply {
	token, _, _ := c.s.authenticate(c.r)
	res := M{}
	for _, name := range []string{ResourceCore, ResourceSearch, ResourceGraphQL} {
		b := c.s.bucketLocked(token, name, c.now)
		res[name] = M{"limit": b.limit, "remaining": b.limit - b.used, "used": b.used, "reset": b.reset.Unix(), "resource": name}
	}
	return okBody(M{"resources": res, "rate": res[ResourceCore]})
}

var repoNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func (c *call) createRepo() *reply {
	var in struct {
		Name              *string `json:"name"`
		Description       string  `json:"description"`
		Homepage          string  `json:"homepage"`
		Private           bool    `json:"private"`
		Visibility        string  `json:"visibility"`
		AutoInit          bool    `json:"auto_init"`
		GitignoreTemplate string  `json:"gitignore_template"`
		LicenseTemplate   string  `json:"license_template"`
		HasIssues         *bool   `json:"has_issues"`
		HasProjects       *bool   `json:"has_projects"`
		HasWiki           *bool   `json:"has_wiki"`
		IsTemplate        bool    `json:"is_template"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	owner := c.login
	if org, isOrg := c.p["org"]; isOrg {
		u := c.s.st.users[strings.ToLower(org)]
		if u == nil || !u.org {
			return notFound()
		}
		if _, member := u.roles[c.login]; !member {
			return errorf(http.StatusForbidden, "You need admin access to the organization before adding a repository to it.")
		}
		owner = u.login
	}
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return invalid("Repository", "name", "missing_field")
	}
	name := repoNameChars.ReplaceAllString(strings.TrimSpace(*in.Name), "-")
	visibility := "public"
	if in.Private {
		visibility = "private"
	}
	if in.Visibility != "" {
		allowed := []string{"public", "private"}
		if org, isOrg := c.p["org"]; isOrg && slices.ContainsFunc(c.s.o.EnterpriseOrgs, func(e string) bool { return strings.EqualFold(e, org) }) {
			allowed = append(allowed, "internal")
		}
		if !slices.Contains(allowed, in.Visibility) {
			if in.Visibility == "internal" {
				return validation(M{"resource": "Repository", "code": "custom", "field": "visibility",
					"message": "visibility can only be internal for organizations on GitHub Enterprise Cloud"})
			}
			return invalid("Repository", "visibility", "invalid")
		}
		visibility = in.Visibility
	}
	key := repoKey(owner, name)
	if c.s.st.repos[key] != nil {
		return validation(M{"resource": "Repository", "code": "custom", "field": "name", "message": "name already exists on this account"})
	}
	r := newRepo(c.s.st.id(), owner, name, c.now)
	r.description, r.homepage, r.isTemplate = in.Description, in.Homepage, in.IsTemplate
	r.visibility, r.private = visibility, visibility != "public"
	for _, f := range []struct {
		v   *bool
		dst *bool
	}{{in.HasIssues, &r.hasIssues}, {in.HasProjects, &r.hasProjects}, {in.HasWiki, &r.hasWiki}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if in.AutoInit || in.GitignoreTemplate != "" || in.LicenseTemplate != "" {
		c.s.st.commitOn(r, r.defaultBranch, c.login, "Initial commit", c.now, func(t map[string][]byte) []change {
			t["README.md"] = []byte("# " + name + "\n\n" + in.Description + "\n")
			if in.GitignoreTemplate != "" {
				t[".gitignore"] = []byte("# " + in.GitignoreTemplate + "\n")
			}
			if in.LicenseTemplate != "" {
				t["LICENSE"] = []byte(strings.ToUpper(in.LicenseTemplate) + " License\n")
			}
			return []change{{filename: "README.md", status: "added", additions: 3}}
		})
	}
	c.s.st.repos[key] = r
	if !c.s.st.can(r, c.login, "admin") {
		// GitHub makes the member who creates an organisation's repository
		// its admin.
		r.collaborators[c.login] = "admin"
	}
	// A new repository has no hooks of its own yet: only its
	// organisation's hooks hear of it.
	c.emit(r, "repository", M{"action": "created"})
	return created(c.repoJSON(r))
}

func (c *call) getRepo() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	return okBody(c.repoJSON(r))
}

// resolve finds the commit a ref names: a branch (optionally
// refs/heads/ or heads/), a release tag, or a full or abbreviated sha.
func (r *repo) resolve(ref string) *commit {
	if ref == "" {
		ref = r.defaultBranch
	}
	b := strings.TrimPrefix(strings.TrimPrefix(ref, "refs/"), "heads/")
	if sha, ok := r.branches[b]; ok {
		return r.commits[sha]
	}
	for _, rl := range r.releases {
		if rl.tag == ref || "tags/"+rl.tag == strings.TrimPrefix(ref, "refs/") {
			return r.resolve(rl.target)
		}
	}
	if cm := r.commits[ref]; cm != nil {
		return cm
	}
	if len(ref) >= 7 {
		var found *commit
		for sha, cm := range r.commits {
			if strings.HasPrefix(sha, ref) {
				if found != nil {
					return nil
				}
				found = cm
			}
		}
		return found
	}
	return nil
}

func (c *call) getContents() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if len(r.branches) == 0 {
		return errorf(http.StatusNotFound, "This repository is empty.")
	}
	ref := c.query("ref")
	cm := r.resolve(ref)
	if cm == nil {
		return errorf(http.StatusNotFound, "No commit found for the ref %s", ref)
	}
	if ref == "" {
		ref = r.defaultBranch
	}
	p := c.p["path"]
	if data, ok := cm.tree[p]; ok {
		return okBody(c.fileJSON(r, p, data, ref, true))
	}
	prefix := ""
	if p != "" {
		prefix = p + "/"
	}
	seen := map[string]bool{}
	var names []string
	for k := range cm.tree {
		rest, found := strings.CutPrefix(k, prefix)
		if !found {
			continue
		}
		first, _, _ := strings.Cut(rest, "/")
		if !seen[first] {
			seen[first] = true
			names = append(names, first)
		}
	}
	if len(names) == 0 {
		return notFound()
	}
	slices.Sort(names)
	out := []any{}
	for _, n := range names {
		full := prefix + n
		if data, isFile := cm.tree[full]; isFile {
			out = append(out, c.fileJSON(r, full, data, ref, false))
			continue
		}
		sub := map[string][]byte{}
		for k, v := range cm.tree {
			if strings.HasPrefix(k, full+"/") {
				sub[k] = v
			}
		}
		sha := treeSHA(sub)
		m := M{"type": "dir", "size": 0, "name": n, "path": full, "sha": sha, "download_url": nil}
		for k, v := range c.contentLinks(r, full, "dir", sha, ref) {
			m[k] = v
		}
		out = append(out, m)
	}
	return okBody(out)
}

func decode64(s string) ([]byte, bool) {
	clean := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	b, err := base64.StdEncoding.DecodeString(clean)
	return b, err == nil
}

type person struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

func (c *call) gitCommitJSON(r *repo, cm *commit, who *person) M {
	au := c.gitUser(cm.author, cm.date)
	if who != nil && who.Name != "" {
		au["name"], au["email"] = who.Name, who.Email
	}
	parents := []any{}
	for _, p := range cm.parents {
		parents = append(parents, M{"sha": p, "url": c.repoURL(r) + "/git/commits/" + p, "html_url": repoHTML(r) + "/commit/" + p})
	}
	return M{
		"sha": cm.sha, "node_id": nodeID("Commit", int64(len(cm.sha))), "url": c.repoURL(r) + "/git/commits/" + cm.sha,
		"html_url": repoHTML(r) + "/commit/" + cm.sha, "author": au, "committer": au, "message": cm.message,
		"tree":    M{"sha": treeSHA(cm.tree), "url": c.repoURL(r) + "/git/trees/" + treeSHA(cm.tree)},
		"parents": parents, "verification": M{"verified": false, "reason": "unsigned", "signature": nil, "payload": nil},
	}
}

func (c *call) putContents() *reply {
	r, rep := c.repoWith("push")
	if rep != nil {
		return rep
	}
	var in struct {
		Message   *string `json:"message"`
		Content   *string `json:"content"`
		SHA       string  `json:"sha"`
		Branch    string  `json:"branch"`
		Committer *person `json:"committer"`
		Author    *person `json:"author"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	switch {
	case in.Message == nil:
		return missing("message")
	case in.Content == nil:
		return missing("content")
	}
	data, valid := decode64(*in.Content)
	if !valid {
		return errorf(http.StatusUnprocessableEntity, "content is not valid Base64")
	}
	branch := in.Branch
	if branch == "" {
		branch = r.defaultBranch
	}
	p := c.p["path"]
	var old []byte
	existed := false
	if head, ok := r.branches[branch]; ok {
		old, existed = r.commits[head].tree[p]
	} else if len(r.branches) > 0 || branch != r.defaultBranch {
		return errorf(http.StatusNotFound, "Branch %s not found", branch)
	}
	if existed {
		if in.SHA == "" {
			return missing("sha")
		}
		if in.SHA != blobSHA(old) {
			return errorf(http.StatusConflict, "%s does not match %s", p, in.SHA)
		}
	}
	cm := c.s.st.commitOn(r, branch, c.login, *in.Message, c.now, writeFile(p, data))
	body := M{"content": c.fileJSON(r, p, data, branch, false), "commit": c.gitCommitJSON(r, cm, in.Author)}
	if existed {
		return okBody(body)
	}
	return created(body)
}

func (c *call) deleteContents() *reply {
	r, rep := c.repoWith("push")
	if rep != nil {
		return rep
	}
	var in struct {
		Message *string `json:"message"`
		SHA     *string `json:"sha"`
		Branch  string  `json:"branch"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	switch {
	case in.Message == nil:
		return missing("message")
	case in.SHA == nil:
		return missing("sha")
	}
	branch := in.Branch
	if branch == "" {
		branch = r.defaultBranch
	}
	head, found := r.branches[branch]
	if !found {
		return errorf(http.StatusNotFound, "Branch %s not found", branch)
	}
	p := c.p["path"]
	old, existed := r.commits[head].tree[p]
	if !existed {
		return notFound()
	}
	if *in.SHA != blobSHA(old) {
		return errorf(http.StatusConflict, "%s does not match %s", p, *in.SHA)
	}
	cm := c.s.st.commitOn(r, branch, c.login, *in.Message, c.now, func(t map[string][]byte) []change {
		delete(t, p)
		return []change{{filename: p, status: "removed", deletions: lines(old)}}
	})
	return okBody(M{"content": nil, "commit": c.gitCommitJSON(r, cm, nil)})
}

func (c *call) star() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	switch c.r.Method {
	case http.MethodPut:
		if c.r.ContentLength < 0 {
			return errorf(http.StatusLengthRequired, "Length Required")
		}
		r.stargazers[c.login] = true
	case http.MethodDelete:
		delete(r.stargazers, c.login)
	default:
		if !r.stargazers[c.login] {
			return notFound()
		}
	}
	return noContent()
}

func (c *call) branchJSON(r *repo, name string, full bool) M {
	sha := r.branches[name]
	m := M{"name": name, "protected": r.protected[name]}
	if full {
		m["commit"] = c.commitJSON(r, r.commits[sha], false)
		m["_links"] = M{"self": c.repoURL(r) + "/branches/" + name, "html": repoHTML(r) + "/tree/" + name}
		m["protection"] = M{"enabled": r.protected[name], "required_status_checks": M{"enforcement_level": "off", "contexts": []string{}, "checks": []any{}}}
		m["protection_url"] = c.repoURL(r) + "/branches/" + name + "/protection"
	} else {
		m["commit"] = M{"sha": sha, "url": c.repoURL(r) + "/commits/" + sha}
	}
	return m
}

func (c *call) listBranches() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	names := make([]string, 0, len(r.branches))
	for n := range r.branches {
		if p := c.query("protected"); p == "" || (p == "true") == r.protected[n] {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	items := make([]any, len(names))
	for i, n := range names {
		items[i] = c.branchJSON(r, n, false)
	}
	return c.page(items, "")
}

func (c *call) getBranch() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if _, found := r.branches[c.p["branch"]]; !found {
		return errorf(http.StatusNotFound, "Branch not found")
	}
	return okBody(c.branchJSON(r, c.p["branch"], true))
}

func (c *call) refJSON(r *repo, branch string) M {
	sha := r.branches[branch]
	return M{
		"ref": "refs/heads/" + branch, "node_id": nodeID("Ref", int64(len(branch))),
		"url":    c.repoURL(r) + "/git/refs/heads/" + branch,
		"object": M{"sha": sha, "type": "commit", "url": c.repoURL(r) + "/git/commits/" + sha},
	}
}

func (c *call) getRef() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if len(r.branches) == 0 {
		return errorf(http.StatusConflict, "Git Repository is empty.")
	}
	b, isHead := strings.CutPrefix(c.p["ref"], "heads/")
	if _, found := r.branches[b]; !isHead || !found {
		return notFound()
	}
	return okBody(c.refJSON(r, b))
}

func (c *call) createRef() *reply {
	r, rep := c.repoWith("push")
	if rep != nil {
		return rep
	}
	var in struct {
		Ref *string `json:"ref"`
		SHA *string `json:"sha"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	switch {
	case in.Ref == nil:
		return missing("ref")
	case in.SHA == nil:
		return missing("sha")
	case !strings.HasPrefix(*in.Ref, "refs/") || strings.Count(*in.Ref, "/") < 2:
		return errorf(http.StatusUnprocessableEntity, "Reference name must start with 'refs' and have at least two slashes.")
	case len(r.branches) == 0:
		return errorf(http.StatusConflict, "Git Repository is empty.")
	}
	b, isHead := strings.CutPrefix(*in.Ref, "refs/heads/")
	if !isHead || b == "" || strings.HasSuffix(b, "/") || strings.Contains(b, "..") {
		return errorf(http.StatusUnprocessableEntity, "%s is not a valid ref name.", *in.Ref)
	}
	if _, exists := r.branches[b]; exists {
		return errorf(http.StatusUnprocessableEntity, "Reference already exists")
	}
	if r.commits[*in.SHA] == nil {
		return errorf(http.StatusUnprocessableEntity, "Object does not exist")
	}
	r.branches[b] = *in.SHA
	return created(c.refJSON(r, b))
}

func parseTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

func (c *call) listCommits() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if len(r.branches) == 0 {
		return errorf(http.StatusConflict, "Git Repository is empty.")
	}
	cm := r.resolve(c.query("sha"))
	if cm == nil {
		return notFound()
	}
	p, author := c.query("path"), c.query("author")
	since, hasSince := parseTime(c.query("since"))
	until, hasUntil := parseTime(c.query("until"))
	var items []any
	for ; cm != nil; cm = r.commits[first(cm.parents)] {
		if author != "" && !strings.EqualFold(author, cm.author) {
			continue
		}
		if hasSince && cm.date.Before(since) || hasUntil && cm.date.After(until) {
			continue
		}
		if p != "" && !slices.ContainsFunc(cm.changes, func(ch change) bool {
			return ch.filename == p || strings.HasPrefix(ch.filename, p+"/")
		}) {
			continue
		}
		items = append(items, c.commitJSON(r, cm, false))
	}
	return c.page(items, "")
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func (c *call) getCommit() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if len(r.branches) == 0 {
		return errorf(http.StatusConflict, "Git Repository is empty.")
	}
	cm := r.resolve(c.p["ref"])
	if cm == nil {
		return errorf(http.StatusUnprocessableEntity, "No commit found for SHA: %s", c.p["ref"])
	}
	return okBody(c.commitJSON(r, cm, true))
}

func (c *call) listIssues() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	q := c.r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var labels []string
	if l := q.Get("labels"); l != "" {
		labels = strings.Split(l, ",")
	}
	since, hasSince := parseTime(q.Get("since"))
	var sel []*issue
	for _, is := range r.issues {
		if state != "all" && is.state != state {
			continue
		}
		if slices.ContainsFunc(labels, func(l string) bool { return !slices.Contains(is.labels, strings.TrimSpace(l)) }) {
			continue
		}
		if a := q.Get("assignee"); a != "" && !(a == "*" && len(is.assignees) > 0 || a == "none" && len(is.assignees) == 0 || slices.Contains(is.assignees, a)) {
			continue
		}
		if cr := q.Get("creator"); cr != "" && !strings.EqualFold(cr, is.user) {
			continue
		}
		if hasSince && is.updated.Before(since) {
			continue
		}
		sel = append(sel, is)
	}
	sortIssues(sel, q.Get("sort"), q.Get("direction"))
	items := make([]any, len(sel))
	for i, is := range sel {
		items[i] = c.issueJSON(r, is)
	}
	return c.page(items, "")
}

func sortIssues(sel []*issue, by, dir string) {
	key := func(is *issue) int64 {
		switch by {
		case "updated":
			return is.updated.UnixNano()
		case "comments":
			return int64(len(is.comments))
		}
		return is.created.UnixNano()*1000 + int64(is.number)
	}
	slices.SortStableFunc(sel, func(a, b *issue) int {
		if dir == "asc" {
			return cmpInt(key(a), key(b))
		}
		return cmpInt(key(b), key(a))
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// stringList reads GitHub's lists of names, which may also be objects
// with a name (labels) or a login.
func stringList(raw json.RawMessage) ([]string, bool) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	out := []string{}
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			out = append(out, s)
			continue
		}
		var o struct {
			Name  string `json:"name"`
			Login string `json:"login"`
		}
		if json.Unmarshal(it, &o) != nil || o.Name+o.Login == "" {
			return nil, false
		}
		out = append(out, o.Name+o.Login)
	}
	return out, true
}

// issueFields are the writable fields of an issue; nil means absent.
type issueFields struct {
	Title       json.RawMessage `json:"title"`
	Body        *string         `json:"body"`
	State       *string         `json:"state"`
	StateReason *string         `json:"state_reason"`
	Assignee    *string         `json:"assignee"`
	Assignees   json.RawMessage `json:"assignees"`
	Labels      json.RawMessage `json:"labels"`
	Milestone   json.RawMessage `json:"milestone"`
}

// apply validates f and writes it to is. A caller without push access
// cannot set labels, assignees or milestones: GitHub drops them silently.
func (c *call) apply(r *repo, is *issue, f issueFields, creating bool) *reply {
	if f.Title != nil {
		var title any
		_ = json.Unmarshal(f.Title, &title)
		switch t := title.(type) {
		case string:
			if strings.TrimSpace(t) == "" {
				return invalid("Issue", "title", "missing_field")
			}
			is.title = t
		case float64:
			is.title = strconv.FormatFloat(t, 'f', -1, 64)
		default:
			return invalid("Issue", "title", "missing_field")
		}
	} else if creating {
		return invalid("Issue", "title", "missing_field")
	}
	if f.Body != nil {
		is.body = *f.Body
	}
	triage := c.s.st.can(r, c.login, "triage")
	if f.Assignees != nil && string(f.Assignees) != "null" {
		as, valid := stringList(f.Assignees)
		if !valid {
			return invalid("Issue", "assignees", "invalid")
		}
		if f.Assignee != nil && *f.Assignee != "" {
			as = append(as, *f.Assignee)
		}
		if len(as) > 10 {
			return invalid("Issue", "assignees", "invalid")
		}
		for _, a := range as {
			if !c.s.st.can(r, a, "push") {
				return validation(M{"resource": "Issue", "field": "assignees", "code": "invalid", "value": a})
			}
		}
		if triage {
			is.assignees = dedupe(as)
		}
	}
	if f.Labels != nil && string(f.Labels) != "null" {
		ls, valid := stringList(f.Labels)
		if !valid || slices.Contains(ls, "") {
			return invalid("Label", "name", "invalid")
		}
		if triage {
			is.labels = dedupe(ls)
		}
	}
	if f.Milestone != nil {
		var m any
		_ = json.Unmarshal(f.Milestone, &m)
		n := 0
		switch v := m.(type) {
		case nil:
		case float64:
			n = int(v)
		case string:
			var err error
			if n, err = strconv.Atoi(v); err != nil {
				return invalid("Issue", "milestone", "invalid")
			}
		default:
			return invalid("Issue", "milestone", "invalid")
		}
		if n != 0 && !slices.ContainsFunc(r.milestones, func(ms milestone) bool { return ms.number == n }) {
			return invalid("Issue", "milestone", "invalid")
		}
		if triage {
			is.milestone = n
		}
	}
	if f.StateReason != nil && !slices.Contains([]string{"completed", "not_planned", "duplicate", "reopened"}, *f.StateReason) {
		return invalid("Issue", "state_reason", "invalid")
	}
	if f.State != nil {
		switch *f.State {
		case "open":
			if is.state == "closed" {
				if is.pr != nil && is.pr.merged {
					return validation(M{"resource": "PullRequest", "code": "custom", "message": "state cannot be changed. The pull request cannot be reopened."})
				}
				is.state, is.stateReason, is.closed = "open", "reopened", time.Time{}
			}
		case "closed":
			if is.state == "open" {
				is.state, is.stateReason, is.closed = "closed", "completed", c.now
			}
		default:
			return invalid("Issue", "state", "invalid")
		}
	}
	if f.StateReason != nil && is.state == "closed" && *f.StateReason != "reopened" {
		is.stateReason = *f.StateReason
	}
	is.updated = c.now
	return nil
}

func dedupe(s []string) []string {
	out := []string{}
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func (c *call) createIssue() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if !r.hasIssues {
		return errorf(http.StatusGone, "Issues are disabled for this repo")
	}
	var f issueFields
	if rep := c.decode(&f); rep != nil {
		return rep
	}
	is := &issue{id: c.s.st.id(), number: len(r.issues) + 1, user: c.login, state: "open", labels: []string{}, assignees: []string{}, created: c.now}
	if rep := c.apply(r, is, f, true); rep != nil {
		return rep
	}
	r.issues = append(r.issues, is)
	r.updated = c.now
	c.emit(r, "issues", M{"action": "opened", "issue": c.issueJSON(r, is)})
	c.mentions(r, is, is.body, "")
	return created(c.issueJSON(r, is))
}

func (c *call) getIssue() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	is, rep := c.number(r, "issue_number")
	if rep != nil {
		return rep
	}
	return okBody(c.issueJSON(r, is))
}

func (c *call) updateIssue() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	is, rep := c.number(r, "issue_number")
	if rep != nil {
		return rep
	}
	if !c.s.st.can(r, c.login, "triage") && is.user != c.login {
		return errorf(http.StatusForbidden, "Must have triage access to update this issue.")
	}
	var f issueFields
	if rep := c.decode(&f); rep != nil {
		return rep
	}
	next := *is
	if rep := c.apply(r, &next, f, false); rep != nil {
		return rep
	}
	before := *is
	*is = next
	c.changed(r, &before, is)
	return okBody(c.issueJSON(r, is))
}

func (c *call) createComment() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	is, rep := c.number(r, "issue_number")
	if rep != nil {
		return rep
	}
	var in struct {
		Body *string `json:"body"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	if in.Body == nil || strings.TrimSpace(*in.Body) == "" {
		return invalid("IssueComment", "body", "missing_field")
	}
	cm := comment{id: c.s.st.id(), user: c.login, body: *in.Body, created: c.now, modified: c.now}
	is.comments = append(is.comments, cm)
	is.updated = c.now
	c.emit(r, "issue_comment", M{"action": "created", "issue": c.issueJSON(r, is), "comment": c.commentJSON(r, is, cm)})
	c.mentions(r, is, cm.body, fmt.Sprintf("/repos/%s/%s/issues/comments/%d", r.owner, r.name, cm.id))
	return created(c.commentJSON(r, is, cm))
}

func (c *call) commentJSON(r *repo, is *issue, cm comment) M {
	kind := "issues"
	if is.pr != nil {
		kind = "pull"
	}
	return M{
		"id": cm.id, "node_id": nodeID("IssueComment", cm.id), "url": c.repoURL(r) + fmt.Sprintf("/issues/comments/%d", cm.id),
		"body": cm.body, "user": c.user(cm.user),
		"html_url":   repoHTML(r) + fmt.Sprintf("/%s/%d#issuecomment-%d", kind, is.number, cm.id),
		"issue_url":  c.repoURL(r) + fmt.Sprintf("/issues/%d", is.number),
		"created_at": ts(cm.created), "updated_at": ts(cm.modified), "author_association": c.association(r, cm.user),
	}
}

// changed delivers the events of an issue or pull request update, from
// before to after: edited (title, body, base), labeled, unlabeled,
// assigned, unassigned, milestoned, demilestoned, closed and reopened, as
// issues events or, for a pull request, pull_request events.
func (c *call) changed(r *repo, before, after *issue) {
	send := func(action string, extra M) {
		m := M{"action": action}
		if after.pr != nil {
			m["number"], m["pull_request"] = after.number, c.pullJSON(r, after)
		} else {
			m["issue"] = c.issueJSON(r, after)
		}
		for k, v := range extra {
			m[k] = v
		}
		event := "issues"
		if after.pr != nil {
			event = "pull_request"
		}
		c.emit(r, event, m)
	}
	changes := M{}
	if before.title != after.title {
		changes["title"] = M{"from": before.title}
	}
	if before.body != after.body {
		changes["body"] = M{"from": before.body}
	}
	if before.pr != nil && after.pr != nil && before.pr.base != after.pr.base {
		changes["base"] = M{"ref": M{"from": before.pr.base}, "sha": M{"from": before.pr.baseSHA}}
	}
	if len(changes) > 0 {
		send("edited", M{"changes": changes})
	}
	diff := func(from, to []string, action string, extra func(string) M) {
		for _, v := range to {
			if !slices.Contains(from, v) {
				send(action, extra(v))
			}
		}
	}
	label := func(l string) M { return M{"label": c.labelsJSON(r, []string{l})[0]} }
	assignee := func(a string) M { return M{"assignee": c.user(a)} }
	diff(before.labels, after.labels, "labeled", label)
	diff(after.labels, before.labels, "unlabeled", label)
	diff(before.assignees, after.assignees, "assigned", assignee)
	diff(after.assignees, before.assignees, "unassigned", assignee)
	if before.milestone != after.milestone {
		if before.milestone != 0 {
			send("demilestoned", M{"milestone": c.milestoneJSON(r, before.milestone)})
		}
		if after.milestone != 0 {
			send("milestoned", M{"milestone": c.milestoneJSON(r, after.milestone)})
		}
	}
	switch {
	case before.state == "open" && after.state == "closed":
		send("closed", nil)
	case before.state == "closed" && after.state == "open":
		send("reopened", nil)
	}
}

func (c *call) listAssignees() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	logins := []string{r.owner}
	for l, role := range r.collaborators {
		if roleRank[role] >= roleRank["push"] {
			logins = append(logins, l)
		}
	}
	slices.Sort(logins[1:])
	return c.page(c.users(logins), "")
}

// searchIssues understands the qualifiers repo:, user:/org:, is:/type:,
// state:, label:, author:, assignee:, in:title and free words (matched in
// title and body).
func (c *call) searchIssues() *reply {
	q := strings.TrimSpace(c.query("q"))
	if q == "" {
		return invalid("Search", "q", "missing")
	}
	type hit struct {
		r  *repo
		is *issue
	}
	var hits []hit
	terms := strings.Fields(q)
	for _, r := range c.s.st.repos {
		if !c.s.st.visible(r, c.login) {
			continue
		}
	next:
		for _, is := range r.issues {
			for _, t := range terms {
				k, v, qualified := strings.Cut(t, ":")
				if !qualified {
					k, v = "", t
				}
				v = strings.Trim(v, `"`)
				matched := true
				switch strings.ToLower(k) {
				case "repo":
					matched = strings.EqualFold(v, r.owner+"/"+r.name)
				case "user", "org", "owner":
					matched = strings.EqualFold(v, r.owner)
				case "is", "type", "state":
					switch v {
					case "issue":
						matched = is.pr == nil
					case "pr", "pull-request":
						matched = is.pr != nil
					case "open", "closed":
						matched = is.state == v
					case "merged":
						matched = is.pr != nil && is.pr.merged
					}
				case "label":
					matched = slices.Contains(is.labels, v)
				case "author":
					matched = strings.EqualFold(v, is.user)
				case "assignee":
					matched = slices.Contains(is.assignees, v)
				case "in", "sort":
				case "":
					lv := strings.ToLower(v)
					matched = strings.Contains(strings.ToLower(is.title), lv) || strings.Contains(strings.ToLower(is.body), lv)
				default:
					matched = false
				}
				if !matched {
					continue next
				}
			}
			hits = append(hits, hit{r, is})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if a.r.id != b.r.id {
			return cmpInt(a.r.id, b.r.id)
		}
		return a.is.number - b.is.number
	})
	sel := make([]*issue, len(hits))
	byIssue := map[*issue]*repo{}
	for i, h := range hits {
		sel[i] = h.is
		byIssue[h.is] = h.r
	}
	if by := c.query("sort"); by != "" {
		sortIssues(sel, by, c.query("order"))
	}
	items := make([]any, len(sel))
	for i, is := range sel {
		m := c.issueJSON(byIssue[is], is)
		m["score"] = 1.0
		items[i] = m
	}
	return c.page(items, "items")
}

func (c *call) listPulls() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	q := c.r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	var sel []*issue
	for _, is := range r.issues {
		if is.pr == nil || state != "all" && is.state != state {
			continue
		}
		if h := q.Get("head"); h != "" && h != r.owner+":"+is.pr.head {
			continue
		}
		if b := q.Get("base"); b != "" && b != is.pr.base {
			continue
		}
		sel = append(sel, is)
	}
	sortIssues(sel, q.Get("sort"), q.Get("direction"))
	items := make([]any, len(sel))
	for i, is := range sel {
		m := c.pullJSON(r, is)
		// GitHub's list leaves out what it computes per pull request.
		for _, k := range []string{"merged", "mergeable", "mergeable_state", "merged_by", "comments", "review_comments",
			"maintainer_can_modify", "commits", "additions", "deletions", "changed_files"} {
			delete(m, k)
		}
		items[i] = m
	}
	return c.page(items, "")
}

func (c *call) createPull() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	var in struct {
		Title               *string `json:"title"`
		Head                *string `json:"head"`
		Base                *string `json:"base"`
		Body                string  `json:"body"`
		Draft               bool    `json:"draft"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	switch {
	case in.Head == nil || *in.Head == "":
		return invalid("PullRequest", "head", "missing_field")
	case in.Base == nil || *in.Base == "":
		return invalid("PullRequest", "base", "missing_field")
	case in.Title == nil || strings.TrimSpace(*in.Title) == "":
		return invalid("PullRequest", "title", "missing_field")
	}
	head := *in.Head
	if o, b, qualified := strings.Cut(head, ":"); qualified {
		if !strings.EqualFold(o, r.owner) {
			return invalid("PullRequest", "head", "invalid")
		}
		head = b
	}
	headSHA, okHead := r.branches[head]
	baseSHA, okBase := r.branches[*in.Base]
	switch {
	case !okBase:
		return invalid("PullRequest", "base", "invalid")
	case !okHead:
		return invalid("PullRequest", "head", "invalid")
	case headSHA == baseSHA:
		return validation(M{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("No commits between %s and %s", *in.Base, head)})
	}
	for _, is := range r.issues {
		if is.pr != nil && is.state == "open" && is.pr.head == head && is.pr.base == *in.Base {
			return validation(M{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("A pull request already exists for %s:%s.", r.owner, head)})
		}
	}
	is := &issue{
		id: c.s.st.id(), number: len(r.issues) + 1, title: *in.Title, body: in.Body, user: c.login, state: "open",
		labels: []string{}, assignees: []string{}, created: c.now, updated: c.now,
		pr: &pull{head: head, base: *in.Base, headSHA: headSHA, baseSHA: baseSHA, draft: in.Draft, mergeable: true,
			maintainerCanModify: in.MaintainerCanModify == nil || *in.MaintainerCanModify},
	}
	r.issues = append(r.issues, is)
	c.emit(r, "pull_request", M{"action": "opened", "number": is.number, "pull_request": c.pullJSON(r, is)})
	c.mentions(r, is, is.body, "")
	return created(c.pullJSON(r, is))
}

func (c *call) pullParam() (*repo, *issue, *reply) {
	r, rep := c.repo()
	if rep != nil {
		return nil, nil, rep
	}
	is, rep := c.number(r, "pull_number")
	if rep != nil {
		return nil, nil, rep
	}
	if is.pr == nil {
		return nil, nil, notFound()
	}
	return r, is, nil
}

func (c *call) getPull() *reply {
	r, is, rep := c.pullParam()
	if rep != nil {
		return rep
	}
	return okBody(c.pullJSON(r, is))
}

func (c *call) updatePull() *reply {
	r, is, rep := c.pullParam()
	if rep != nil {
		return rep
	}
	if !c.s.st.can(r, c.login, "push") && is.user != c.login {
		return errorf(http.StatusForbidden, "Must have push access to update this pull request.")
	}
	var in struct {
		Title               *string `json:"title"`
		Body                *string `json:"body"`
		State               *string `json:"state"`
		Base                *string `json:"base"`
		MaintainerCanModify *bool   `json:"maintainer_can_modify"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	next := *is
	pr := *is.pr
	next.pr = &pr
	if in.Base != nil {
		sha, found := r.branches[*in.Base]
		if !found {
			return invalid("PullRequest", "base", "invalid")
		}
		pr.base, pr.baseSHA = *in.Base, sha
	}
	if in.MaintainerCanModify != nil {
		pr.maintainerCanModify = *in.MaintainerCanModify
	}
	f := issueFields{Body: in.Body, State: in.State}
	if in.Title != nil {
		f.Title, _ = json.Marshal(*in.Title)
	}
	if rep := c.apply(r, &next, f, false); rep != nil {
		return rep
	}
	before := *is
	*is = next
	c.changed(r, &before, is)
	return okBody(c.pullJSON(r, is))
}

func (c *call) requestedReviewers() *reply {
	_, is, rep := c.pullParam()
	if rep != nil {
		return rep
	}
	return okBody(M{"users": c.users(is.pr.requested), "teams": []any{}})
}

func (c *call) listReviews() *reply {
	r, is, rep := c.pullParam()
	if rep != nil {
		return rep
	}
	items := make([]any, len(is.pr.reviews))
	for i, rv := range is.pr.reviews {
		items[i] = M{
			"id": rv.id, "node_id": nodeID("PullRequestReview", rv.id), "user": c.user(rv.user), "body": rv.body,
			"state": rv.state, "commit_id": rv.commitID, "submitted_at": ts(rv.submitted),
			"html_url":           repoHTML(r) + fmt.Sprintf("/pull/%d#pullrequestreview-%d", is.number, rv.id),
			"pull_request_url":   c.repoURL(r) + fmt.Sprintf("/pulls/%d", is.number),
			"author_association": c.association(r, rv.user),
			"_links": M{
				"html":         M{"href": repoHTML(r) + fmt.Sprintf("/pull/%d#pullrequestreview-%d", is.number, rv.id)},
				"pull_request": M{"href": c.repoURL(r) + fmt.Sprintf("/pulls/%d", is.number)},
			},
		}
	}
	return c.page(items, "")
}

func (c *call) mergePull() *reply {
	r, is, rep := c.pullParam()
	if rep != nil {
		return rep
	}
	if !c.s.st.can(r, c.login, "push") {
		return errorf(http.StatusForbidden, "Must have push access to merge this pull request.")
	}
	var in struct {
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
		SHA           string `json:"sha"`
		MergeMethod   string `json:"merge_method"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	if in.MergeMethod == "" {
		in.MergeMethod = "merge"
	}
	p := is.pr
	switch {
	case !slices.Contains([]string{"merge", "squash", "rebase"}, in.MergeMethod):
		return invalid("PullRequest", "merge_method", "invalid")
	case p.merged || is.state != "open" || !p.mergeable:
		return errorf(http.StatusMethodNotAllowed, "Pull Request is not mergeable")
	case p.draft:
		return errorf(http.StatusMethodNotAllowed, "Pull Request is still a draft")
	case in.SHA != "" && in.SHA != p.headSHA:
		return errorf(http.StatusConflict, "Head branch was modified. Review and try the merge again.")
	}
	title := in.CommitTitle
	if title == "" {
		title = fmt.Sprintf("Merge pull request #%d from %s/%s", is.number, r.owner, p.head)
	}
	msg := title
	if in.CommitMessage != "" {
		msg += "\n\n" + in.CommitMessage
	}
	headTree := r.commits[p.headSHA].tree
	cm := c.s.st.commitOn(r, p.base, c.login, msg, c.now, func(t map[string][]byte) []change {
		var ch []change
		for k, v := range headTree {
			if old, had := t[k]; !had || !bytes.Equal(old, v) {
				ch = append(ch, change{filename: k, status: "modified", additions: lines(v), deletions: lines(old)})
				t[k] = v
			}
		}
		return ch
	})
	if in.MergeMethod == "merge" {
		cm.parents = append(cm.parents, p.headSHA)
	}
	p.merged, p.mergedAt, p.mergedBy, p.mergeSHA = true, c.now, c.login, cm.sha
	is.state, is.closed, is.updated = "closed", c.now, c.now
	c.emit(r, "pull_request", M{"action": "closed", "number": is.number, "pull_request": c.pullJSON(r, is)})
	return okBody(M{"sha": cm.sha, "merged": true, "message": "Pull Request successfully merged"})
}

func (c *call) isMerged() *reply {
	_, is, rep := c.pullParam()
	if rep != nil {
		return rep
	}
	if !is.pr.merged {
		return notFound()
	}
	return noContent()
}

func (c *call) isCollaborator() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if c.s.st.role(r, c.p["username"]) == "" {
		return notFound()
	}
	return noContent()
}

// permissionNames maps a role to the permission and role_name GitHub
// reports.
var permissionNames = map[string][2]string{
	"admin": {"admin", "admin"}, "maintain": {"write", "maintain"}, "push": {"write", "write"},
	"triage": {"read", "triage"}, "pull": {"read", "read"}, "": {"none", ""},
}

func (c *call) permission() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	u := c.s.st.users[strings.ToLower(c.p["username"])]
	if u == nil {
		return notFound()
	}
	role := c.s.st.role(r, u.login)
	names := permissionNames[role]
	um := c.user(u.login).(M)
	um["permissions"] = M{"admin": roleRank[role] >= 5, "maintain": roleRank[role] >= 4, "push": roleRank[role] >= 3,
		"triage": roleRank[role] >= 2, "pull": roleRank[role] >= 1}
	um["role_name"] = names[1]
	return okBody(M{"permission": names[0], "role_name": names[1], "user": um})
}

func (c *call) addCollaborator() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if !c.s.st.can(r, c.login, "admin") {
		return errorf(http.StatusForbidden, "Must have admin rights to Repository.")
	}
	var in struct {
		Permission string `json:"permission"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	if in.Permission == "" {
		in.Permission = "push"
	}
	if _, known := roleRank[in.Permission]; !known || in.Permission == "" {
		return invalid("Repository", "permission", "invalid")
	}
	u := c.s.st.users[strings.ToLower(c.p["username"])]
	if u == nil || u.org {
		return notFound()
	}
	if strings.EqualFold(u.login, r.owner) {
		return validation(M{"resource": "Repository", "code": "custom", "message": "Repository owner cannot be a collaborator"})
	}
	if _, already := r.collaborators[u.login]; already {
		r.collaborators[u.login] = in.Permission
		return noContent()
	}
	var inv *invitation
	for _, i := range r.invitations {
		if i.invitee == u.login {
			inv = i
		}
	}
	if inv == nil {
		inv = &invitation{id: c.s.st.id(), invitee: u.login, inviter: c.login, created: c.now}
		r.invitations = append(r.invitations, inv)
	}
	inv.permission = in.Permission
	perm := map[string]string{"pull": "read", "push": "write", "triage": "triage", "maintain": "maintain", "admin": "admin"}[in.Permission]
	return created(M{
		"id": inv.id, "node_id": nodeID("RepositoryInvitation", inv.id), "repository": c.repoJSON(r),
		"invitee": c.user(inv.invitee), "inviter": c.user(inv.inviter), "permissions": perm,
		"created_at": ts(inv.created), "expired": false,
		"url":      c.base + fmt.Sprintf("/user/repository_invitations/%d", inv.id),
		"html_url": repoHTML(r) + "/invitations",
	})
}

func (c *call) removeCollaborator() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	if !c.s.st.can(r, c.login, "admin") {
		return errorf(http.StatusForbidden, "Must have admin rights to Repository.")
	}
	login := c.p["username"]
	delete(r.collaborators, login)
	r.invitations = slices.DeleteFunc(r.invitations, func(i *invitation) bool { return i.invitee == login })
	return noContent()
}

// workflow finds {workflow_id}: a numeric id or a file name.
func (c *call) workflow(r *repo) (*workflow, *reply) {
	id := c.p["workflow_id"]
	for _, w := range r.workflows {
		if strconv.FormatInt(w.id, 10) == id || w.path == ".github/workflows/"+id {
			return w, nil
		}
	}
	return nil, notFound()
}

func (c *call) getWorkflow() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	w, rep := c.workflow(r)
	if rep != nil {
		return rep
	}
	return okBody(c.workflowJSON(r, w))
}

func (c *call) dispatch() *reply {
	r, rep := c.repoWith("push")
	if rep != nil {
		return rep
	}
	w, rep := c.workflow(r)
	if rep != nil {
		return rep
	}
	var in struct {
		Ref              *string        `json:"ref"`
		Inputs           map[string]any `json:"inputs"`
		ReturnRunDetails bool           `json:"return_run_details"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	if in.Ref == nil {
		return invalid("Workflow", "ref", "missing_field")
	}
	cm := r.resolve(*in.Ref)
	switch {
	case cm == nil:
		return errorf(http.StatusUnprocessableEntity, "No ref found for: %s", *in.Ref)
	case len(in.Inputs) > 25:
		return errorf(http.StatusUnprocessableEntity, "you may only define up to 25 `inputs` for a `workflow_dispatch` event")
	case w.state != "active":
		return errorf(http.StatusUnprocessableEntity, "Cannot trigger a 'workflow_dispatch' on a disabled workflow")
	case !w.dispatchable:
		return errorf(http.StatusUnprocessableEntity, "Workflow does not have 'workflow_dispatch' trigger")
	}
	n := 0
	for _, rn := range r.runs {
		if rn.workflowID == w.id {
			n = max(n, rn.number)
		}
	}
	branch := strings.TrimPrefix(strings.TrimPrefix(*in.Ref, "refs/"), "heads/")
	rn := &run{id: c.s.st.id(), workflowID: w.id, number: n + 1, branch: branch, sha: cm.sha, event: "workflow_dispatch", actor: c.login, created: c.now}
	r.runs = append(r.runs, rn)
	if in.ReturnRunDetails {
		return okBody(M{"workflow_run_id": rn.id, "run_url": c.repoURL(r) + fmt.Sprintf("/actions/runs/%d", rn.id),
			"html_url": repoHTML(r) + fmt.Sprintf("/actions/runs/%d", rn.id)})
	}
	return noContent()
}

func (c *call) setWorkflowState() *reply {
	r, rep := c.repoWith("push")
	if rep != nil {
		return rep
	}
	w, rep := c.workflow(r)
	if rep != nil {
		return rep
	}
	w.state = "active"
	if strings.HasSuffix(c.r.URL.Path, "/disable") {
		w.state = "disabled_manually"
	}
	w.updated = c.now
	return noContent()
}

var runStatuses = map[string]bool{"completed": true, "in_progress": true, "queued": true, "requested": true, "waiting": true, "pending": true}

func (c *call) listRuns() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	var only *workflow
	if _, byWorkflow := c.p["workflow_id"]; byWorkflow {
		if only, rep = c.workflow(r); rep != nil {
			return rep
		}
	}
	q := c.r.URL.Query()
	var items []any
	for i := len(r.runs) - 1; i >= 0; i-- {
		rn := r.runs[i]
		status, conclusion := rn.status(c.now)
		switch {
		case only != nil && rn.workflowID != only.id,
			q.Get("branch") != "" && q.Get("branch") != rn.branch,
			q.Get("event") != "" && q.Get("event") != rn.event,
			q.Get("actor") != "" && !strings.EqualFold(q.Get("actor"), rn.actor),
			q.Get("status") != "" && runStatuses[q.Get("status")] && q.Get("status") != status,
			q.Get("status") != "" && !runStatuses[q.Get("status")] && q.Get("status") != conclusion:
			continue
		}
		items = append(items, c.runJSON(r, rn))
	}
	return c.page(items, "workflow_runs")
}

func (c *call) getRun() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	for _, rn := range r.runs {
		if strconv.FormatInt(rn.id, 10) == c.p["run_id"] {
			return okBody(c.runJSON(r, rn))
		}
	}
	return notFound()
}

func (c *call) listReleases() *reply {
	r, rep := c.repo()
	if rep != nil {
		return rep
	}
	var items []any
	for i := len(r.releases) - 1; i >= 0; i-- {
		if rl := r.releases[i]; !rl.draft || c.s.st.can(r, c.login, "push") {
			items = append(items, c.releaseJSON(r, rl))
		}
	}
	return c.page(items, "")
}

// gistFile is one entry of a gist's files object; a null entry deletes a
// file on update.
type gistFile struct {
	Content  *string `json:"content"`
	Filename *string `json:"filename"`
}

func (c *call) createGist() *reply {
	var in struct {
		Description string               `json:"description"`
		Public      any                  `json:"public"`
		Files       map[string]*gistFile `json:"files"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	if len(in.Files) == 0 {
		return invalid("Gist", "files", "missing_field")
	}
	files := map[string]string{}
	for name, f := range in.Files {
		if f == nil || f.Content == nil || *f.Content == "" || strings.TrimSpace(name) == "" {
			return invalid("Gist", "files", "missing_field")
		}
		files[name] = *f.Content
	}
	public := in.Public == true || in.Public == "true"
	g := &gist{id: fmt.Sprintf("%020x", c.s.st.id()), owner: c.login, description: in.Description, public: public,
		files: files, created: c.now, updated: c.now}
	c.s.st.gists = append(c.s.st.gists, g)
	return created(c.gistJSON(g, true))
}

func (c *call) gist() (*gist, *reply) {
	for _, g := range c.s.st.gists {
		if g.id == c.p["gist_id"] {
			return g, nil
		}
	}
	return nil, notFound()
}

func (c *call) getGist() *reply {
	g, rep := c.gist()
	if rep != nil {
		return rep
	}
	return okBody(c.gistJSON(g, true))
}

func (c *call) updateGist() *reply {
	g, rep := c.gist()
	if rep != nil {
		return rep
	}
	if g.owner != c.login {
		return notFound()
	}
	var in struct {
		Description *string              `json:"description"`
		Files       map[string]*gistFile `json:"files"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	files := map[string]string{}
	for k, v := range g.files {
		files[k] = v
	}
	for name, f := range in.Files {
		old, had := files[name]
		if f == nil || f.Content == nil && f.Filename == nil {
			delete(files, name)
			continue
		}
		content := old
		if f.Content != nil {
			content = *f.Content
		} else if !had {
			return invalid("Gist", "files", "missing_field")
		}
		to := name
		if f.Filename != nil && *f.Filename != "" {
			delete(files, name)
			to = *f.Filename
		}
		files[to] = content
	}
	if len(files) == 0 {
		return invalid("Gist", "files", "missing_field")
	}
	if in.Description != nil {
		g.description = *in.Description
	}
	g.files, g.updated = files, c.now
	return okBody(c.gistJSON(g, true))
}

// listGists serves GET /users/{username}/gists: the user's public gists
// only, as GitHub documents it, also when the caller is that user (whose
// secret gists GET /gists lists).
func (c *call) listGists() *reply {
	u := c.s.st.users[strings.ToLower(c.p["username"])]
	if u == nil {
		return notFound()
	}
	since, hasSince := parseTime(c.query("since"))
	var items []any
	for i := len(c.s.st.gists) - 1; i >= 0; i-- {
		g := c.s.st.gists[i]
		if g.owner != u.login || !g.public || hasSince && g.updated.Before(since) {
			continue
		}
		items = append(items, c.gistJSON(g, false))
	}
	return c.page(items, "")
}

// graphql serves the updateProjectV2ItemFieldValue mutation and the node
// query of a Projects (v2) field. GraphQL errors are answered with HTTP
// 200 and errors[].
func (c *call) graphql() *reply {
	var in struct {
		Query     *string        `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	gqlErr := func(typ, msg string) *reply {
		e := M{"message": msg, "locations": []M{{"line": 1, "column": 1}}}
		if typ != "" {
			e["type"], e["path"] = typ, []string{"updateProjectV2ItemFieldValue"}
		}
		return okBody(M{"data": M{"updateProjectV2ItemFieldValue": nil}, "errors": []M{e}})
	}
	if in.Query == nil {
		return okBody(M{"errors": []M{{"message": "A query attribute must be specified and must be a string."}}})
	}
	if !strings.Contains(*in.Query, "updateProjectV2ItemFieldValue") {
		if strings.Contains(*in.Query, "node(id:") {
			id, _ := in.Variables["id"].(string)
			return c.graphqlNode(id)
		}
		return okBody(M{"errors": []M{{"message": "fakecodehost serves only the updateProjectV2ItemFieldValue mutation and node(id:) of a project field"}}})
	}
	input, _ := in.Variables["input"].(map[string]any)
	str := func(k string) string { s, _ := input[k].(string); return s }
	value, _ := input["value"].(map[string]any)
	option, _ := value["singleSelectOptionId"].(string)
	projectID, itemID, fieldID := str("projectId"), str("itemId"), str("fieldId")
	if projectID == "" || itemID == "" || fieldID == "" || option == "" {
		return okBody(M{"errors": []M{{"message": "Variable $input of type UpdateProjectV2ItemFieldValueInput! was provided invalid value", "extensions": M{"code": "argumentLiteralsIncompatible"}}}})
	}
	p := c.s.st.projects[projectID]
	switch {
	case p == nil || p.owner != c.login:
		return gqlErr("NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", projectID))
	case p.items[itemID] == nil:
		return gqlErr("NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", itemID))
	case p.fields[fieldID] == nil:
		return gqlErr("NOT_FOUND", fmt.Sprintf("Could not resolve to a node with the global id of '%s'", fieldID))
	case p.fields[fieldID].options[option] == "":
		return gqlErr("UNPROCESSABLE", "The single select option Id does not belong to the field")
	}
	p.items[itemID][fieldID] = option
	return okBody(M{"data": M{"updateProjectV2ItemFieldValue": M{"projectV2Item": M{"id": itemID}}}})
}

// graphqlNode answers node(id:) for the nodes of the caller's projects: a
// field (with its options when it is single-select), an item or the
// project itself, as GitHub answers the fragments the codehost steps ask
// for (ProjectV2FieldCommon, ProjectV2SingleSelectField).
func (c *call) graphqlNode(id string) *reply {
	if id == "" {
		return okBody(M{"errors": []M{{"message": "Variable $id of type ID! was provided invalid value", "extensions": M{"code": "argumentLiteralsIncompatible"}}}})
	}
	for _, p := range c.s.st.projects {
		if p.owner != c.login {
			continue
		}
		if f := p.fields[id]; f != nil {
			typename := "ProjectV2Field"
			node := M{"id": id, "name": f.name, "dataType": f.dataType}
			if f.dataType == "SINGLE_SELECT" {
				typename = "ProjectV2SingleSelectField"
				opts := []M{}
				for _, oid := range slices.Sorted(maps.Keys(f.options)) {
					opts = append(opts, M{"id": oid, "name": f.options[oid]})
				}
				node["options"] = opts
			}
			node["__typename"] = typename
			return okBody(M{"data": M{"node": node}})
		}
		if p.items[id] != nil {
			return okBody(M{"data": M{"node": M{"__typename": "ProjectV2Item"}}})
		}
		if p.id == id {
			return okBody(M{"data": M{"node": M{"__typename": "ProjectV2"}}})
		}
	}
	return okBody(M{"data": M{"node": nil}, "errors": []M{{"type": "NOT_FOUND", "path": []string{"node"},
		"locations": []M{{"line": 2, "column": 3}},
		"message":   fmt.Sprintf("Could not resolve to a node with the global id of '%s'.", id)}}})
}
