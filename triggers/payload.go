package triggers

import (
	"errors"

	json "github.com/goccy/go-json"
)

// This file holds the purpose-built structs a payload is decoded into: only
// the fields the mapping reads. The decoder (goccy/go-json, a drop-in for
// encoding/json with the same validation and type-error behaviour, about
// ten times faster on webhook payloads) skips every other key, so a
// delivery is parsed and validated once, without building a generic map of
// the document.
// Optional objects are pointers (nil when absent or null); numeric ids are
// int64 and are written in decimal.

// ghPayload is the union of the code-hosting fields Map reads, for every
// event it maps. A given event carries only its own objects; the others stay
// nil.
type ghPayload struct {
	Action string `json:"action"`

	// create and push
	Ref     string `json:"ref"`
	RefType string `json:"ref_type"`
	// push
	Deleted bool       `json:"deleted"`
	After   string     `json:"after"`
	Compare string     `json:"compare"`
	Commits []ghCommit `json:"commits"`

	Repository   *ghRepo  `json:"repository"`
	Organization *ghLogin `json:"organization"`
	Sender       *ghLogin `json:"sender"`

	Forkee            *ghRepo         `json:"forkee"`
	Issue             *ghIssue        `json:"issue"`
	PullRequest       *ghIssue        `json:"pull_request"`
	Comment           *ghComment      `json:"comment"`
	Review            *ghComment      `json:"review"`
	Label             *ghLabel        `json:"label"`
	RequestedReviewer *ghLogin        `json:"requested_reviewer"`
	RequestedTeam     *ghTeam         `json:"requested_team"`
	WorkflowRun       *ghWorkflow     `json:"workflow_run"`
	WorkflowJob       *ghWorkflow     `json:"workflow_job"`
	Member            *ghMember       `json:"member"`
	Discussion        *ghIssue        `json:"discussion"`
	ProjectsV2Item    *ghProjectsItem `json:"projects_v2_item"`
	Changes           *ghChanges      `json:"changes"`
	ProjectCard       *ghProjectCard  `json:"project_card"`
	Release           *ghRelease      `json:"release"`
}

// ghLogin is any user or organisation object, of which only the login is
// read.
type ghLogin struct {
	Login string `json:"login"`
}

// ghMember is the collaborator of a member event.
type ghMember struct {
	ID      int64  `json:"id"`
	Login   string `json:"login"`
	HTMLURL string `json:"html_url"`
}

// ghRepo is a repository (also the new fork of a fork event).
type ghRepo struct {
	ID       int64    `json:"id"`
	Name     string   `json:"name"`
	FullName string   `json:"full_name"`
	HTMLURL  string   `json:"html_url"`
	Owner    *ghLogin `json:"owner"`
}

// ghLabel is an issue or pull request label.
type ghLabel struct {
	Name string `json:"name"`
}

// ghIssue is an issue, a pull request or a discussion: the three share the
// fields the mapping reads. Draft, Merged and Head are only set for pull
// requests.
type ghIssue struct {
	ID      int64     `json:"id"`
	Number  int64     `json:"number"`
	Title   string    `json:"title"`
	HTMLURL string    `json:"html_url"`
	State   string    `json:"state"`
	Body    string    `json:"body"`
	User    *ghLogin  `json:"user"`
	Labels  []ghLabel `json:"labels"`
	Draft   bool      `json:"draft"`
	Merged  bool      `json:"merged"`
	Head    *ghHead   `json:"head"`
}

// ghHead is the head branch of a pull request.
type ghHead struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

// ghComment is a comment (issue, review, commit or discussion comment) or a
// pull request review; State is only set for reviews.
type ghComment struct {
	ID       int64    `json:"id"`
	HTMLURL  string   `json:"html_url"`
	Body     string   `json:"body"`
	State    string   `json:"state"`
	CommitID string   `json:"commit_id"`
	User     *ghLogin `json:"user"`
}

// ghTeam is a team whose review was requested.
type ghTeam struct {
	Slug string `json:"slug"`
}

// ghCommit is one entry of a push's commits.
type ghCommit struct {
	ID       string `json:"id"`
	Message  string `json:"message"`
	URL      string `json:"url"`
	Distinct bool   `json:"distinct"`
	Author   struct {
		Name     string `json:"name"`
		Username string `json:"username"`
	} `json:"author"`
}

