package codehost

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/triggerd/triggerd/connectors"
)

// The code host's repository, contents, starring, release and rate-limit
// endpoints the repository steps call: one method per upstream request,
// each linking GitHub's documentation of it.

// CreateRepository creates a repository for the account, or in the
// organisation org when it is not empty; in.Org is not sent.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#create-a-repository-for-the-authenticated-user
// and https://docs.github.com/rest/repos/repos#create-an-organization-repository
func (c *client) CreateRepository(ctx context.Context, org string, in createRepoInput) (*ghRepo, error) {
	path := "/user/repos"
	if org != "" {
		path = "/orgs/" + seg(org) + "/repos"
	}
	in.Org = ""
	var r ghRepo
	if _, err := c.sendJSON(ctx, http.MethodPost, path, in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetRepository reads a repository.
//
// GitHub API docs: https://docs.github.com/rest/repos/repos#get-a-repository
func (c *client) GetRepository(ctx context.Context, owner, repo string) (*ghRepo, error) {
	var r ghRepo
	if err := c.getJSON(ctx, repoPath(owner, repo), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetContents reads path (empty for the root) at ref (empty for the
// default branch): a file, symlink or submodule comes back as file, a
// directory as dir.
//
// GitHub API docs: https://docs.github.com/rest/repos/contents#get-repository-content
func (c *client) GetContents(ctx context.Context, owner, repo, path, ref string) (file *ghContent, dir []ghContent, err error) {
	p := repoPath(owner, repo, "/contents")
	if path != "" {
		p += "/" + segs(path)
	}
	var q url.Values
	if ref != "" {
		q = url.Values{"ref": {ref}}
	}
	a, err := c.do(ctx, http.MethodGet, p, q, nil)
	if err != nil {
		return nil, nil, err
	}
	if b := strings.TrimSpace(string(a.body)); strings.HasPrefix(b, "[") {
		if err := decodeAnswer(a, "directory listing", &dir); err != nil {
			return nil, nil, err
		}
		return nil, dir, nil
	}
	file = &ghContent{}
	if err := decodeAnswer(a, "content", file); err != nil {
		return nil, nil, err
	}
	return file, nil, nil
}

// fileUpdate is the body of CreateOrUpdateFile; empty and nil fields are
// not sent.
type fileUpdate struct {
	Message, Content  string // Content is base64
	Branch, SHA       string
	Committer, Author *gitPersona
}

// CreateOrUpdateFile commits content to path: a new file, or (with the
// current blob sha) a new version. created reports a new file.
//
// GitHub API docs: https://docs.github.com/rest/repos/contents#create-or-update-file-contents
func (c *client) CreateOrUpdateFile(ctx context.Context, owner, repo, path string, in fileUpdate) (r *ghFileCommit, created bool, err error) {
	body := map[string]any{"message": in.Message, "content": in.Content}
	setIf(body, "branch", in.Branch)
	setIf(body, "sha", in.SHA)
	if in.Committer != nil {
		body["committer"] = in.Committer
	}
	if in.Author != nil {
		body["author"] = in.Author
	}
	r = &ghFileCommit{}
	status, err := c.sendJSON(ctx, http.MethodPut, repoPath(owner, repo, "/contents/", segs(path)), body, r)
	if err != nil {
		return nil, false, err
	}
	if r.Content == nil {
		return nil, false, &connectors.Error{Code: connectors.CodeUpstream, Status: status, Message: "GitHub's answer has no content"}
	}
	return r, status == http.StatusCreated, nil
}

// fileDelete is the body of DeleteFile; empty and nil fields are not
// sent.
type fileDelete struct {
	Message, SHA, Branch string
	Committer            *gitPersona
}

// DeleteFile deletes path with a commit; in.SHA is the file's current
// blob sha.
//
// GitHub API docs: https://docs.github.com/rest/repos/contents#delete-a-file
func (c *client) DeleteFile(ctx context.Context, owner, repo, path string, in fileDelete) (*ghFileCommit, error) {
	body := map[string]any{"message": in.Message, "sha": in.SHA}
	setIf(body, "branch", in.Branch)
	if in.Committer != nil {
		body["committer"] = in.Committer
	}
	var r ghFileCommit
	if _, err := c.sendJSON(ctx, http.MethodDelete, repoPath(owner, repo, "/contents/", segs(path)), body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// StarRepository stars a repository as the account.
//
// GitHub API docs: https://docs.github.com/rest/activity/starring#star-a-repository-for-the-authenticated-user
func (c *client) StarRepository(ctx context.Context, owner, repo string) error {
	_, err := c.sendJSON(ctx, http.MethodPut, "/user/starred/"+seg(owner)+"/"+seg(repo), nil, nil)
	return err
}

// ListReleases lists a repository's releases, newest first, reading at
// most maxItems; more reports whether GitHub had more.
//
// GitHub API docs: https://docs.github.com/rest/releases/releases#list-releases
func (c *client) ListReleases(ctx context.Context, owner, repo string, maxItems int) (releases []ghRelease, more bool, err error) {
	releases, _, more, err = listPages[ghRelease](ctx, c, repoPath(owner, repo, "/releases"), nil, maxItems, nil)
	return releases, more, err
}

// ghRateLimit is GitHub's rate limit status: budgets by resource.
type ghRateLimit struct {
	Resources map[string]struct {
		Limit     int   `json:"limit"`
		Remaining int   `json:"remaining"`
		Used      int   `json:"used"`
		Reset     int64 `json:"reset"`
	} `json:"resources"`
}

// GetRateLimit reads the account's rate limit budgets; the call itself
// costs nothing.
//
// GitHub API docs: https://docs.github.com/rest/rate-limit/rate-limit#get-rate-limit-status-for-the-authenticated-user
func (c *client) GetRateLimit(ctx context.Context) (*ghRateLimit, error) {
	var r ghRateLimit
	if err := c.getJSON(ctx, "/rate_limit", nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GitHub's answers, as far as the steps read them.

// ghRepo is GitHub's repository; its owner is an object.
type ghRepo struct {
	Repository
	Owner ghUser `json:"owner"`
}

type ghContent struct {
	Type            string `json:"type"`
	Path            string `json:"path"`
	Name            string `json:"name"`
	SHA             string `json:"sha"`
	Size            int64  `json:"size"`
	Encoding        string `json:"encoding"`
	Content         string `json:"content"`
	Target          string `json:"target"`
	SubmoduleGitURL string `json:"submodule_git_url"`
	HTMLURL         string `json:"html_url"`
}

type ghFileCommit struct {
	Content *ghContent `json:"content"`
	Commit  struct {
		SHA     string `json:"sha"`
		HTMLURL string `json:"html_url"`
	} `json:"commit"`
}

type ghRelease struct {
	Release
	Author *ghUser `json:"author"`
}
