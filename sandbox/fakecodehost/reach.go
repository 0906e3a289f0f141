package fakecodehost

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// reachRoutes are the reads that tell what an account can reach: its
// repositories with its permissions, and its organisation memberships.
func reachRoutes() []row {
	return []row{
		{Route("GET /user/repos"), (*call).listUserRepos},
		{Route("GET /user/memberships/orgs"), (*call).listOrgMemberships},
		{Route("GET /orgs/{org}/repos"), (*call).listOrgRepos},
	}
}

// affiliations are GET /user/repos's affiliation values.
var affiliations = []string{"owner", "collaborator", "organization_member"}

// listUserRepos is GET /user/repos: the repositories the caller owns,
// collaborates on or can see as a member of their organisation, each with
// the caller's permissions. It takes affiliation (comma-separated; all
// three by default), visibility (all, public, private), sort (created,
// updated, pushed, full_name; default full_name) and direction (asc for
// full_name, desc otherwise, by default), since and before (ISO 8601
// times: only repositories updated after, or before, them). Like GitHub,
// it refuses type together with affiliation or visibility.
func (c *call) listUserRepos() *reply {
	q := c.r.URL.Query()
	if q.Has("type") && (q.Has("affiliation") || q.Has("visibility")) {
		return validation(M{"resource": "Repository", "code": "invalid", "message": "If you specify visibility or affiliation, you cannot specify type."})
	}
	want := affiliations
	switch typ := q.Get("type"); typ {
	case "", "all":
	case "owner":
		want = []string{"owner"}
	case "member":
		want = []string{"collaborator", "organization_member"}
	case "public", "private":
		q.Set("visibility", typ)
	default:
		return invalid("Repository", "type", "invalid")
	}
	if a := q.Get("affiliation"); a != "" {
		want = nil
		for _, s := range strings.Split(a, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(affiliations, s) {
				return validation(M{"resource": "Repository", "code": "invalid", "field": "affiliation",
					"message": fmt.Sprintf("%q is not one of owner, collaborator, organization_member", s)})
			}
			want = append(want, s)
		}
	}
	vis := q.Get("visibility")
	if vis != "" && vis != "all" && vis != "public" && vis != "private" {
		return invalid("Repository", "visibility", "invalid")
	}
	var bounds [2]time.Time
	for i, name := range []string{"since", "before"} {
		if !q.Has(name) {
			continue
		}
		t, ok := parseTime(q.Get(name))
		if !ok {
			return validation(M{"resource": "Repository", "code": "invalid", "field": name,
				"message": fmt.Sprintf("%q is not an ISO 8601 time (YYYY-MM-DDTHH:MM:SSZ)", q.Get(name))})
		}
		bounds[i] = t
	}
	since, before := bounds[0], bounds[1]
	var sel []*repo
	for _, r := range c.s.st.repos {
		if !c.affiliated(r, want) || vis == "public" && r.private || vis == "private" && !r.private ||
			!since.IsZero() && !r.updated.After(since) || !before.IsZero() && !r.updated.Before(before) {
			continue
		}
		sel = append(sel, r)
	}
	rep := c.sortRepos(sel, q.Get("sort"), q.Get("direction"))
	if rep != nil {
		return rep
	}
	return c.reposPage(sel)
}

// affiliated reports whether the caller is related to r in one of the
// ways want names.
func (c *call) affiliated(r *repo, want []string) bool {
	for _, a := range want {
		switch a {
		case "owner":
			if strings.EqualFold(r.owner, c.login) {
				return true
			}
		case "collaborator":
			if _, ok := r.collaborators[c.login]; ok {
				return true
			}
		case "organization_member":
			if o := c.s.st.orgOf(r); o != nil && o.roles[c.login] != "" {
				return true
			}
		}
	}
	return false
}

