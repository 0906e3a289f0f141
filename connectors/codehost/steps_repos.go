package codehost

import (
	"context"
	"encoding/base64"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// Repository is the structured output of the repository steps.
type Repository struct {
	ID            int64    `json:"id"`
	Name          string   `json:"name"`
	FullName      string   `json:"full_name"`
	Owner         string   `json:"owner"`
	Private       bool     `json:"private"`
	Visibility    string   `json:"visibility"`
	Description   string   `json:"description"`
	Homepage      string   `json:"homepage"`
	HTMLURL       string   `json:"html_url"`
	DefaultBranch string   `json:"default_branch"`
	Fork          bool     `json:"fork"`
	Archived      bool     `json:"archived"`
	IsTemplate    bool     `json:"is_template"`
	Stars         int      `json:"stargazers_count"`
	Forks         int      `json:"forks_count"`
	OpenIssues    int      `json:"open_issues_count"`
	Topics        []string `json:"topics"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	PushedAt      string   `json:"pushed_at,omitempty"`
}

func (g ghRepo) out() Repository {
	r := g.Repository
	r.Owner = g.Owner.Login
	if r.Visibility == "" {
		r.Visibility = "public"
		if r.Private {
			r.Visibility = "private"
		}
	}
	if r.Topics == nil {
		r.Topics = []string{}
	}
	return r
}

var repositorySchema = schema.Object(schema.Props{
	"id": schema.Integer("Repository id."), "name": schema.String("Name."), "full_name": schema.String("owner/name."), "owner": schema.String("Owner's login."),
	"private": schema.Boolean("Whether it is private."), "visibility": schema.Enum("Visibility.", "public", "private", "internal"),
	"description": schema.String("Description (may be empty)."), "homepage": schema.String("Homepage URL (may be empty)."),
	"html_url": schema.String("Web page."), "default_branch": schema.String("Default branch."), "fork": schema.Boolean("Whether it is a fork."),
	"archived": schema.Boolean("Whether it is archived."), "is_template": schema.Boolean("Whether it is a template."),
	"stargazers_count": schema.Integer("Stars."), "forks_count": schema.Integer("Forks."), "open_issues_count": schema.Integer("Open issues and pull requests."),
	"topics": schema.Array(schema.String(""), "Topics."), "created_at": schema.String("Created (RFC 3339)."), "updated_at": schema.String("Last updated (RFC 3339)."),
	"pushed_at": schema.String("Last push (RFC 3339), absent for a repository never pushed to."),
}, "id", "name", "full_name", "owner", "private", "visibility", "description", "homepage", "html_url", "default_branch",
	"fork", "archived", "is_template", "stargazers_count", "forks_count", "open_issues_count", "topics", "created_at", "updated_at")

type createRepoInput struct {
	Name              string `json:"name"`
	Org               string `json:"org,omitempty"`
	Description       string `json:"description,omitempty"`
	Homepage          string `json:"homepage,omitempty"`
	Private           *bool  `json:"private,omitempty"`
	Visibility        string `json:"visibility,omitempty"`
	AutoInit          *bool  `json:"auto_init,omitempty"`
	GitignoreTemplate string `json:"gitignore_template,omitempty"`
	LicenseTemplate   string `json:"license_template,omitempty"`
	HasIssues         *bool  `json:"has_issues,omitempty"`
	HasProjects       *bool  `json:"has_projects,omitempty"`
	HasWiki           *bool  `json:"has_wiki,omitempty"`
	IsTemplate        *bool  `json:"is_template,omitempty"`
}

func (in *createRepoInput) check() error {
	var p problems
	p.name("name", in.Name)
	if in.Org != "" {
		p.name("org", in.Org)
	}
	p.enum("visibility", in.Visibility, "public", "private", "internal")
	if in.Visibility == "internal" && in.Org == "" {
		p.addf("visibility internal needs an org")
	}
	return p.err()
}

// Content is the output of Get Repository Content: a file (decoded
// content), a directory (entries), a symlink or a submodule.
type Content struct {
	Type         string  `json:"type"`
	Path         string  `json:"path"`
	Name         string  `json:"name"`
	SHA          string  `json:"sha,omitempty"`
	Size         int64   `json:"size"`
	Encoding     string  `json:"encoding,omitempty"`
	Content      *string `json:"content,omitempty"`
	Target       string  `json:"target,omitempty"`
	SubmoduleURL string  `json:"submodule_git_url,omitempty"`
	HTMLURL      string  `json:"html_url,omitempty"`
	Entries      []Entry `json:"entries,omitempty"`
}

// Entry is one entry of a directory.
type Entry struct {
	Type string `json:"type"`
	Name string `json:"name"`
	Path string `json:"path"`
	SHA  string `json:"sha"`
	Size int64  `json:"size"`
}

// File is the output of Get File.
type File struct {
	Path     string `json:"path"`
	Name     string `json:"name"`
	SHA      string `json:"sha"`
	Size     int64  `json:"size"`
	Encoding string `json:"encoding"`
	Content  string `json:"content"`
	HTMLURL  string `json:"html_url"`
}

// decodeContent turns GitHub's base64 (line-wrapped) into text when it is
// UTF-8, else into unwrapped base64. A file over 1 MB comes without
// content: encoding "none".
func decodeContent(c ghContent) (encoding, content string, err error) {
	if c.Encoding != "base64" {
		return "none", "", nil
	}
	clean := strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', ' ', '\t':
			return -1
		}
		return r
	}, c.Content)
	b, err := base64.StdEncoding.DecodeString(clean)
	if err != nil {
		return "", "", &connectors.Error{Code: connectors.CodeUpstream, Message: "decode the base64 content of " + c.Path + ": " + err.Error()}
	}
	if utf8.Valid(b) {
		return "utf-8", string(b), nil
	}
	return "base64", base64.StdEncoding.EncodeToString(b), nil
}

type contentInput struct {
	repoInput
	Path string `json:"path"`
	Ref  string `json:"ref,omitempty"`
}

func (in *contentInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.filePath("path", in.Path, true)
	return p.err()
}

type fileInput struct{ contentInput }

func (in *fileInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.filePath("path", in.Path, false)
	return p.err()
}

type putFileInput struct {
	repoInput
	Path      string      `json:"path"`
	Content   string      `json:"content"`
	Encoding  string      `json:"encoding,omitempty"`
	Message   string      `json:"message"`
	Branch    string      `json:"branch,omitempty"`
	SHA       string      `json:"sha,omitempty"`
	Committer *gitPersona `json:"committer,omitempty"`
	Author    *gitPersona `json:"author,omitempty"`
}

type gitPersona struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// shaPattern matches a commit or blob sha (SHA-1 or SHA-256); the input
// schemas carry it and shaRE checks it.
const shaPattern = `^[0-9a-f]{40}([0-9a-f]{24})?$`

var shaRE = regexp.MustCompile(shaPattern)

func (p *problems) sha(field, v string, required bool) {
	switch {
	case v == "" && required:
		p.addf("%s is required", field)
	case v != "" && !shaRE.MatchString(v):
		p.addf("%s must be a 40 (or 64) hex digit git sha", field)
	}
}

func (p *problems) persona(field string, g *gitPersona) {
	if g != nil && (strings.TrimSpace(g.Name) == "" || !strings.Contains(g.Email, "@")) {
		p.addf("%s needs a name and an email", field)
	}
}

func (in *putFileInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.filePath("path", in.Path, false)
	p.required("message", in.Message)
	p.enum("encoding", in.Encoding, "utf-8", "base64")
	if in.Encoding == "base64" {
		if _, err := base64.StdEncoding.DecodeString(in.Content); err != nil {
			p.addf("content is not valid base64")
		}
	}
	p.sha("sha", in.SHA, false)
	p.persona("committer", in.Committer)
	p.persona("author", in.Author)
	return p.err()
}

// FileCommit is the output of Create or Update File Contents.
type FileCommit struct {
	Created       bool   `json:"created"`
	Path          string `json:"path"`
	SHA           string `json:"sha"`
	Size          int64  `json:"size"`
	HTMLURL       string `json:"html_url"`
	CommitSHA     string `json:"commit_sha"`
	CommitHTMLURL string `json:"commit_html_url"`
}

type deleteFileInput struct {
	repoInput
	Path      string      `json:"path"`
	Message   string      `json:"message"`
	SHA       string      `json:"sha"`
	Branch    string      `json:"branch,omitempty"`
	Committer *gitPersona `json:"committer,omitempty"`
}

func (in *deleteFileInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.filePath("path", in.Path, false)
	p.required("message", in.Message)
	p.sha("sha", in.SHA, true)
	p.persona("committer", in.Committer)
	return p.err()
}

type repoOnlyInput struct{ repoInput }

func (in *repoOnlyInput) check() error {
	var p problems
	in.checkRepo(&p)
	return p.err()
}

type releasesInput struct {
	repoInput
	listInput
}

func (in *releasesInput) check() error {
	var p problems
	in.checkRepo(&p)
	in.checkList(&p)
	return p.err()
}

// Release is one release in List Releases.
type Release struct {
	ID              int64  `json:"id"`
	TagName         string `json:"tag_name"`
	Name            string `json:"name"`
	Body            string `json:"body"`
	Draft           bool   `json:"draft"`
	Prerelease      bool   `json:"prerelease"`
	TargetCommitish string `json:"target_commitish"`
	HTMLURL         string `json:"html_url"`
	Author          string `json:"author"`
	CreatedAt       string `json:"created_at"`
	PublishedAt     string `json:"published_at,omitempty"`
}

type noInput struct{}

func (*noInput) check() error { return nil }

// Budget is one rate limit resource in Get Rate Limit Status.
type Budget struct {
	Limit     int    `json:"limit"`
	Remaining int    `json:"remaining"`
	Used      int    `json:"used"`
	Reset     string `json:"reset"`
}

var repoOnlySchema = schema.Object(repoProps, "owner", "repo")

func (k *kit) repoSteps() []connectors.Step {
	entrySchema := schema.Object(schema.Props{
		"type": schema.Enum("Entry type.", "file", "dir", "symlink", "submodule"), "name": schema.String("Name."), "path": schema.String("Path."),
		"sha": schema.String("Git sha."), "size": schema.Integer("Size in bytes (0 for a directory)."),
	}, "type", "name", "path", "sha", "size")
	encoding := schema.Enum("utf-8: content is the text; base64: the file is binary and content is base64; none: the file is over 1 MB and GitHub sent no content.", "utf-8", "base64", "none")
	return []connectors.Step{
		define(k, "create_repository", "Create Repository",
			"Creates a repository for the account, or in an organisation when org is given.",
			schema.Object(schema.Props{
				"name":               ghName("Repository name."),
				"org":                ghName("Organisation to create it in; omit for the account's own repository."),
				"description":        schema.String("Short description."),
				"homepage":           schema.String("Homepage URL."),
				"private":            schema.Boolean("Create it private (default false)."),
				"visibility":         schema.Enum("Visibility; internal needs an org on GitHub Enterprise Cloud.", "public", "private", "internal"),
				"auto_init":          schema.Boolean("Create an initial commit with a README."),
				"gitignore_template": schema.String("A .gitignore template name, e.g. Go."),
				"license_template":   schema.String("A license keyword, e.g. mit."),
				"has_issues":         schema.Boolean("Enable issues (default true)."),
				"has_projects":       schema.Boolean("Enable projects (default true)."),
				"has_wiki":           schema.Boolean("Enable the wiki (default true)."),
				"is_template":        schema.Boolean("Make it a template repository."),
			}, "name"),
			repositorySchema,
			func(ctx context.Context, c *client, in *createRepoInput) (any, error) {
				r, err := c.CreateRepository(ctx, in.Org, *in)
				if err != nil {
					return nil, err
				}
				return r.out(), nil
			}),
		define(k, "get_repository_info", "Get Repository Info",
			"Reads a repository's details: visibility, default branch, counts and timestamps.",
			repoOnlySchema, repositorySchema,
			func(ctx context.Context, c *client, in *repoOnlyInput) (any, error) {
				r, err := c.GetRepository(ctx, in.Owner, in.Repo)
				if err != nil {
					return nil, err
				}
				return r.out(), nil
			}),
		define(k, "get_repository_content", "Get Repository Content",
			"Reads a file (decoded content and blob sha) or lists a directory of a repository.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"path": schema.String("Path of the file or directory; empty for the repository root."),
				"ref":  schema.String("Branch, tag or commit sha (default: the default branch)."),
			}), "owner", "repo"),
			schema.Object(schema.Props{
				"type": schema.Enum("What the path is.", "file", "dir", "symlink", "submodule"),
				"path": schema.String("Path."), "name": schema.String("Name (empty for the root)."), "sha": schema.String("Blob sha of a file: pass it to update or delete it."),
				"size": schema.Integer("Size in bytes."), "encoding": encoding, "content": schema.String("A file's content."),
				"target": schema.String("A symlink's target."), "submodule_git_url": schema.String("A submodule's URL."),
				"html_url": schema.String("Web page."), "entries": schema.Array(entrySchema, "A directory's entries."),
			}, "type", "path", "name", "size"),
			func(ctx context.Context, c *client, in *contentInput) (any, error) {
				file, dir, err := c.GetContents(ctx, in.Owner, in.Repo, in.Path, in.Ref)
				if err != nil {
					return nil, err
				}
				if file == nil {
					out := Content{Type: "dir", Path: in.Path, Name: lastSegment(in.Path), Entries: make([]Entry, 0, len(dir))}
					for _, e := range dir {
						out.Entries = append(out.Entries, Entry{Type: e.Type, Name: e.Name, Path: e.Path, SHA: e.SHA, Size: e.Size})
					}
					return out, nil
				}
				out := Content{Type: file.Type, Path: file.Path, Name: file.Name, SHA: file.SHA, Size: file.Size,
					Target: file.Target, SubmoduleURL: file.SubmoduleGitURL, HTMLURL: file.HTMLURL}
				if file.Type == "file" {
					enc, content, err := decodeContent(*file)
					if err != nil {
						return nil, err
					}
					out.Encoding, out.Content = enc, &content
				}
				return out, nil
			}),
		define(k, "get_file", "Get File",
			"Reads one file of a repository: its decoded content and the blob sha needed to update or delete it.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"path": schema.Text("Path of the file."),
				"ref":  schema.String("Branch, tag or commit sha (default: the default branch)."),
			}), "owner", "repo", "path"),
			schema.Object(schema.Props{
				"path": schema.String("Path."), "name": schema.String("File name."), "sha": schema.String("Blob sha."), "size": schema.Integer("Size in bytes."),
				"encoding": encoding, "content": schema.String("Content (see encoding)."), "html_url": schema.String("Web page."),
			}, "path", "name", "sha", "size", "encoding", "content", "html_url"),
			func(ctx context.Context, c *client, in *fileInput) (any, error) {
				file, _, err := c.GetContents(ctx, in.Owner, in.Repo, in.Path, in.Ref)
				if err != nil {
					return nil, err
				}
				if file == nil || file.Type != "file" {
					return nil, connectors.Errorf(connectors.CodeValidation, "%s is not a file; Get Repository Content lists directories", in.Path)
				}
				enc, content, err := decodeContent(*file)
				if err != nil {
					return nil, err
				}
				return File{Path: file.Path, Name: file.Name, SHA: file.SHA, Size: file.Size, Encoding: enc, Content: content, HTMLURL: file.HTMLURL}, nil
			}),
		define(k, "star_repo", "Star Repo",
			"Stars a repository as the account.",
			repoOnlySchema,
			schema.Object(schema.Props{"repository": schema.String("owner/name."), "starred": schema.Boolean("Always true.")}, "repository", "starred"),
			func(ctx context.Context, c *client, in *repoOnlyInput) (any, error) {
				if err := c.StarRepository(ctx, in.Owner, in.Repo); err != nil {
					return nil, err
				}
				return struct {
					Repository string `json:"repository"`
					Starred    bool   `json:"starred"`
				}{in.Owner + "/" + in.Repo, true}, nil
			}),
		define(k, "create_or_update_file_contents", "Create or Update File Contents",
			"Commits a new file, or a new version of a file (pass its current blob sha), to a branch.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"path":      schema.Text("Path of the file."),
				"content":   schema.String("New content: text, or base64 when encoding is base64."),
				"encoding":  schema.Enum("How content is given (default utf-8).", "utf-8", "base64"),
				"message":   schema.Text("Commit message."),
				"branch":    schema.String("Branch to commit to (default: the default branch)."),
				"sha":       schema.String("Blob sha of the file being replaced; required to update an existing file.").Pattern(shaPattern),
				"committer": gitPersonaSchema("Committer (default: the account)."),
				"author":    gitPersonaSchema("Author (default: the committer)."),
			}), "owner", "repo", "path", "content", "message"),
			schema.Object(schema.Props{
				"created": schema.Boolean("True for a new file, false for an update."), "path": schema.String("Path."), "sha": schema.String("The new blob sha."),
				"size": schema.Integer("Size in bytes."), "html_url": schema.String("The file's web page."),
				"commit_sha": schema.String("The commit's sha."), "commit_html_url": schema.String("The commit's web page."),
			}, "created", "path", "sha", "size", "html_url", "commit_sha", "commit_html_url"),
			func(ctx context.Context, c *client, in *putFileInput) (any, error) {
				content := in.Content
				if in.Encoding != "base64" {
					content = base64.StdEncoding.EncodeToString([]byte(in.Content))
				}
				r, created, err := c.CreateOrUpdateFile(ctx, in.Owner, in.Repo, in.Path, fileUpdate{
					Message: in.Message, Content: content, Branch: in.Branch, SHA: in.SHA, Committer: in.Committer, Author: in.Author,
				})
				if err != nil {
					return nil, err
				}
				return FileCommit{Created: created, Path: r.Content.Path, SHA: r.Content.SHA, Size: r.Content.Size,
					HTMLURL: r.Content.HTMLURL, CommitSHA: r.Commit.SHA, CommitHTMLURL: r.Commit.HTMLURL}, nil
			}),
		define(k, "delete_file", "Delete File",
			"Deletes a file from a branch with a commit; needs the file's current blob sha.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"path":      schema.Text("Path of the file."),
				"message":   schema.Text("Commit message."),
				"sha":       schema.String("Blob sha of the file being deleted.").Pattern(shaPattern),
				"branch":    schema.String("Branch (default: the default branch)."),
				"committer": gitPersonaSchema("Committer (default: the account)."),
			}), "owner", "repo", "path", "message", "sha"),
			schema.Object(schema.Props{
				"path": schema.String("Path."), "deleted": schema.Boolean("Always true."),
				"commit_sha": schema.String("The commit's sha."), "commit_html_url": schema.String("The commit's web page."),
			}, "path", "deleted", "commit_sha", "commit_html_url"),
			func(ctx context.Context, c *client, in *deleteFileInput) (any, error) {
				r, err := c.DeleteFile(ctx, in.Owner, in.Repo, in.Path, fileDelete{Message: in.Message, SHA: in.SHA, Branch: in.Branch, Committer: in.Committer})
				if err != nil {
					return nil, err
				}
				return struct {
					Path          string `json:"path"`
					Deleted       bool   `json:"deleted"`
					CommitSHA     string `json:"commit_sha"`
					CommitHTMLURL string `json:"commit_html_url"`
				}{in.Path, true, r.Commit.SHA, r.Commit.HTMLURL}, nil
			}),
		define(k, "list_releases", "List Releases",
			"Lists a repository's releases, newest first.",
			schema.Object(schema.Merge(repoProps, maxItemsProp), "owner", "repo"),
			listOutput("releases", schema.Object(schema.Props{
				"id": schema.Integer("Release id."), "tag_name": schema.String("Tag."), "name": schema.String("Title."), "body": schema.String("Notes."),
				"draft": schema.Boolean("Draft."), "prerelease": schema.Boolean("Pre-release."), "target_commitish": schema.String("Branch or sha tagged."),
				"html_url": schema.String("Web page."), "author": schema.String("Author's login."), "created_at": schema.String("Created (RFC 3339)."),
				"published_at": schema.String("Published (RFC 3339); absent for drafts."),
			}, "id", "tag_name", "name", "body", "draft", "prerelease", "target_commitish", "html_url", "author", "created_at"), nil),
			func(ctx context.Context, c *client, in *releasesInput) (any, error) {
				rs, more, err := c.ListReleases(ctx, in.Owner, in.Repo, in.MaxItems)
				if err != nil {
					return nil, err
				}
				out := make([]Release, len(rs))
				for i, r := range rs {
					out[i] = r.Release
					out[i].Author = r.Author.login()
				}
				return struct {
					Releases []Release `json:"releases"`
					Count    int       `json:"count"`
					HasMore  bool      `json:"has_more"`
				}{out, len(out), more}, nil
			}),
		define(k, "get_rate_limit_status", "Get Rate Limit Status",
			"Reads the account's GitHub rate limit budgets (core, search, graphql, ...); the call itself costs nothing.",
			schema.Object(schema.Props{}),
			schema.Object(schema.Props{"resources": schema.Map(schema.Object(schema.Props{
				"limit": schema.Integer("Requests per window."), "remaining": schema.Integer("Requests left."),
				"used": schema.Integer("Requests used."), "reset": schema.String("When the window resets (RFC 3339)."),
			}, "limit", "remaining", "used", "reset"), "Budgets by resource.")}, "resources"),
			func(ctx context.Context, c *client, _ *noInput) (any, error) {
				r, err := c.GetRateLimit(ctx)
				if err != nil {
					return nil, err
				}
				out := map[string]Budget{}
				for name, b := range r.Resources {
					out[name] = Budget{Limit: b.Limit, Remaining: b.Remaining, Used: b.Used, Reset: time.Unix(b.Reset, 0).UTC().Format(time.RFC3339)}
				}
				return struct {
					Resources map[string]Budget `json:"resources"`
				}{out}, nil
			}),
	}
}

func gitPersonaSchema(desc string) schema.Schema {
	return schema.Object(schema.Props{"name": schema.Text("Name."), "email": schema.String("Email address.").Format("email")}, "name", "email").Describe(desc)
}

func setIf(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func lastSegment(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
