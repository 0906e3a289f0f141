package codehost

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// Gist is the structured output of the gist steps.
type Gist struct {
	ID          string     `json:"id"`
	Description string     `json:"description"`
	Public      bool       `json:"public"`
	Owner       string     `json:"owner"`
	HTMLURL     string     `json:"html_url"`
	Files       []GistFile `json:"files"`
	CreatedAt   string     `json:"created_at"`
	UpdatedAt   string     `json:"updated_at"`
}

// GistFile is one file of a gist.
type GistFile struct {
	Filename string `json:"filename"`
	Language string `json:"language,omitempty"`
	Size     int64  `json:"size"`
	RawURL   string `json:"raw_url"`
}

func (g ghGist) out() Gist {
	out := g.Gist
	out.Owner = g.Owner.login()
	out.Files = make([]GistFile, 0, len(g.Files))
	for name, f := range g.Files {
		if f.Filename == "" {
			f.Filename = name
		}
		out.Files = append(out.Files, f)
	}
	slices.SortFunc(out.Files, func(a, b GistFile) int { return strings.Compare(a.Filename, b.Filename) })
	return out
}

var gistSchema = schema.Object(schema.Props{
	"id": schema.String("Gist id."), "description": schema.String("Description."), "public": schema.Boolean("Whether it is public."),
	"owner": schema.String("Owner's login."), "html_url": schema.String("Web page."),
	"files": schema.Array(schema.Object(schema.Props{
		"filename": schema.String("File name."), "language": schema.String("Language GitHub detected."), "size": schema.Integer("Size in bytes."), "raw_url": schema.String("Raw content URL."),
	}, "filename", "size", "raw_url"), "Files, by name."),
	"created_at": schema.String("Created (RFC 3339)."), "updated_at": schema.String("Last updated (RFC 3339)."),
}, "id", "description", "public", "owner", "html_url", "files", "created_at", "updated_at")

// gistFileName refuses names GitHub would refuse or that would be
// misread ("gistfile1.txt" style names are fine).
func (p *problems) gistFileName(name string) {
	if strings.TrimSpace(name) == "" || strings.Contains(name, "/") {
		p.addf("gist file name %q must be non-empty and contain no slash", name)
	}
}

type createGistInput struct {
	Description string              `json:"description,omitempty"`
	Public      bool                `json:"public,omitempty"`
	Files       map[string]gistFile `json:"files"`
}

func (in *createGistInput) check() error {
	var p problems
	if len(in.Files) == 0 {
		p.addf("files needs at least one file")
	}
	for name, f := range in.Files {
		p.gistFileName(name)
		if f.Content == "" {
			p.addf("file %q has no content; GitHub refuses empty gist files", name)
		}
	}
	return p.err()
}

// gistFileChange is one entry of Update Gist's files: null deletes the
// file.
type gistFileChange struct {
	Content  *string `json:"content,omitempty"`
	Filename *string `json:"filename,omitempty"`
}

type updateGistInput struct {
	GistID      string                     `json:"gist_id"`
	Description *string                    `json:"description,omitempty"`
	Files       map[string]*gistFileChange `json:"files,omitempty"`
}

var gistIDRE = regexp.MustCompile(`^[0-9a-fA-F]{1,64}$`)

func (in *updateGistInput) check() error {
	var p problems
	if !gistIDRE.MatchString(in.GistID) {
		p.addf("gist_id must be a gist's hex id")
	}
	for name, f := range in.Files {
		p.gistFileName(name)
		if f != nil && f.Filename != nil {
			p.gistFileName(*f.Filename)
		}
	}
	if in.Description == nil && len(in.Files) == 0 {
		p.addf("nothing to update: give description or files")
	}
	return p.err()
}

type listGistsInput struct {
	listInput
	Username string `json:"username"`
	Since    string `json:"since,omitempty"`
}

func (in *listGistsInput) check() error {
	var p problems
	in.checkList(&p)
	p.name("username", in.Username)
	p.timestamp("since", in.Since)
	return p.err()
}

func (k *kit) gistSteps() []connectors.Step {
	return []connectors.Step{
		define(k, "create_gist", "Create Gist",
			"Creates a gist with one or more files, secret unless public is true.",
			schema.Object(schema.Props{
				"description": schema.String("Description."),
				"public":      schema.Boolean("Make it public (default: secret)."),
				"files":       schema.Map(schema.Object(schema.Props{"content": schema.Text("File content.")}, "content"), "Files by name.").MinProperties(1),
			}, "files"),
			gistSchema,
			func(ctx context.Context, c *client, in *createGistInput) (any, error) {
				g, err := c.CreateGist(ctx, in.Description, in.Public, in.Files)
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
		define(k, "update_gist", "Update Gist",
			"Changes a gist's description or files: new content, a new name, new files, or null to delete a file.",
			schema.Object(schema.Props{
				"gist_id":     schema.String("Gist id.").Pattern(`^[0-9a-fA-F]{1,64}$`),
				"description": schema.String("New description."),
				"files": schema.Map(schema.Object(schema.Props{
					"content":  schema.String("New content."),
					"filename": schema.Text("New name."),
				}).Nullable(), "Changes by current file name; null deletes the file."),
			}, "gist_id"),
			gistSchema,
			func(ctx context.Context, c *client, in *updateGistInput) (any, error) {
				g, err := c.UpdateGist(ctx, in.GistID, in.Description, in.Files)
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
		define(k, "list_gists_for_a_user", "List Gists for a User",
			"Lists a user's public gists; for the connected account's own login, all of its gists, secret ones included.",
			schema.Object(schema.Merge(maxItemsProp, schema.Props{
				"username": ghName("The user's login; the connected account's own login lists its secret gists too."),
				"since":    schema.DateTime("Only gists updated after this time (RFC 3339)."),
			}), "username"),
			listOutput("gists", gistSchema, nil),
			func(ctx context.Context, c *client, in *listGistsInput) (any, error) {
				// A user's gists list public gists only, even to their
				// owner; the account's own secret gists come only from
				// its own list. Logins are case-insensitive.
				var (
					gs   []ghGist
					more bool
					err  error
				)
				if c.login != "" && strings.EqualFold(in.Username, c.login) {
					gs, more, err = c.ListOwnGists(ctx, in.Since, in.MaxItems)
				} else {
					gs, more, err = c.ListUserGists(ctx, in.Username, in.Since, in.MaxItems)
				}
				if err != nil {
					return nil, err
				}
				out := make([]Gist, len(gs))
				for i, g := range gs {
					out[i] = g.out()
				}
				return struct {
					Gists   []Gist `json:"gists"`
					Count   int    `json:"count"`
					HasMore bool   `json:"has_more"`
				}{out, len(out), more}, nil
			}),
	}
}
