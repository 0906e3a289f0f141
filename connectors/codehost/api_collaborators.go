package codehost

import (
	"context"
	"net/http"
)

// The code host's collaborator endpoints the collaborator steps call: one
// method per upstream request, each linking GitHub's documentation of it.

// collaboratorPath is /repos/{owner}/{repo}/collaborators/{username} plus
// rest.
func collaboratorPath(owner, repo, username, rest string) string {
	return repoPath(owner, repo, "/collaborators/", seg(username), rest)
}

// ghPermission is a user's permission on a repository.
type ghPermission struct {
	Permission string `json:"permission"`
	RoleName   string `json:"role_name"`
}

// GetCollaboratorPermission reads a user's permission on a repository.
//
// GitHub API docs: https://docs.github.com/rest/collaborators/collaborators#get-repository-permissions-for-a-user
func (c *client) GetCollaboratorPermission(ctx context.Context, owner, repo, username string) (*ghPermission, error) {
	var r ghPermission
	if err := c.getJSON(ctx, collaboratorPath(owner, repo, username, "/permission"), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// AddCollaborator invites a user with permission, or changes an existing
// collaborator's permission. invited reports an invitation sent (GitHub
// answered 201) and invitationID its id; an existing collaborator gets
// false and 0.
//
// GitHub API docs: https://docs.github.com/rest/collaborators/collaborators#add-a-repository-collaborator
func (c *client) AddCollaborator(ctx context.Context, owner, repo, username, permission string) (invited bool, invitationID int64, err error) {
	var inv struct {
		ID int64 `json:"id"`
	}
	status, err := c.sendJSON(ctx, http.MethodPut, collaboratorPath(owner, repo, username, ""), map[string]string{"permission": permission}, &inv)
	if err != nil {
		return false, 0, err
	}
	return status == http.StatusCreated, inv.ID, nil
}

// RemoveCollaborator removes a user's collaborator access (and any
// pending invitation).
//
// GitHub API docs: https://docs.github.com/rest/collaborators/collaborators#remove-a-repository-collaborator
func (c *client) RemoveCollaborator(ctx context.Context, owner, repo, username string) error {
	_, err := c.sendJSON(ctx, http.MethodDelete, collaboratorPath(owner, repo, username, ""), nil, nil)
	return err
}
