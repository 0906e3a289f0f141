package triggers

import (
	"fmt"
	"strings"
	"time"
)

// This file maps deployment-platform deliveries (Vercel's webhook format).

// deployType is what one deployment event type maps to: its kind, and the
// state of the deployment it reports.
type deployType struct {
	kind  Kind
	state string
}

// deployTypes maps a deployment event type to its kind; a type it does not
// hold maps to no kind.
var deployTypes = map[string]deployType{
	"deployment.created":   {DeploymentStarted, "building"},
	"deployment.succeeded": {DeploymentCompleted, "ready"},
	"deployment.ready":     {DeploymentCompleted, "ready"},
	"deployment.error":     {DeploymentFailed, "error"},
	"deployment.canceled":  {DeploymentCanceled, "canceled"},
}

// mapDeploy maps a deployment-platform delivery; see Map for the rules.
func mapDeploy(d Delivery) (Result, error) {
	var env vEnvelope
	if err := decodeObject(d.Payload, &env); err != nil {
		return Result{}, err
	}
	if env.ID == "" {
		return Result{SourceEvent: env.Type}, &PayloadError{Reason: `deployment envelope lacks a string "id"`}
	}
	if env.Type == "" {
		return Result{DeliveryID: env.ID}, &PayloadError{Reason: `deployment envelope lacks a string "type"`}
	}
	e := emitter{
		res:      Result{DeliveryID: env.ID, SourceEvent: env.Type, CreatedAt: createdAt(env.CreatedAt)},
		conn:     Deploy,
		received: d.ReceivedAt,
		payload:  d.Payload,
		scope:    d.Scope,
	}
	t, ok := deployTypes[env.Type]
	if !ok {
		return e.done(fmt.Sprintf("type %q maps to no trigger kind", env.Type))
	}
	p := env.Payload
	if p == nil {
		return e.res, &PayloadError{Reason: fmt.Sprintf("type %q lacks %q", env.Type, "payload")}
	}
	e.account, e.sender = deployAccount(p)
	e.repo = deployRepository(p.Deployment)
	e.emit(t.kind, deployResource(p, t.state))
	return e.res, nil
}

// createdAt is an envelope's createdAt (ms since the epoch) as a time;
// zero when absent or not positive.
func createdAt(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// deployAccount returns the account a deployment belongs to (its team, or
// else its user) and its sender (the user).
func deployAccount(p *vPayload) (account, sender string) {
	if p.User != nil {
		account, sender = p.User.ID, p.User.ID
	}
	if p.Team != nil && p.Team.ID != "" {
		account = p.Team.ID
	}
	return account, sender
}

// deployResource describes the deployment of p, in state state. The
// documented payload shape (under "deployment") wins over the 2020 one
// (top-level url, name and deploymentId).
func deployResource(p *vPayload, state string) Resource {
	r := Resource{Type: "deployment", ID: p.DeploymentID, DeploymentURL: p.URL, ProjectName: p.Name,
		Target: p.Target, Project: p.ProjectID, State: state}
	if r.Target == "" {
		r.Target = PreviewTarget
	}
	if p.Project != nil && p.Project.ID != "" {
		r.Project = p.Project.ID
	}
	if p.Links != nil {
		r.URL = p.Links.Deployment
	}
	if dp := p.Deployment; dp != nil {
		r.ID = nonEmpty(dp.ID, r.ID)
		r.DeploymentURL = nonEmpty(dp.URL, r.DeploymentURL)
		r.ProjectName = nonEmpty(dp.Name, r.ProjectName)
		if m := dp.Meta; m != nil {
			r.SHA, r.Ref, r.Title = m.GithubCommitSha, m.GithubCommitRef, m.GithubCommitMessage
		}
	}
	if r.DeploymentURL != "" && !strings.Contains(r.DeploymentURL, "://") {
		// Vercel sends the host name alone ("app-abc123.vercel.app").
		r.DeploymentURL = "https://" + r.DeploymentURL
	}
	return r
}

// deployRepository returns the repository a deployment was built from, as
// its Git metadata names it; nil when it names none.
func deployRepository(dp *vDeployment) *Repository {
	if dp == nil || dp.Meta == nil {
		return nil
	}
	m := dp.Meta
	owner, name := m.GithubOrg, m.GithubRepo
	if owner == "" || name == "" {
		owner, name = m.GithubCommitOrg, m.GithubCommitRepo
	}
	if owner == "" || name == "" {
		return nil
	}
	return &Repository{Owner: owner, Name: name, FullName: owner + "/" + name}
}

// nonEmpty returns s, or def when s is empty.
func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
