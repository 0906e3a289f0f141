package deploy

import "github.com/triggerd/triggerd/connectors/schema"

// The JSON Schemas of the deploy steps' inputs and outputs.
var (
	createDeploymentInput = schema.Object(schema.Props{
		"project": schema.Text("The project to deploy: its name or id (prj_…). Its linked Git repository is deployed.").MaxLength(100),
		"branch":  schema.Text("Git branch (or tag) of the linked repository to deploy; default: the project's production branch.").MaxLength(255),
		"sha":     schema.String("Commit to deploy; default: the head of branch.").Pattern(`^[0-9a-f]{7,40}$`),
		"environment": schema.Enum("Where to deploy: preview (the default), production or staging, the targets Vercel deploys to. A custom environment is named in custom_environment instead. Development is not offered: Vercel's Development environment is the local one of vercel dev, which holds environment variables and takes no deployment.",
			EnvPreview, EnvProduction, EnvStaging).Default(EnvPreview),
		"custom_environment": schema.Text("A custom environment of the project to deploy to (its slug or id), instead of environment.").MaxLength(255),
		"name":               schema.Text("Deployment name; default: the project's name.").MaxLength(100),
		"meta":               schema.Map(schema.String("").MaxLength(65536), "Metadata to attach to the deployment (string values).").MaxProperties(100),
		"config": schema.AnyObject(`Custom configuration merged into the POST /v13/deployments body, e.g. {"projectSettings": {"buildCommand": "npm run build"}}. It may not set name, project, target, customEnvironmentSlugOrId, gitSource or meta; files or deploymentId here deploy a project without a Git link.`).
			With("propertyNames", schema.Schema{"not": schema.Schema{"enum": reservedConfig}}),
	}, "project").Title("Create Deployment input")

	listDeploymentsInput = schema.Object(schema.Props{
		"project": schema.Text("Only deployments of this project (name or id).").MaxLength(100),
		"environment": schema.Enum("Only deployments to this environment (Vercel's target filter): production, preview or staging. Development is not offered: no deployment is ever made to Vercel's Development environment, the local one of vercel dev.",
			EnvProduction, EnvPreview, EnvStaging),
		"state": schema.Array(schema.Enum("", "BUILDING", "ERROR", "INITIALIZING", "QUEUED", "READY", "CANCELED"),
			"Only deployments in one of these states.").Unique().MinItems(1),
		"branch": schema.Text("Only deployments of this Git branch.").MaxLength(255),
		"since":  timeBound("Only deployments created at or after this time: epoch milliseconds or an RFC 3339 time."),
		"until":  timeBound("Only deployments created before this time: epoch milliseconds or an RFC 3339 time. To continue a list, pass the previous output's next."),
		"limit": schema.Integer("How many deployments to return at most; pages are followed until this many are read.").
			Min(1).Max(1000).Default(20),
	}).Title("List Deployments input")

	cancelDeploymentInput = schema.Object(schema.Props{
		"id": schema.Text("The deployment id (dpl_…), as returned by Create Deployment or List Deployments.").MaxLength(255),
	}, "id").Title("Cancel Deployment input")

	deploymentOutput = schema.Ref("deployment").Title("Deployment").Defs(deploymentDefs)

	listDeploymentsOutput = schema.Object(schema.Props{
		"deployments": schema.Array(schema.Ref("deployment"), ""),
		"count":       schema.Integer("").Min(0),
		"next":        schema.Integer("Pass as until to continue the list; null at its end.").Nullable(),
	}, "deployments", "count", "next").Title("List Deployments output").Defs(deploymentDefs)

	// deploymentDefs defines the Deployment the outputs refer to.
	deploymentDefs = schema.Props{"deployment": schema.Object(schema.Props{
		"id":          schema.String("Deployment id (dpl_…)."),
		"name":        schema.String(""),
		"url":         schema.String("https://<deployment host>; null while Vercel has none.").Nullable(),
		"state":       schema.String("QUEUED, INITIALIZING, BUILDING, READY, ERROR or CANCELED (DELETED in lists)."),
		"target":      schema.String("production, preview, staging or the slug (else the id) of a custom environment."),
		"project_id":  schema.String(""),
		"created_at":  schema.DateTime(""),
		"ready_at":    schema.DateTime(""),
		"canceled_at": schema.DateTime(""),
		"creator": schema.Object(schema.Props{
			"id": schema.String(""), "username": schema.String(""),
		}, "id").Nullable(),
		"meta":          schema.Map(schema.String(""), ""),
		"branch":        schema.String(""),
		"commit_sha":    schema.String(""),
		"inspector_url": schema.String(""),
		"error_code":    schema.String(""),
		"error_message": schema.String(""),
	}, "id", "name", "url", "state", "target", "project_id", "created_at", "creator", "meta")}
)

// timeBound is a list bound: epoch milliseconds or an RFC 3339 time.
func timeBound(desc string) schema.Schema {
	return schema.DateTime(desc).Types("integer", "string").Min(0)
}
