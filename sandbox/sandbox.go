// Package sandbox runs triggerd offline (triggerd --sandbox): in-process
// fakes of the three providers (fakecodehost, fakedeploy, fakeanalytics),
// seeded with a repository, a linked project and an analytics property,
// and one connected account per connector, so every trigger and tool step
// can be tried with nothing real behind it.
package sandbox

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/sandbox/fakedeploy"
	"github.com/triggerd/triggerd/store"
)

// Sandbox runs the in-process fakes of the three providers, seeded with a
// repository, a linked project and an analytics property with 30 days of
// data, so every tool step can be tried offline.
type Sandbox struct {
	gh *fakecodehost.Server
	vc *fakedeploy.Server
	ga *fakeanalytics.Server
	// CodeHostURL, DeployURL and AnalyticsURL are where the fakes listen:
	// every base URL of their connector points there.
	CodeHostURL, DeployURL, AnalyticsURL string
	gaAccount, gaProperty                string
}

// Sandbox tokens: the fakes accept any non-empty bearer token as their
// default user; these make the sandbox accounts recognisable.
const (
	codeHostToken  = "sandbox-codehost-token"
	deployToken    = "sandbox-deploy-token"
	analyticsToken = "sandbox-analytics-token"
)

// Start starts the fakes on loopback ports; Close stops them.
func Start() *Sandbox {
	s := &Sandbox{
		gh: fakecodehost.New(fakecodehost.Options{}),
		vc: fakedeploy.New(fakedeploy.Options{}),
		ga: fakeanalytics.New(fakeanalytics.Options{}),
	}
	s.CodeHostURL, s.DeployURL, s.AnalyticsURL = s.gh.Start(), s.vc.Start(), s.ga.Start()
	s.vc.AddTeam(fakedeploy.Team{ID: fakedeploy.DefaultTeamID, Slug: "sandbox-team", Name: "Sandbox team"})
	s.vc.AddProject(fakedeploy.Project{Name: "web", OwnerID: fakedeploy.DefaultTeamID,
		Link: &fakedeploy.GitRepo{Org: fakecodehost.SeedOwner, Repo: fakecodehost.SeedRepo, RepoID: fakecodehost.SeedRepoID}})
	acc := s.ga.AddAccount(fakeanalytics.Account{DisplayName: "Sandbox"})
	prop := s.ga.AddProperty(fakeanalytics.Property{Account: acc.ID, DisplayName: "Sandbox site"})
	s.ga.Grant(fakeanalytics.DefaultUser, "accounts/"+acc.ID, fakeanalytics.RoleAdministrator)
	s.ga.SeedReportData(prop.ID, 30)
	s.ga.CollectEvent(prop.ID, "sign_up", 42)
	s.gaAccount, s.gaProperty = acc.ID, prop.ID
	return s
}

// Close stops the fakes.
func (s *Sandbox) Close() {
	s.gh.Close()
	s.vc.Close()
	s.ga.Close()
}

// Adopter connects an account without a sign-in (accounts.Service).
type Adopter interface {
	Adopt(ctx context.Context, tenantID, connector string, who connectors.Identity, tok *oauth2.Token) (store.Account, error)
}

// Adopt makes one connected account per connector in tenantID (the same
// ones on every start) and logs their ids.
func (s *Sandbox) Adopt(ctx context.Context, acct Adopter, tenantID string, log zerolog.Logger) ([]store.Account, error) {
	type seed struct {
		connector string
		who       connectors.Identity
		token     string
	}
	seeds := []seed{
		{"codehost", connectors.Identity{ExternalID: "1", Login: fakecodehost.SeedOwner, Scopes: []string{"repo", "workflow", "gist"}}, codeHostToken},
		{"deploy", connectors.Identity{ExternalID: fakedeploy.DefaultTeamID, Login: "sandbox-team",
			Metadata: map[string]string{"team_id": fakedeploy.DefaultTeamID, "user_id": fakedeploy.DefaultUserID}}, deployToken},
		{"analytics", connectors.Identity{ExternalID: "sandbox-analytics", Login: fakeanalytics.DefaultUser,
			Scopes:   []string{"https://www.googleapis.com/auth/analytics.readonly", "https://www.googleapis.com/auth/analytics.edit"},
			Metadata: map[string]string{"analytics_accounts": "accounts/" + s.gaAccount + "=Sandbox"}}, analyticsToken},
	}
	var out []store.Account
	for _, sd := range seeds {
		a, err := acct.Adopt(ctx, tenantID, sd.connector, sd.who, &oauth2.Token{AccessToken: sd.token, TokenType: "Bearer"})
		if err != nil {
			return nil, fmt.Errorf("sandbox: %s account: %w", sd.connector, err)
		}
		out = append(out, a)
		log.Info().Str("connector", sd.connector).Str("account_id", a.ID).Str("login", a.Login).Msg("sandbox account")
	}
	log.Info().Str("repository", fakecodehost.SeedOwner+"/"+fakecodehost.SeedRepo).Str("project", "web").
		Str("analytics_property", "properties/"+s.gaProperty).Msg("sandbox providers are running in-process; try: triggerctl steps list")
	return out, nil
}
