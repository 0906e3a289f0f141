package codehost

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// validRefName reports whether a branch name passes git's ref-format
// rules (git check-ref-format, simplified).
func validRefName(b string) bool {
	if b == "" || strings.HasPrefix(b, "/") || strings.HasPrefix(b, "-") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".") || strings.HasSuffix(b, ".lock") || strings.Contains(b, "..") ||
		strings.Contains(b, "//") || strings.Contains(b, "@{") || b == "@" {
		return false
	}
	for _, r := range b {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	for _, s := range strings.Split(b, "/") {
		if strings.HasPrefix(s, ".") {
			return false
		}
	}
	return true
}

const refPattern = `^[^/\-\s~^:?*\[\\][^\s~^:?*\[\\]*$`

func (p *problems) branch(field, v string, required bool) {
	switch {
	case v == "" && required:
		p.addf("%s is required", field)
	case v != "" && !validRefName(v):
		p.addf("%s %q is not a valid branch name", field, v)
	}
}

type createBranchInput struct {
	repoInput
	Branch string `json:"branch"`
	From   string `json:"from,omitempty"`
}

func (in *createBranchInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.branch("branch", in.Branch, true)
	if in.From != "" && !shaRE.MatchString(in.From) {
		p.branch("from", in.From, false)
	}
	return p.err()
}

type commitInput struct {
	repoInput
	Ref string `json:"ref"`
}

func (in *commitInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.required("ref", in.Ref)
	return p.err()
}

type listCommitsInput struct {
	repoInput
	listInput
	SHA    string `json:"sha,omitempty"`
	Path   string `json:"path,omitempty"`
	Author string `json:"author,omitempty"`
	Since  string `json:"since,omitempty"`
	Until  string `json:"until,omitempty"`
}

func (in *listCommitsInput) check() error {
	var p problems
	in.checkRepo(&p)
	in.checkList(&p)
	p.filePath("path", in.Path, true)
	p.timestamp("since", in.Since)
	p.timestamp("until", in.Until)
	return p.err()
}

type listBranchesInput struct {
	repoInput
	listInput
	Protected *bool `json:"protected,omitempty"`
}

func (in *listBranchesInput) check() error {
	var p problems
	in.checkRepo(&p)
	in.checkList(&p)
	return p.err()
}

type branchInput struct {
	repoInput
	Branch string `json:"branch"`
}

func (in *branchInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.branch("branch", in.Branch, true)
	return p.err()
}

// Commit is the output of Get Commit.
type Commit struct {
	SHA       string       `json:"sha"`
	Message   string       `json:"message"`
	Author    Person       `json:"author"`
	Committer Person       `json:"committer"`
	Parents   []string     `json:"parents"`
	HTMLURL   string       `json:"html_url"`
	Stats     CommitStats  `json:"stats"`
	Files     []CommitFile `json:"files"`
}

// CommitStats counts a commit's changed lines.
type CommitStats struct {
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	Total     int `json:"total"`
}

