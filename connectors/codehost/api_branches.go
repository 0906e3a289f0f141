package codehost

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// The code host's git reference, commit and branch endpoints the branch
// steps call: one method per upstream request, each linking GitHub's
// documentation of it.

// ghGitRef is a git reference and the object it points at.
type ghGitRef struct {
	Ref    string `json:"ref"`
	Object struct {
		SHA string `json:"sha"`
	} `json:"object"`
}

// GetBranchRef reads the reference refs/heads/{branch}.
//
// GitHub API docs: https://docs.github.com/rest/git/refs#get-a-reference
func (c *client) GetBranchRef(ctx context.Context, owner, repo, branch string) (*ghGitRef, error) {
	var r ghGitRef
	if err := c.getJSON(ctx, repoPath(owner, repo, "/git/ref/heads/", segs(branch)), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// CreateRef creates the reference ref (fully qualified, refs/heads/...)
// pointing at sha.
//
// GitHub API docs: https://docs.github.com/rest/git/refs#create-a-reference
func (c *client) CreateRef(ctx context.Context, owner, repo, ref, sha string) (*ghGitRef, error) {
	var r ghGitRef
	if _, err := c.sendJSON(ctx, http.MethodPost, repoPath(owner, repo, "/git/refs"), map[string]string{"ref": ref, "sha": sha}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetCommit reads a commit (by sha, branch or tag) with its stats and
// changed files.
//
// GitHub API docs: https://docs.github.com/rest/commits/commits#get-a-commit
func (c *client) GetCommit(ctx context.Context, owner, repo, ref string) (*ghGitCommit, error) {
	var g ghGitCommit
	if err := c.getJSON(ctx, repoPath(owner, repo, "/commits/", seg(ref)), nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// commitListOptions filters ListCommits; empty fields are not sent.
type commitListOptions struct {
	SHA, Path, Author, Since, Until string
}

// ListCommits lists a repository's commits, newest first, reading at most
// maxItems; more reports whether GitHub had more.
//
// GitHub API docs: https://docs.github.com/rest/commits/commits#list-commits
func (c *client) ListCommits(ctx context.Context, owner, repo string, o commitListOptions, maxItems int) (commits []ghGitCommit, more bool, err error) {
	q := url.Values{}
	setQuery(q, "sha", o.SHA)
	setQuery(q, "path", o.Path)
	setQuery(q, "author", o.Author)
	setQuery(q, "since", o.Since)
	setQuery(q, "until", o.Until)
	commits, _, more, err = listPages[ghGitCommit](ctx, c, repoPath(owner, repo, "/commits"), q, maxItems, nil)
	return commits, more, err
}

// ListBranches lists a repository's branches, only the protected (or
// unprotected) ones when protected is not nil, reading at most maxItems;
// more reports whether GitHub had more.
//
// GitHub API docs: https://docs.github.com/rest/branches/branches#list-branches
func (c *client) ListBranches(ctx context.Context, owner, repo string, protected *bool, maxItems int) (branches []ghBranch, more bool, err error) {
	q := url.Values{}
	if protected != nil {
		q.Set("protected", strconv.FormatBool(*protected))
	}
	branches, _, more, err = listPages[ghBranch](ctx, c, repoPath(owner, repo, "/branches"), q, maxItems, nil)
	return branches, more, err
}

// GetBranch reads a branch.
//
// GitHub API docs: https://docs.github.com/rest/branches/branches#get-a-branch
func (c *client) GetBranch(ctx context.Context, owner, repo, branch string) (*ghBranch, error) {
	var b ghBranch
	if err := c.getJSON(ctx, repoPath(owner, repo, "/branches/", seg(branch)), nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// GitHub's answers, as far as the steps read them.

type ghGitCommit struct {
	SHA     string `json:"sha"`
	HTMLURL string `json:"html_url"`
	Commit  struct {
		Message   string `json:"message"`
		Author    Person `json:"author"`
		Committer Person `json:"committer"`
	} `json:"commit"`
	Author    *ghUser `json:"author"`
	Committer *ghUser `json:"committer"`
	Parents   []struct {
		SHA string `json:"sha"`
	} `json:"parents"`
	Stats *CommitStats `json:"stats"`
	Files []CommitFile `json:"files"`
}

type ghBranch struct {
	Name      string `json:"name"`
	Protected bool   `json:"protected"`
	Commit    struct {
		SHA string `json:"sha"`
	} `json:"commit"`
}
