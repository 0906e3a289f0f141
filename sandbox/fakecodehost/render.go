package fakecodehost

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
)

const webURL = "https://github.com"

// ts formats a timestamp the way GitHub does, or null when zero.
func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func nodeID(kind string, id int64) string {
	return base64.RawStdEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d", kind, id))
}

func (c *call) user(login string) any {
	u := c.s.st.users[strings.ToLower(login)]
	if u == nil {
		return nil
	}
	return c.simpleUser(u)
}

// simpleUser is GitHub's simple-user: a user or organisation as other
// resources embed it, with the URLs of its related resources.
func (c *call) simpleUser(u *user) M {
	typ := "User"
	if u.org {
		typ = "Organization"
	}
	api := c.base + "/users/" + u.login
	return M{
		"login": u.login, "id": u.id, "node_id": nodeID("User", u.id), "type": typ, "user_view_type": "public", "site_admin": false,
		"avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", u.id), "gravatar_id": "",
		"url": api, "html_url": webURL + "/" + u.login,
		"followers_url": api + "/followers", "following_url": api + "/following{/other_user}",
		"gists_url": api + "/gists{/gist_id}", "starred_url": api + "/starred{/owner}{/repo}",
		"subscriptions_url": api + "/subscriptions", "organizations_url": api + "/orgs", "repos_url": api + "/repos",
		"events_url": api + "/events{/privacy}", "received_events_url": api + "/received_events",
	}
}

// authenticatedUser serves GET /user: the caller's own profile, GitHub's
// private-user (the simple-user, its public profile, and what only its
// owner sees).
func (c *call) authenticatedUser() *reply {
	u := c.s.st.users[strings.ToLower(c.login)]
	if u == nil {
		return notFound()
	}
	public, private := 0, 0
	for _, r := range c.s.st.repos {
		switch {
		case !strings.EqualFold(r.owner, u.login):
		case r.private:
			private++
		default:
			public++
		}
	}
	gists, secret := 0, 0
	for _, g := range c.s.st.gists {
		switch {
		case !strings.EqualFold(g.owner, u.login):
		case g.public:
			gists++
		default:
			secret++
		}
	}
	m := c.simpleUser(u)
	maps.Copy(m, M{
		"user_view_type": "private", "name": nullable(u.name), "email": nullable(u.email),
		"company": nil, "blog": "", "location": nil, "hireable": nil, "bio": nil, "twitter_username": nil,
		"public_repos": public, "public_gists": gists, "followers": 0, "following": 0,
		"created_at": ts(seedEpoch), "updated_at": ts(seedEpoch),
		"total_private_repos": private, "owned_private_repos": private, "private_gists": secret,
		"disk_usage": 0, "collaborators": 0, "two_factor_authentication": true,
		"plan": M{"name": "free", "space": 976562499, "collaborators": 0, "private_repos": 10000},
	})
	return okBody(m)
}

func (c *call) users(logins []string) []any {
	out := []any{}
	for _, l := range logins {
		if u := c.user(l); u != nil {
			out = append(out, u)
		}
	}
	return out
}

func (c *call) repoURL(r *repo) string { return c.base + "/repos/" + r.owner + "/" + r.name }
func repoHTML(r *repo) string          { return webURL + "/" + r.owner + "/" + r.name }

