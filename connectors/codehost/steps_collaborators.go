package codehost

import (
	"context"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// collaboratorPermissions are the permissions a collaborator can be
// given.
var collaboratorPermissions = []string{"pull", "push", "triage", "maintain", "admin"}

type collaboratorInput struct {
	repoInput
	Username string `json:"username"`
}

func (in *collaboratorInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.name("username", in.Username)
	return p.err()
}

type addCollaboratorInput struct {
	collaboratorInput
	Permission string `json:"permission,omitempty"`
}

func (in *addCollaboratorInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.name("username", in.Username)
	p.enum("permission", in.Permission, collaboratorPermissions...)
	return p.err()
}

func (k *kit) collaboratorSteps() []connectors.Step {
	collabProps := schema.Merge(repoProps, schema.Props{"username": ghName("The user's login.")})
	required := []string{"owner", "repo", "username"}
	return []connectors.Step{
		define(k, "check_collaborator_permission", "Check Collaborator Permission",
			"Reads a user's permission on a repository: admin, write, read or none.",
			schema.Object(collabProps, required...),
			schema.Object(schema.Props{
				"username":   schema.String("The user."),
				"permission": schema.Enum("Permission.", "admin", "write", "read", "none"),
				"role_name":  schema.String("Role: admin, maintain, write, triage, read or a custom role (empty for none)."),
			}, "username", "permission", "role_name"),
			func(ctx context.Context, c *client, in *collaboratorInput) (any, error) {
				r, err := c.GetCollaboratorPermission(ctx, in.Owner, in.Repo, in.Username)
				if err != nil {
					return nil, err
				}
				return struct {
					Username   string `json:"username"`
					Permission string `json:"permission"`
					RoleName   string `json:"role_name"`
				}{in.Username, r.Permission, r.RoleName}, nil
			}),
		define(k, "add_collaborator", "Add Collaborator",
			"Invites a user to collaborate on a repository, or changes an existing collaborator's permission.",
			schema.Object(schema.Merge(collabProps, schema.Props{
				"permission": schema.Enum("Permission to grant (default push).", collaboratorPermissions...),
			}), required...),
			schema.Object(schema.Props{
				"username": schema.String("The user."), "permission": schema.Enum("Permission granted.", collaboratorPermissions...),
				"invited":       schema.Boolean("True when an invitation was sent (the user must accept it); false when an existing collaborator's permission changed."),
				"invitation_id": schema.Integer("The invitation's id, when one was sent."),
			}, "username", "permission", "invited"),
			func(ctx context.Context, c *client, in *addCollaboratorInput) (any, error) {
				perm := in.Permission
				if perm == "" {
					perm = "push"
				}
				invited, invitationID, err := c.AddCollaborator(ctx, in.Owner, in.Repo, in.Username, perm)
				if err != nil {
					return nil, err
				}
				return struct {
					Username     string `json:"username"`
					Permission   string `json:"permission"`
					Invited      bool   `json:"invited"`
					InvitationID int64  `json:"invitation_id,omitempty"`
				}{in.Username, perm, invited, invitationID}, nil
			}),
		define(k, "remove_collaborator", "Remove Collaborator",
			"Removes a user's collaborator access to a repository (and any pending invitation).",
			schema.Object(collabProps, required...),
			schema.Object(schema.Props{"username": schema.String("The user."), "removed": schema.Boolean("Always true.")}, "username", "removed"),
			func(ctx context.Context, c *client, in *collaboratorInput) (any, error) {
				if err := c.RemoveCollaborator(ctx, in.Owner, in.Repo, in.Username); err != nil {
					return nil, err
				}
				return struct {
					Username string `json:"username"`
					Removed  bool   `json:"removed"`
				}{in.Username, true}, nil
			}),
	}
}