// CommitFile is one file a commit changed.
type CommitFile struct {
	Filename  string `json:"filename"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Changes   int    `json:"changes"`
}

// CommitSummary is one commit in List Commits.
type CommitSummary struct {
	SHA         string `json:"sha"`
	Message     string `json:"message"`
	AuthorName  string `json:"author_name"`
	AuthorEmail string `json:"author_email"`
	AuthorLogin string `json:"author_login,omitempty"`
	Date        string `json:"date"`
	HTMLURL     string `json:"html_url"`
}

// Branch is the output of Get Branch and an item of List Branches.
type Branch struct {
	Name      string `json:"name"`
	SHA       string `json:"sha"`
	Protected bool   `json:"protected"`
}

var branchSchema = schema.Object(schema.Props{
	"name": schema.String("Branch name."), "sha": schema.String("Head commit sha."), "protected": schema.Boolean("Whether branch protection is on."),
}, "name", "sha", "protected")

func (k *kit) branchSteps() []connectors.Step {
	return []connectors.Step{
		define(k, "create_branch", "Create Branch",
			"Creates a branch from another branch, a commit sha, or (by default) the head of the default branch.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"branch": schema.Text("Name of the new branch.").Pattern(refPattern),
				"from":   schema.String("Branch name or 40-hex commit sha to start from (default: the default branch)."),
			}), "owner", "repo", "branch"),
			schema.Object(schema.Props{
				"branch": schema.String("The new branch."), "ref": schema.String("Its fully qualified ref, refs/heads/<branch>."),
				"sha": schema.String("The commit it points at."), "from": schema.String("The branch or sha it was created from."),
			}, "branch", "ref", "sha", "from"),
			func(ctx context.Context, c *client, in *createBranchInput) (any, error) {
				from, sha := in.From, ""
				if shaRE.MatchString(from) {
					sha = from
				} else {
					if from == "" {
						r, err := c.GetRepository(ctx, in.Owner, in.Repo)
						if err != nil {
							return nil, err
						}
						from = r.DefaultBranch
					}
					ref, err := c.GetBranchRef(ctx, in.Owner, in.Repo, from)
					if err != nil {
						var ce *connectors.Error
						if errors.As(err, &ce) && ce.Code == connectors.CodeNotFound {
							ce.Message = "branch " + strconv.Quote(from) + " to create from: " + ce.Message
						}
						return nil, err
					}
					sha = ref.Object.SHA
				}
				created, err := c.CreateRef(ctx, in.Owner, in.Repo, "refs/heads/"+in.Branch, sha)
				if err != nil {
					return nil, err
				}
				return struct {
					Branch string `json:"branch"`
					Ref    string `json:"ref"`
					SHA    string `json:"sha"`
					From   string `json:"from"`
				}{in.Branch, created.Ref, created.Object.SHA, from}, nil
			}),
		define(k, "get_commit", "Get Commit",
			"Reads one commit: message, author, parents, line stats and changed files.",
			schema.Object(schema.Merge(repoProps, schema.Props{"ref": schema.Text("Commit sha, branch or tag.")}), "owner", "repo", "ref"),
			schema.Object(schema.Props{
				"sha": schema.String("Commit sha."), "message": schema.String("Message."), "author": personSchema, "committer": personSchema,
				"parents": schema.Array(schema.String(""), "Parent shas."), "html_url": schema.String("Web page."),
				"stats": schema.Object(schema.Props{"additions": schema.Integer("Lines added."), "deletions": schema.Integer("Lines deleted."), "total": schema.Integer("Lines changed.")},
					"additions", "deletions", "total"),
				"files": schema.Array(schema.Object(schema.Props{
					"filename": schema.String("Path."), "status": schema.String("added, removed, modified, renamed, ..."),
					"additions": schema.Integer("Lines added."), "deletions": schema.Integer("Lines deleted."), "changes": schema.Integer("Lines changed."),
				}, "filename", "status", "additions", "deletions", "changes"), "Changed files (GitHub lists at most 300)."),
			}, "sha", "message", "author", "committer", "parents", "html_url", "stats", "files"),
			func(ctx context.Context, c *client, in *commitInput) (any, error) {
				g, err := c.GetCommit(ctx, in.Owner, in.Repo, in.Ref)
				if err != nil {
					return nil, err
				}
				out := Commit{SHA: g.SHA, Message: g.Commit.Message, Author: g.Commit.Author, Committer: g.Commit.Committer,
					Parents: []string{}, HTMLURL: g.HTMLURL, Files: g.Files}
				out.Author.Login, out.Committer.Login = g.Author.login(), g.Committer.login()
				for _, p := range g.Parents {
					out.Parents = append(out.Parents, p.SHA)
				}
				if g.Stats != nil {
					out.Stats = *g.Stats
				}
				if out.Files == nil {
					out.Files = []CommitFile{}
				}
				return out, nil
			}),
		define(k, "list_commits", "List Commits",
			"Lists a repository's commits, newest first, optionally from a branch or sha, touching a path, by an author or within dates.",
			schema.Object(schema.Merge(repoProps, maxItemsProp, schema.Props{
				"sha":    schema.String("Branch or commit sha to list from (default: the default branch)."),
				"path":   schema.String("Only commits touching this file or directory."),
				"author": schema.String("Only commits by this login or email."),
				"since":  schema.DateTime("Only commits after this time (RFC 3339)."),
				"until":  schema.DateTime("Only commits before this time (RFC 3339)."),
			}), "owner", "repo"),
			listOutput("commits", schema.Object(schema.Props{
				"sha": schema.String("Commit sha."), "message": schema.String("Message."), "author_name": schema.String("Author's name."),
				"author_email": schema.String("Author's email."), "author_login": schema.String("Author's login, when GitHub knows it."),
				"date": schema.String("Authored (RFC 3339)."), "html_url": schema.String("Web page."),
			}, "sha", "message", "author_name", "author_email", "date", "html_url"), nil),
			func(ctx context.Context, c *client, in *listCommitsInput) (any, error) {
				cs, more, err := c.ListCommits(ctx, in.Owner, in.Repo, commitListOptions{
					SHA: in.SHA, Path: in.Path, Author: in.Author, Since: in.Since, Until: in.Until,
				}, in.MaxItems)
				if err != nil {
					return nil, err
				}
				out := make([]CommitSummary, len(cs))
				for i, g := range cs {
					out[i] = CommitSummary{SHA: g.SHA, Message: g.Commit.Message, AuthorName: g.Commit.Author.Name,
						AuthorEmail: g.Commit.Author.Email, AuthorLogin: g.Author.login(), Date: g.Commit.Author.Date, HTMLURL: g.HTMLURL}
				}
				return struct {
					Commits []CommitSummary `json:"commits"`
					Count   int             `json:"count"`
					HasMore bool            `json:"has_more"`
				}{out, len(out), more}, nil
			}),
		define(k, "list_branches", "List Branches",
			"Lists a repository's branches with their head commits.",
			schema.Object(schema.Merge(repoProps, maxItemsProp, schema.Props{
				"protected": schema.Boolean("Only protected (true) or only unprotected (false) branches."),
			}), "owner", "repo"),
			listOutput("branches", branchSchema, nil),
			func(ctx context.Context, c *client, in *listBranchesInput) (any, error) {
				bs, more, err := c.ListBranches(ctx, in.Owner, in.Repo, in.Protected, in.MaxItems)
				if err != nil {
					return nil, err
				}
				out := make([]Branch, len(bs))
				for i, b := range bs {
					out[i] = Branch{Name: b.Name, SHA: b.Commit.SHA, Protected: b.Protected}
				}
				return struct {
					Branches []Branch `json:"branches"`
					Count    int      `json:"count"`
					HasMore  bool     `json:"has_more"`
				}{out, len(out), more}, nil
			}),
		define(k, "get_branch", "Get Branch",
			"Reads one branch: its head commit sha and whether it is protected.",
			schema.Object(schema.Merge(repoProps, schema.Props{"branch": schema.Text("Branch name.")}), "owner", "repo", "branch"),
			branchSchema,
			func(ctx context.Context, c *client, in *branchInput) (any, error) {
				b, err := c.GetBranch(ctx, in.Owner, in.Repo, in.Branch)
				if err != nil {
					return nil, err
				}
				return Branch{Name: b.Name, SHA: b.Commit.SHA, Protected: b.Protected}, nil
			}),
	}
}