func (c *call) repoJSON(r *repo) M {
	open := 0
	for _, is := range r.issues {
		if is.state == "open" {
			open++
		}
	}
	role := c.s.st.role(r, c.login)
	m := M{
		"id": r.id, "node_id": nodeID("Repository", r.id), "name": r.name, "full_name": r.owner + "/" + r.name,
		"owner": c.user(r.owner), "private": r.private, "visibility": r.visibility,
		"html_url": repoHTML(r), "description": nullable(r.description), "fork": false, "url": c.repoURL(r),
		"homepage": nullable(r.homepage), "language": nil, "size": len(r.commits), "mirror_url": nil,
		"stargazers_count": len(r.stargazers), "watchers_count": len(r.stargazers), "watchers": len(r.stargazers),
		"subscribers_count": len(r.stargazers), "network_count": 0,
		"forks_count": 0, "forks": 0, "open_issues_count": open, "open_issues": open,
		"has_issues": r.hasIssues, "has_projects": r.hasProjects, "has_wiki": r.hasWiki,
		"has_downloads": true, "has_pages": false, "has_discussions": false,
		"archived": false, "disabled": false, "is_template": r.isTemplate, "topics": []string{},
		"license": nil, "default_branch": r.defaultBranch,
		"created_at": ts(r.created), "updated_at": ts(r.updated), "pushed_at": ts(r.pushed),
		"clone_url": repoHTML(r) + ".git", "git_url": "git://github.com/" + r.owner + "/" + r.name + ".git",
		"ssh_url": "git@github.com:" + r.owner + "/" + r.name + ".git", "svn_url": repoHTML(r),
		"permissions": M{
			"admin": roleRank[role] >= roleRank["admin"], "maintain": roleRank[role] >= roleRank["maintain"],
			"push": roleRank[role] >= roleRank["push"], "triage": roleRank[role] >= roleRank["triage"],
			"pull": roleRank[role] >= roleRank["pull"] || !r.private,
		},
	}
	maps.Copy(m, c.repoURLs(r))
	return m
}