// sortRepos orders repos as sort and direction ask, GitHub's way.
func (c *call) sortRepos(repos []*repo, by, dir string) *reply {
	if by == "" {
		by = "full_name"
	}
	if dir == "" {
		dir = "desc"
		if by == "full_name" {
			dir = "asc"
		}
	}
	if dir != "asc" && dir != "desc" {
		return invalid("Repository", "direction", "invalid")
	}
	var cmp func(a, b *repo) int
	switch by {
	case "created":
		cmp = func(a, b *repo) int { return a.created.Compare(b.created) }
	case "updated":
		cmp = func(a, b *repo) int { return a.updated.Compare(b.updated) }
	case "pushed":
		cmp = func(a, b *repo) int { return a.pushed.Compare(b.pushed) }
	case "full_name":
		cmp = func(a, b *repo) int { return 0 }
	default:
		return invalid("Repository", "sort", "invalid")
	}
	slices.SortStableFunc(repos, func(a, b *repo) int {
		n := cmp(a, b)
		if n == 0 {
			// Ties (and full_name) by name; ids break ties of equal names.
			n = strings.Compare(repoKey(a.owner, a.name), repoKey(b.owner, b.name))
		}
		if n == 0 {
			n = int(a.id - b.id)
		}
		if dir == "desc" {
			n = -n
		}
		return n
	})
	return nil
}

// reposPage answers one page of repos (30 by default, 100 at most).
func (c *call) reposPage(repos []*repo) *reply {
	items := make([]any, len(repos))
	for i, r := range repos {
		items[i] = c.repoJSON(r)
	}
	return c.page(items, "")
}

// listOrgMemberships is GET /user/memberships/orgs: the caller's
// memberships (state active; the fake has no pending invitations, so
// state=pending lists none), each with its role, admin for an owner.
func (c *call) listOrgMemberships() *reply {
	switch st := c.query("state"); st {
	case "", "active":
	case "pending":
		return c.page(nil, "")
	default:
		return invalid("Membership", "state", "invalid")
	}
	var orgs []*user
	for _, u := range c.s.st.users {
		if u.org && u.roles[c.login] != "" {
			orgs = append(orgs, u)
		}
	}
	slices.SortFunc(orgs, func(a, b *user) int { return strings.Compare(strings.ToLower(a.login), strings.ToLower(b.login)) })
	items := make([]any, len(orgs))
	for i, o := range orgs {
		items[i] = M{
			"url":   c.base + "/orgs/" + o.login + "/memberships/" + c.login,
			"state": "active", "role": o.roles[c.login],
			"organization_url": c.base + "/orgs/" + o.login,
			"organization":     c.orgJSON(o),
			"user":             c.user(c.login),
		}
	}
	return c.page(items, "")
}

// listOrgRepos is GET /orgs/{org}/repos: the organisation's repositories
// the caller can see (public ones to anyone), with the caller's
// permissions. It takes type (all, public, private, forks, sources,
// member), sort and direction.
func (c *call) listOrgRepos() *reply {
	o := c.s.st.users[strings.ToLower(c.p["org"])]
	if o == nil || !o.org {
		return notFound()
	}
	typ := c.query("type")
	switch typ {
	case "", "all", "public", "private", "forks", "sources", "member":
	default:
		return invalid("Repository", "type", "invalid")
	}
	var sel []*repo
	for _, r := range c.s.st.repos {
		if !strings.EqualFold(r.owner, o.login) || !c.s.st.visible(r, c.login) {
			continue
		}
		switch {
		case typ == "public" && r.private, typ == "private" && !r.private, typ == "forks",
			typ == "member" && c.s.st.role(r, c.login) == "":
			continue
		}
		sel = append(sel, r)
	}
	by := c.query("sort")
	if by == "" {
		by = "created"
	}
	if rep := c.sortRepos(sel, by, c.query("direction")); rep != nil {
		return rep
	}
	return c.reposPage(sel)
}

// SetCollaborator makes login a collaborator of owner/repo with
// permission (pull, triage, push, maintain or admin) behind the API's
// back, as an accepted invitation would; an empty permission removes
// them. It fails when the repository or the user does not exist.
func (s *Server) SetCollaborator(owner, repo, login, permission string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	u := s.st.users[strings.ToLower(login)]
	switch {
	case r == nil:
		return fmt.Errorf("fakecodehost: no repository %s/%s", owner, repo)
	case u == nil || u.org:
		return fmt.Errorf("fakecodehost: no user %q", login)
	case permission == "":
		delete(r.collaborators, u.login)
		return nil
	case roleRank[permission] == 0:
		return fmt.Errorf("fakecodehost: permission %q: want pull, triage, push, maintain or admin", permission)
	}
	r.collaborators[u.login] = permission
	return nil
}
