package deploy

// The JSON documents the step schemas were written as before they moved to
// the schema package; TestSchemasMatchTheirOldDocuments proves the move
// changed nothing, and both go in the next commit.

// JSON Schemas (draft 2020-12) of the deploy steps' inputs and outputs.
const (
	oldCreateDeploymentInput = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Create Deployment input",
  "type": "object",
  "additionalProperties": false,
  "required": ["project"],
  "properties": {
    "project": {
      "type": "string", "minLength": 1, "maxLength": 100,
      "description": "The project to deploy: its name or id (prj_…). Its linked Git repository is deployed."
    },
    "branch": {
      "type": "string", "minLength": 1, "maxLength": 255,
      "description": "Git branch (or tag) of the linked repository to deploy; default: the project's production branch."
    },
    "sha": {
      "type": "string", "pattern": "^[0-9a-f]{7,40}$",
      "description": "Commit to deploy; default: the head of branch."
    },
    "environment": {
      "type": "string", "enum": ["production", "preview", "development"], "default": "preview",
      "description": "Where to deploy. production and preview (the default) are deployable; development is refused, as Vercel's Development environment is local (vercel dev)."
    },
    "name": {
      "type": "string", "minLength": 1, "maxLength": 100,
      "description": "Deployment name; default: the project's name."
    },
    "meta": {
      "type": "object", "maxProperties": 100,
      "additionalProperties": {"type": "string", "maxLength": 65536},
      "description": "Metadata to attach to the deployment (string values)."
    },
    "config": {
      "type": "object",
      "propertyNames": {"not": {"enum": ["name", "project", "target", "gitSource", "meta"]}},
      "description": "Custom configuration merged into the POST /v13/deployments body, e.g. {\"projectSettings\": {\"buildCommand\": \"npm run build\"}}. It may not set name, project, target, gitSource or meta; files or deploymentId here deploy a project without a Git link."
    }
  }
}`

	oldListDeploymentsInput = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "List Deployments input",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "project": {
      "type": "string", "minLength": 1, "maxLength": 100,
      "description": "Only deployments of this project (name or id)."
    },
    "environment": {
      "type": "string", "enum": ["production", "preview"],
      "description": "Only deployments to this environment (Vercel's target)."
    },
    "state": {
      "type": "array", "uniqueItems": true, "minItems": 1,
      "items": {"type": "string", "enum": ["BUILDING", "ERROR", "INITIALIZING", "QUEUED", "READY", "CANCELED"]},
      "description": "Only deployments in one of these states."
    },
    "branch": {
      "type": "string", "minLength": 1, "maxLength": 255,
      "description": "Only deployments of this Git branch."
    },
    "since": {
      "type": ["integer", "string"], "minimum": 0, "format": "date-time",
      "description": "Only deployments created at or after this time: epoch milliseconds or an RFC 3339 time."
    },
    "until": {
      "type": ["integer", "string"], "minimum": 0, "format": "date-time",
      "description": "Only deployments created before this time: epoch milliseconds or an RFC 3339 time. To continue a list, pass the previous output's next."
    },
    "limit": {
      "type": "integer", "minimum": 1, "maximum": 1000, "default": 20,
      "description": "How many deployments to return at most; pages are followed until this many are read."
    }
  }
}`

	oldCancelDeploymentInput = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Cancel Deployment input",
  "type": "object",
  "additionalProperties": false,
  "required": ["id"],
  "properties": {
    "id": {
      "type": "string", "minLength": 1, "maxLength": 255,
      "description": "The deployment id (dpl_…), as returned by Create Deployment or List Deployments."
    }
  }
}`

	oldDeploymentDef = `{
      "type": "object",
      "additionalProperties": false,
      "required": ["id", "name", "url", "state", "target", "project_id", "created_at", "creator", "meta"],
      "properties": {
        "id": {"type": "string", "description": "Deployment id (dpl_…)."},
        "name": {"type": "string"},
        "url": {"type": ["string", "null"], "description": "https://<deployment host>; null while Vercel has none."},
        "state": {"type": "string", "description": "QUEUED, INITIALIZING, BUILDING, READY, ERROR or CANCELED (DELETED in lists)."},
        "target": {"type": "string", "description": "production, preview or a custom environment."},
        "project_id": {"type": "string"},
        "created_at": {"type": "string", "format": "date-time"},
        "ready_at": {"type": "string", "format": "date-time"},
        "canceled_at": {"type": "string", "format": "date-time"},
        "creator": {
          "type": ["object", "null"],
          "additionalProperties": false,
          "required": ["id"],
          "properties": {"id": {"type": "string"}, "username": {"type": "string"}}
        },
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "branch": {"type": "string"},
        "commit_sha": {"type": "string"},
        "inspector_url": {"type": "string"},
        "error_code": {"type": "string"},
        "error_message": {"type": "string"}
      }
    }`

	oldDeploymentOutput = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Deployment",
  "$ref": "#/$defs/deployment",
  "$defs": {"deployment": ` + oldDeploymentDef + `}
}`

	oldListDeploymentsOutput = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "List Deployments output",
  "type": "object",
  "additionalProperties": false,
  "required": ["deployments", "count", "next"],
  "properties": {
    "deployments": {"type": "array", "items": {"$ref": "#/$defs/deployment"}},
    "count": {"type": "integer", "minimum": 0},
    "next": {"type": ["integer", "null"], "description": "Pass as until to continue the list; null at its end."}
  },
  "$defs": {"deployment": ` + oldDeploymentDef + `}
}`
)