// ghWorkflow is a workflow run or a workflow job.
type ghWorkflow struct {
	ID           int64    `json:"id"`
	Name         string   `json:"name"`
	DisplayTitle string   `json:"display_title"`
	Status       string   `json:"status"`
	Conclusion   string   `json:"conclusion"`
	HTMLURL      string   `json:"html_url"`
	HeadBranch   string   `json:"head_branch"`
	HeadSHA      string   `json:"head_sha"`
	Actor        *ghLogin `json:"actor"`
}

// ghProjectsItem is a projects (v2) item.
type ghProjectsItem struct {
	ID          int64  `json:"id"`
	ContentType string `json:"content_type"`
}

// ghChanges is the "changes" object; only a projects (v2) item's field value
// change and whether an issue was transferred are read.
type ghChanges struct {
	FieldValue *ghFieldValue `json:"field_value"`
	// OldIssue is set on the "opened" delivery of an issue transferred
	// from another repository.
	OldIssue *struct{} `json:"old_issue"`
}

// ghFieldValue describes which field of a projects (v2) item changed. The
// older payload shape has only field_node_id and field_type; the newer one
// adds field_name and from/to, whose shape depends on the field type (an
// option object for single_select), so they stay raw until needed.
type ghFieldValue struct {
	FieldNodeID string          `json:"field_node_id"`
	FieldType   string          `json:"field_type"`
	FieldName   *string         `json:"field_name"`
	From        json.RawMessage `json:"from"`
	To          json.RawMessage `json:"to"`
}

// ghOption is a single-select option ({"id", "name", "color", ...}).
type ghOption struct {
	Name string `json:"name"`
}

// ghProjectCard is a classic project board card.
type ghProjectCard struct {
	ID       int64    `json:"id"`
	ColumnID int64    `json:"column_id"`
	Note     string   `json:"note"`
	Creator  *ghLogin `json:"creator"`
}

// ghRelease is a release.
type ghRelease struct {
	ID      int64    `json:"id"`
	TagName string   `json:"tag_name"`
	Name    string   `json:"name"`
	HTMLURL string   `json:"html_url"`
	Draft   bool     `json:"draft"`
	Author  *ghLogin `json:"author"`
}

// vEnvelope is the deployment platform's webhook envelope.
type vEnvelope struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// CreatedAt is in milliseconds since the epoch.
	CreatedAt int64     `json:"createdAt"`
	Payload   *vPayload `json:"payload"`
}

// vPayload is a deployment event's payload. The 2020 shape carries url, name
// and deploymentId at the top level; the documented one nests them under
// deployment. Both are read.
type vPayload struct {
	Team         *vID   `json:"team"`
	User         *vID   `json:"user"`
	Project      *vID   `json:"project"`
	ProjectID    string `json:"projectId"`
	Target       string `json:"target"`
	URL          string `json:"url"`
	Name         string `json:"name"`
	DeploymentID string `json:"deploymentId"`
	Links        *struct {
		Deployment string `json:"deployment"`
	} `json:"links"`
	Deployment *vDeployment `json:"deployment"`
}

// vID is an object of which only the string id is read.
type vID struct {
	ID string `json:"id"`
}

// vDeployment is the deployment object.
type vDeployment struct {
	ID   string `json:"id"`
	URL  string `json:"url"`
	Name string `json:"name"`
	Meta *vMeta `json:"meta"`
}

// vMeta is the Git metadata of a deployment.
type vMeta struct {
	GithubCommitSha     string `json:"githubCommitSha"`
	GithubCommitRef     string `json:"githubCommitRef"`
	GithubCommitMessage string `json:"githubCommitMessage"`
	GithubOrg           string `json:"githubOrg"`
	GithubRepo          string `json:"githubRepo"`
	GithubCommitOrg     string `json:"githubCommitOrg"`
	GithubCommitRepo    string `json:"githubCommitRepo"`
}

// decodeObject decodes a JSON object payload into v. Input that is not a
// single JSON object is a *PayloadError. A value of an unexpected JSON type
// inside the object (a string where an object was expected, a number too
// large for int64, ...) is not: encoding/json skips that value and goes on
// with the rest, and the mapping works with what it got. The skipped field
// keeps its zero value, except that a pointer to an object has already been
// allocated, so it reads as an empty object.
func decodeObject(data []byte, v any) error {
	i := 0
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	if i == len(data) {
		return &PayloadError{Reason: "empty body"}
	}
	if data[i] != '{' {
		return &PayloadError{Reason: "not a JSON object"}
	}
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return nil
	}
	return &PayloadError{Reason: err.Error()}
}