// repoURLs are the URLs (or RFC 6570 templates) of a repository's
// related resources, which every repository shape carries, as GitHub
// spells them.
func (c *call) repoURLs(r *repo) M {
	api := c.repoURL(r)
	m := M{}
	for _, kv := range [][2]string{
		{"archive", "{archive_format}{/ref}"}, {"assignees", "assignees{/user}"}, {"blobs", "git/blobs{/sha}"},
		{"branches", "branches{/branch}"}, {"collaborators", "collaborators{/collaborator}"}, {"comments", "comments{/number}"},
		{"commits", "commits{/sha}"}, {"compare", "compare/{base}...{head}"}, {"contents", "contents/{+path}"},
		{"contributors", "contributors"}, {"deployments", "deployments"}, {"downloads", "downloads"}, {"events", "events"},
		{"forks", "forks"}, {"git_commits", "git/commits{/sha}"}, {"git_refs", "git/refs{/sha}"}, {"git_tags", "git/tags{/sha}"},
		{"hooks", "hooks"}, {"issue_comment", "issues/comments{/number}"}, {"issue_events", "issues/events{/number}"},
		{"issues", "issues{/number}"}, {"keys", "keys{/key_id}"}, {"labels", "labels{/name}"}, {"languages", "languages"},
		{"merges", "merges"}, {"milestones", "milestones{/number}"}, {"notifications", "notifications{?since,all,participating}"},
		{"pulls", "pulls{/number}"}, {"releases", "releases{/id}"}, {"stargazers", "stargazers"}, {"statuses", "statuses/{sha}"},
		{"subscribers", "subscribers"}, {"subscription", "subscription"}, {"tags", "tags"}, {"teams", "teams"},
		{"trees", "git/trees{/sha}"},
	} {
		m[kv[0]+"_url"] = api + "/" + kv[1]
	}
	return m
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// defaultLabels are the labels GitHub gives a new repository: colour
// and description.
var defaultLabels = map[string][2]string{
	"bug":           {"d73a4a", "Something isn't working"},
	"enhancement":   {"a2eeef", "New feature or request"},
	"documentation": {"0075ca", "Improvements or additions to documentation"},
}

// labelsJSON renders labels. A label made by naming it on an issue has
// an empty description: GitHub's pull request shape has no null there.
func (c *call) labelsJSON(r *repo, names []string) []any {
	out := []any{}
	for _, n := range names {
		d, isDefault := defaultLabels[n]
		if !isDefault {
			d = [2]string{"ededed", ""}
		}
		out = append(out, M{
			"id": int64(len(n))*1000 + int64(n[0]), "node_id": nodeID("Label", int64(len(n))), "name": n, "color": d[0],
			"default": isDefault, "description": d[1],
			"url": c.repoURL(r) + "/labels/" + url.PathEscape(n),
		})
	}
	return out
}

func (c *call) milestoneJSON(r *repo, n int) any {
	for _, m := range r.milestones {
		if m.number != n {
			continue
		}
		open, closed := 0, 0
		for _, is := range r.issues {
			switch {
			case is.milestone != n:
			case is.state == "open":
				open++
			default:
				closed++
			}
		}
		u := c.repoURL(r) + fmt.Sprintf("/milestones/%d", m.number)
		id := int64(2000 + m.number)
		return M{
			"id": id, "node_id": nodeID("Milestone", id), "number": m.number, "title": m.title, "description": nil,
			"state": m.state, "creator": c.user(r.owner), "open_issues": open, "closed_issues": closed,
			"created_at": ts(r.created), "updated_at": ts(r.created), "due_on": nil, "closed_at": nil,
			"url": u, "labels_url": u + "/labels", "html_url": repoHTML(r) + fmt.Sprintf("/milestone/%d", m.number),
		}
	}
	return nil
}

func (c *call) issueJSON(r *repo, is *issue) M {
	var assignee any
	if len(is.assignees) > 0 {
		assignee = c.user(is.assignees[0])
	}
	kind := "issues"
	if is.pr != nil {
		kind = "pull"
	}
	api := c.repoURL(r) + fmt.Sprintf("/issues/%d", is.number)
	m := M{
		"id": is.id, "node_id": nodeID("Issue", is.id), "number": is.number,
		"url": api, "comments_url": api + "/comments", "events_url": api + "/events",
		"labels_url": api + "/labels{/name}", "timeline_url": api + "/timeline",
		"repository_url": c.repoURL(r),
		"html_url":       repoHTML(r) + fmt.Sprintf("/%s/%d", kind, is.number),
		"title":          is.title, "body": nullable(is.body), "user": c.user(is.user),
		"state": is.state, "state_reason": nullable(is.stateReason), "locked": false,
		"labels": c.labelsJSON(r, is.labels), "assignee": assignee, "assignees": c.users(is.assignees),
		"milestone": c.milestoneJSON(r, is.milestone), "comments": len(is.comments),
		"created_at": ts(is.created), "updated_at": ts(is.updated), "closed_at": ts(is.closed),
		"author_association": c.association(r, is.user),
	}
	if is.pr != nil {
		m["pull_request"] = M{
			"url":      c.repoURL(r) + fmt.Sprintf("/pulls/%d", is.number),
			"html_url": repoHTML(r) + fmt.Sprintf("/pull/%d", is.number),
			"diff_url": repoHTML(r) + fmt.Sprintf("/pull/%d.diff", is.number), "patch_url": repoHTML(r) + fmt.Sprintf("/pull/%d.patch", is.number),
			"merged_at": ts(is.pr.mergedAt),
		}
	}
	return m
}

func (c *call) association(r *repo, login string) string {
	o := c.s.st.orgOf(r)
	switch role := c.s.st.role(r, login); {
	case strings.EqualFold(login, r.owner):
		return "OWNER"
	case o != nil && o.roles[login] != "":
		return "MEMBER"
	case role != "":
		return "COLLABORATOR"
	}
	return "NONE"
}

func (c *call) pullJSON(r *repo, is *issue) M {
	p := is.pr
	state := is.state
	mergeableState := "clean"
	if !p.mergeable {
		mergeableState = "dirty"
	}
	var mergeable any = p.mergeable
	if p.merged {
		mergeable, mergeableState = nil, "unknown"
	}
	branch := func(name, sha string) M {
		return M{"label": r.owner + ":" + name, "ref": name, "sha": sha, "user": c.user(r.owner), "repo": c.repoJSON(r)}
	}
	changed := 0
	if hc := r.commits[p.headSHA]; hc != nil {
		changed = len(hc.changes)
	}
	var assignee any
	if len(is.assignees) > 0 {
		assignee = c.user(is.assignees[0])
	}
	api := c.repoURL(r) + fmt.Sprintf("/pulls/%d", is.number)
	html := repoHTML(r) + fmt.Sprintf("/pull/%d", is.number)
	issueAPI := c.repoURL(r) + fmt.Sprintf("/issues/%d", is.number)
	statuses := c.repoURL(r) + "/statuses/" + p.headSHA
	link := func(href string) M { return M{"href": href} }
	return M{
		"id": is.id + 100000, "node_id": nodeID("PullRequest", is.id), "number": is.number,
		"url": api, "html_url": html, "issue_url": issueAPI,
		"diff_url": html + ".diff", "patch_url": html + ".patch", "commits_url": api + "/commits",
		"review_comments_url": api + "/comments", "review_comment_url": c.repoURL(r) + "/pulls/comments{/number}",
		"comments_url": issueAPI + "/comments", "statuses_url": statuses,
		"_links": M{
			"self": link(api), "html": link(html), "issue": link(issueAPI), "comments": link(issueAPI + "/comments"),
			"review_comments": link(api + "/comments"), "review_comment": link(c.repoURL(r) + "/pulls/comments{/number}"),
			"commits": link(api + "/commits"), "statuses": link(statuses),
		},
		"assignee": assignee, "auto_merge": nil, "active_lock_reason": nil,
		"state": state, "locked": false, "title": is.title, "body": nullable(is.body), "user": c.user(is.user),
		"labels": c.labelsJSON(r, is.labels), "milestone": c.milestoneJSON(r, is.milestone),
		"assignees": c.users(is.assignees), "requested_reviewers": c.users(p.requested), "requested_teams": []any{},
		"head": branch(p.head, p.headSHA), "base": branch(p.base, p.baseSHA),
		"draft": p.draft, "merged": p.merged, "mergeable": mergeable, "mergeable_state": mergeableState,
		"merged_at": ts(p.mergedAt), "merged_by": c.user(p.mergedBy), "merge_commit_sha": nullable(p.mergeSHA),
		"maintainer_can_modify": p.maintainerCanModify,
		"comments":              len(is.comments), "review_comments": 0, "commits": 1,
		"additions": 1, "deletions": 1, "changed_files": changed,
		"created_at": ts(is.created), "updated_at": ts(is.updated), "closed_at": ts(is.closed),
		"author_association": c.association(r, is.user),
	}
}

func (c *call) gitUser(login string, at time.Time) M {
	u := c.s.st.users[strings.ToLower(login)]
	name, email := login, login+"@users.noreply.github.com"
	if u != nil {
		name, email = u.name, u.email
	}
	return M{"name": name, "email": email, "date": ts(at)}
}

func (c *call) commitJSON(r *repo, cm *commit, full bool) M {
	parents := []any{}
	for _, p := range cm.parents {
		parents = append(parents, M{"sha": p, "url": c.repoURL(r) + "/commits/" + p, "html_url": repoHTML(r) + "/commit/" + p})
	}
	m := M{
		"sha": cm.sha, "node_id": nodeID("Commit", int64(len(cm.sha))), "url": c.repoURL(r) + "/commits/" + cm.sha,
		"html_url": repoHTML(r) + "/commit/" + cm.sha, "comments_url": c.repoURL(r) + "/commits/" + cm.sha + "/comments",
		"commit": M{
			"author": c.gitUser(cm.author, cm.date), "committer": c.gitUser(cm.author, cm.date), "message": cm.message,
			"tree": M{"sha": treeSHA(cm.tree), "url": c.repoURL(r) + "/git/trees/" + treeSHA(cm.tree)},
			"url":  c.repoURL(r) + "/git/commits/" + cm.sha, "comment_count": 0,
		},
		"author": c.user(cm.author), "committer": c.user(cm.author), "parents": parents,
	}
	if full {
		files := []any{}
		add, del := 0, 0
		for _, ch := range cm.changes {
			add += ch.additions
			del += ch.deletions
			files = append(files, M{
				"sha": blobSHA(cm.tree[ch.filename]), "filename": ch.filename, "status": ch.status,
				"additions": ch.additions, "deletions": ch.deletions, "changes": ch.additions + ch.deletions,
				"blob_url":     repoHTML(r) + "/blob/" + cm.sha + "/" + ch.filename,
				"raw_url":      repoHTML(r) + "/raw/" + cm.sha + "/" + ch.filename,
				"contents_url": c.repoURL(r) + "/contents/" + ch.filename + "?ref=" + cm.sha,
			})
		}
		m["stats"] = M{"additions": add, "deletions": del, "total": add + del}
		m["files"] = files
	}
	return m
}

func treeSHA(tree map[string][]byte) string {
	keys := make([]string, 0, len(tree))
	for k, v := range tree {
		keys = append(keys, k+" "+blobSHA(v))
	}
	slices.Sort(keys)
	return blobSHA([]byte(strings.Join(keys, "\n")))
}

// wrap64 base64-encodes data in lines of 60 characters, as GitHub's
// contents API does.
func wrap64(data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(enc) > 60 {
		b.WriteString(enc[:60])
		b.WriteByte('\n')
		enc = enc[60:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
	return b.String()
}

func (c *call) contentLinks(r *repo, p, typ, sha, ref string) M {
	self := c.repoURL(r) + "/contents/" + p + "?ref=" + ref
	kind := "blob"
	gitKind := "blobs"
	if typ == "dir" {
		kind, gitKind = "tree", "trees"
	}
	html := repoHTML(r) + "/" + kind + "/" + ref + "/" + p
	git := c.repoURL(r) + "/git/" + gitKind + "/" + sha
	return M{"url": self, "html_url": html, "git_url": git, "_links": M{"self": self, "git": git, "html": html}}
}

func (c *call) fileJSON(r *repo, p string, data []byte, ref string, withContent bool) M {
	sha := blobSHA(data)
	m := M{"type": "file", "size": len(data), "name": path.Base(p), "path": p, "sha": sha,
		"download_url": "https://raw.githubusercontent.com/" + r.owner + "/" + r.name + "/" + ref + "/" + p}
	for k, v := range c.contentLinks(r, p, "file", sha, ref) {
		m[k] = v
	}
	if withContent {
		m["encoding"] = "base64"
		m["content"] = wrap64(data)
	}
	return m
}

func (c *call) runJSON(r *repo, rn *run) M {
	status, conclusion := rn.status(c.now)
	name, wfPath := "", ""
	for _, w := range r.workflows {
		if w.id == rn.workflowID {
			name, wfPath = w.name, w.path
		}
	}
	updated := rn.created
	if status != "queued" {
		updated = rn.created.Add(runQueuedFor)
	}
	if status == "completed" && !rn.done {
		updated = rn.created.Add(runQueuedFor + runInProgressFor)
	}
	msg := ""
	if cm := r.commits[rn.sha]; cm != nil {
		msg = cm.message
	}
	u := c.repoURL(r) + fmt.Sprintf("/actions/runs/%d", rn.id)
	suite := rn.id + 1000000
	return M{
		"id": rn.id, "name": name, "node_id": nodeID("WorkflowRun", rn.id), "head_branch": rn.branch, "head_sha": rn.sha,
		"path": wfPath, "display_title": msg, "run_number": rn.number, "run_attempt": 1, "event": rn.event,
		"status": status, "conclusion": nullable(conclusion), "workflow_id": rn.workflowID,
		"check_suite_id": suite, "check_suite_node_id": nodeID("CheckSuite", suite),
		"url": u, "html_url": repoHTML(r) + fmt.Sprintf("/actions/runs/%d", rn.id),
		"jobs_url": u + "/jobs", "logs_url": u + "/logs", "workflow_url": c.repoURL(r) + fmt.Sprintf("/actions/workflows/%d", rn.workflowID),
		"check_suite_url": c.repoURL(r) + fmt.Sprintf("/check-suites/%d", suite), "artifacts_url": u + "/artifacts",
		"cancel_url": u + "/cancel", "rerun_url": u + "/rerun", "previous_attempt_url": nil,
		"created_at": ts(rn.created), "updated_at": ts(updated), "run_started_at": ts(rn.created),
		"actor": c.user(rn.actor), "triggering_actor": c.user(rn.actor),
		"pull_requests": c.runPulls(r, rn), "head_commit": c.headCommit(r, rn.sha),
		"repository": c.repoJSON(r), "head_repository": c.repoJSON(r), "head_repository_id": r.id,
		"referenced_workflows": []any{},
	}
}

// runPulls are the open pull requests whose head is the run's branch, in
// GitHub's minimal shape.
func (c *call) runPulls(r *repo, rn *run) []any {
	out := []any{}
	for _, is := range r.issues {
		if is.pr == nil || is.state != "open" || is.pr.head != rn.branch {
			continue
		}
		ref := func(name, sha string) M {
			return M{"ref": name, "sha": sha, "repo": M{"id": r.id, "url": c.repoURL(r), "name": r.name}}
		}
		out = append(out, M{
			"id": is.id + 100000, "number": is.number, "url": c.repoURL(r) + fmt.Sprintf("/pulls/%d", is.number),
			"head": ref(is.pr.head, is.pr.headSHA), "base": ref(is.pr.base, is.pr.baseSHA),
		})
	}
	return out
}

// headCommit is a run's head commit in GitHub's simple-commit shape, or
// null when the fake does not hold it.
func (c *call) headCommit(r *repo, sha string) any {
	cm := r.commits[sha]
	if cm == nil {
		return nil
	}
	who := c.gitUser(cm.author, cm.date)
	delete(who, "date")
	return M{"id": cm.sha, "tree_id": treeSHA(cm.tree), "message": cm.message, "timestamp": ts(cm.date), "author": who, "committer": who}
}

func (c *call) workflowJSON(r *repo, w *workflow) M {
	return M{
		"id": w.id, "node_id": nodeID("Workflow", w.id), "name": w.name, "path": w.path, "state": w.state,
		"created_at": ts(w.created), "updated_at": ts(w.updated),
		"url":       c.repoURL(r) + fmt.Sprintf("/actions/workflows/%d", w.id),
		"html_url":  repoHTML(r) + "/blob/" + r.defaultBranch + "/" + w.path,
		"badge_url": repoHTML(r) + "/workflows/" + w.name + "/badge.svg",
	}
}

func (c *call) releaseJSON(r *repo, rl *release) M {
	u := c.repoURL(r) + fmt.Sprintf("/releases/%d", rl.id)
	return M{
		"id": rl.id, "node_id": nodeID("Release", rl.id), "tag_name": rl.tag, "target_commitish": rl.target,
		"name": nullable(rl.name), "body": nullable(rl.body), "draft": rl.draft, "prerelease": rl.prerelease,
		"created_at": ts(rl.created), "published_at": ts(rl.published), "author": c.user(rl.author), "assets": []any{},
		"url": u, "assets_url": u + "/assets", "html_url": repoHTML(r) + "/releases/tag/" + rl.tag,
		"upload_url":  "https://uploads.github.com/repos/" + r.owner + "/" + r.name + fmt.Sprintf("/releases/%d/assets{?name,label}", rl.id),
		"tarball_url": c.repoURL(r) + "/tarball/" + rl.tag, "zipball_url": c.repoURL(r) + "/zipball/" + rl.tag,
	}
}

var languages = map[string][2]string{
	".rb": {"Ruby", "application/x-ruby"}, ".go": {"Go", "text/x-go"}, ".md": {"Markdown", "text/markdown"},
	".py": {"Python", "application/x-python"}, ".js": {"JavaScript", "application/javascript"},
	".json": {"JSON", "application/json"}, ".txt": {"Text", "text/plain"},
}

func (c *call) gistJSON(g *gist, withContent bool) M {
	files := M{}
	for name, content := range g.files {
		lang, typ := any(nil), "text/plain"
		if l, ok := languages[path.Ext(name)]; ok {
			lang, typ = l[0], l[1]
		}
		f := M{"filename": name, "type": typ, "language": lang, "size": len(content),
			"raw_url": "https://gist.githubusercontent.com/" + g.owner + "/" + g.id + "/raw/" + name}
		if withContent {
			f["content"], f["truncated"] = content, false
		}
		files[name] = f
	}
	u := c.base + "/gists/" + g.id
	return M{
		"id": g.id, "node_id": nodeID("Gist", int64(len(g.id))), "url": u, "forks_url": u + "/forks", "commits_url": u + "/commits",
		"git_pull_url": "https://gist.github.com/" + g.id + ".git", "git_push_url": "https://gist.github.com/" + g.id + ".git",
		"html_url": "https://gist.github.com/" + g.owner + "/" + g.id, "files": files, "public": g.public,
		"created_at": ts(g.created), "updated_at": ts(g.updated), "description": nullable(g.description),
		"comments": 0, "user": nil, "comments_url": u + "/comments", "owner": c.user(g.owner), "truncated": false,
	}
}
