package codehost

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// The code host's gist endpoints the gist steps call: one method per
// upstream request, each linking GitHub's documentation of it.

// gistFile is a file of a new gist.
type gistFile struct {
	Content string `json:"content"`
}

// CreateGist creates a gist, secret unless public.
//
// GitHub API docs: https://docs.github.com/rest/gists/gists#create-a-gist
func (c *client) CreateGist(ctx context.Context, description string, public bool, files map[string]gistFile) (*ghGist, error) {
	var g ghGist
	if _, err := c.sendJSON(ctx, http.MethodPost, "/gists", map[string]any{
		"description": description, "public": public, "files": files,
	}, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// UpdateGist changes a gist: description when not nil, and files by
// current name, a nil change deleting the file.
//
// GitHub API docs: https://docs.github.com/rest/gists/gists#update-a-gist
func (c *client) UpdateGist(ctx context.Context, gistID string, description *string, files map[string]*gistFileChange) (*ghGist, error) {
	body := map[string]any{}
	if description != nil {
		body["description"] = *description
	}
	if len(files) > 0 {
		fs := map[string]json.RawMessage{}
		for name, f := range files {
			b := []byte("null")
			if f != nil {
				b, _ = json.Marshal(f)
			}
			fs[name] = b
		}
		body["files"] = fs
	}
	var g ghGist
	if _, err := c.sendJSON(ctx, http.MethodPatch, "/gists/"+seg(gistID), body, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// ListUserGists lists a user's public gists (even to their owner),
// updated after since when it is not empty, reading at most maxItems;
// more reports whether GitHub had more.
//
// GitHub API docs: https://docs.github.com/rest/gists/gists#list-gists-for-a-user
func (c *client) ListUserGists(ctx context.Context, username, since string, maxItems int) (gists []ghGist, more bool, err error) {
	return c.listGists(ctx, "/users/"+seg(username)+"/gists", since, maxItems)
}

// ListOwnGists lists the connected account's gists, secret ones
// included, as ListUserGists does.
//
// GitHub API docs: https://docs.github.com/rest/gists/gists#list-gists-for-the-authenticated-user
func (c *client) ListOwnGists(ctx context.Context, since string, maxItems int) (gists []ghGist, more bool, err error) {
	return c.listGists(ctx, "/gists", since, maxItems)
}

func (c *client) listGists(ctx context.Context, path, since string, maxItems int) (gists []ghGist, more bool, err error) {
	q := url.Values{}
	setQuery(q, "since", since)
	gists, _, more, err = listPages[ghGist](ctx, c, path, q, maxItems, nil)
	return gists, more, err
}

// GitHub's answers, as far as the steps read them.

type ghGist struct {
	Gist
	Owner *ghUser             `json:"owner"`
	Files map[string]GistFile `json:"files"`
}
