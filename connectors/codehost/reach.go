package codehost

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
)

// maxRepoPages bounds one read of the user's repositories: 100 pages of
// 100, far more than an account administers.
const maxRepoPages = 100

// AccountRepo is a repository the authenticated user can reach, as
// GET /user/repos lists it, with the user's rights on it.
type AccountRepo struct {
	ID int64
	// FullName is "owner/name"; Owner the owner's login, OwnerIsOrg
	// whether an organisation owns it.
	FullName   string
	Owner      string
	OwnerIsOrg bool
	Private    bool
	// Archived repositories are read-only: nothing happens there.
	Archived bool
	HTMLURL  string
	// Admin is permissions.admin: the user may manage the repository's
	// webhooks. Permission is the best right the user has there (admin,
	// maintain, push, triage or pull; "" when GitHub sent none).
	Admin      bool
	Permission string
	CreatedAt  time.Time
	// Raw is GitHub's JSON object of the repository.
	Raw json.RawMessage
}

// repoJSON is the part of GitHub's repository object AccountRepo reads.
type repoJSON struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
	Private  bool   `json:"private"`
	Archived bool   `json:"archived"`
	HTMLURL  string `json:"html_url"`
	Owner    struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"owner"`
	Permissions *struct {
		Admin    bool `json:"admin"`
		Maintain bool `json:"maintain"`
		Push     bool `json:"push"`
		Triage   bool `json:"triage"`
		Pull     bool `json:"pull"`
	} `json:"permissions"`
	CreatedAt time.Time `json:"created_at"`
}

func decodeAccountRepo(raw json.RawMessage) (AccountRepo, error) {
	var j repoJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return AccountRepo{}, err
	}
	owner := j.Owner.Login
	if owner == "" {
		owner, _, _ = strings.Cut(j.FullName, "/")
	}
	r := AccountRepo{ID: j.ID, FullName: j.FullName, Owner: owner, OwnerIsOrg: j.Owner.Type == "Organization",
		Private: j.Private, Archived: j.Archived, HTMLURL: j.HTMLURL, CreatedAt: j.CreatedAt, Raw: raw}
	if p := j.Permissions; p != nil {
		r.Admin = p.Admin
		for _, c := range []struct {
			set  bool
			name string
		}{{p.Admin, "admin"}, {p.Maintain, "maintain"}, {p.Push, "push"}, {p.Triage, "triage"}, {p.Pull, "pull"}} {
			if c.set {
				r.Permission = c.name
				break
			}
		}
	}
	return r, nil
}

// Repositories returns every repository the authenticated user can reach:
// owned, collaborated on, and those of the organisations it belongs to
// (GET /user/repos with affiliation owner,collaborator,organization_member),
// each with the user's permissions, following the Link pages.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#list-repositories-for-the-authenticated-user
func (h Hooks) Repositories(ctx context.Context) ([]AccountRepo, error) {
	const what = "list the user's repositories"
	c, err := h.client()
	if err != nil {
		return nil, wrapHook(what, err)
	}
	q := url.Values{"affiliation": {"owner,collaborator,organization_member"}, "sort": {"full_name"}}
	out := []AccountRepo{}
	var bad error
	more, err := hookPages(ctx, h, c, what, "repositories", "/user/repos", q, ErrHookPermission, maxRepoPages, func(page []json.RawMessage) bool {
		for _, raw := range page {
			r, err := decodeAccountRepo(raw)
			if err != nil {
				bad = err
				return false
			}
			out = append(out, r)
		}
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case bad != nil:
		return nil, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: http.StatusOK, Message: fmt.Sprintf("decode a repository: %v", bad)})
	case more:
		return nil, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: http.StatusOK,
			Message: fmt.Sprintf("GitHub's list did not end after %d pages", maxRepoPages)})
	}
	return out, nil
}

// OwnRepositories reads the newest repositories the authenticated user
// owns (GET /user/repos?affiliation=owner, newest created first), one page
// of 100: a poller that reads it every minute sees every repository
// created in between unless more than 100 were.
//
// etag, when set, is sent as If-None-Match: an unchanged list answers
// notModified (free of rate limit budget), with newETag = etag.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#list-repositories-for-the-authenticated-user
func (h Hooks) OwnRepositories(ctx context.Context, etag string) (repos []AccountRepo, newETag string, notModified bool, err error) {
	const what = "list the repositories the user owns"
	c, err := h.client()
	if err != nil {
		return nil, "", false, wrapHook(what, err)
	}
	q := url.Values{"affiliation": {"owner"}, "sort": {"created"}, "direction": {"desc"}, "per_page": {strconv.Itoa(perPage)}}
	raws, status, newETag, notModified, err := h.pollList(ctx, c, what, c.url("/user/repos", q), etag, "list of repositories")
	if err != nil || notModified {
		return nil, newETag, notModified, err
	}
	repos = make([]AccountRepo, 0, len(raws))
	for _, raw := range raws {
		r, err := decodeAccountRepo(raw)
		if err != nil {
			return nil, "", false, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: status, Message: fmt.Sprintf("decode a repository: %v", err)})
		}
		repos = append(repos, r)
	}
	return repos, newETag, false, nil
}

// Organisation membership roles (OrgMembership.Role): an admin is an
// owner of the organisation, who may manage its webhooks.
const (
	OrgRoleAdmin  = "admin"
	OrgRoleMember = "member"
)

// OrgMembership is the authenticated user's membership of an
// organisation.
type OrgMembership struct {
	Org string
	// Role is OrgRoleAdmin or OrgRoleMember (or another GitHub adds).
	Role string
}

// OrgMemberships returns the authenticated user's active organisation
// memberships (GET /user/memberships/orgs?state=active; the token needs
// read:org), following the Link pages.
//
// GitHub API docs: https://docs.github.com/rest/orgs/members#list-organization-memberships-for-the-authenticated-user
func (h Hooks) OrgMemberships(ctx context.Context) ([]OrgMembership, error) {
	const what = "list the user's organisation memberships"
	c, err := h.client()
	if err != nil {
		return nil, wrapHook(what, err)
	}
	type membershipJSON struct {
		State        string `json:"state"`
		Role         string `json:"role"`
		Organization struct {
			Login string `json:"login"`
		} `json:"organization"`
	}
	out := []OrgMembership{}
	more, err := hookPages(ctx, h, c, what, "memberships", "/user/memberships/orgs", url.Values{"state": {"active"}}, ErrHookPermission, maxRepoPages,
		func(page []membershipJSON) bool {
			for _, m := range page {
				if m.State == "active" && m.Organization.Login != "" {
					out = append(out, OrgMembership{Org: m.Organization.Login, Role: m.Role})
				}
			}
			return true
		})
	switch {
	case err != nil:
		return nil, err
	case more:
		return nil, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: http.StatusOK,
			Message: fmt.Sprintf("GitHub's list did not end after %d pages", maxRepoPages)})
	}
	return out, nil
}
