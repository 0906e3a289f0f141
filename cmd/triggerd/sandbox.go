package main

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/sandbox/fakedeploy"
	"github.com/triggerd/triggerd/store"
)

// sandbox runs the in-process fakes of the three providers, seeded with a
// repository, a linked project and an analytics property with 30 days of
// data, so every tool step can be tried offline.
type sandbox struct {
	gh *fakecodehost.Server
	vc *fakedeploy.Server
	ga *fakeanalytics.Server
	// urls of the fakes.
	github, vercel, analytics string
	gaAccount, gaProperty     string
}

// Sandbox tokens: the fakes accept any non-empty bearer token as their
// default user; these make the sandbox accounts recognisable.
const (
	sandboxCodeHostToken  = "sandbox-codehost-token"
	sandboxDeployToken    = "sandbox-deploy-token"
	sandboxAnalyticsToken = "sandbox-analytics-token"
)

func startSandbox() *sandbox {
	s := &sandbox{
		gh: fakecodehost.New(fakecodehost.Options{}),
		vc: fakedeploy.New(fakedeploy.Options{}),
		ga: fakeanalytics.New(fakeanalytics.Options{}),
	}
	s.github, s.vercel, s.analytics = s.gh.Start(), s.vc.Start(), s.ga.Start()
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

func (s *sandbox) close() {
	s.gh.Close()
	s.vc.Close()
	s.ga.Close()
}

// point aims every connector's URLs at the fakes and gives each a client
// id, so the accounts service can hold (and later remove) the sandbox's
// accounts. Sign-in is not faked: the accounts are adopted directly.
func (s *sandbox) point(p *providerConfig, lookup func(string) (string, bool)) func(string) (string, bool) {
	p.CodeHostClientID, p.CodeHostAuthBaseURL, p.CodeHostAPIBaseURL = "sandbox", s.github, s.github
	p.DeployClientID, p.DeployIntegrationSlug, p.DeployAuthBaseURL, p.DeployAPIBaseURL = "sandbox", "sandbox", s.vercel, s.vercel
	p.AnalyticsClientID = "sandbox"
	p.AnalyticsAuthURL, p.AnalyticsTokenURL, p.AnalyticsUserInfoURL = s.analytics+"/auth", s.analytics+"/token", s.analytics+"/userinfo"
	p.AnalyticsAdminAPIURL, p.AnalyticsRevokeURL, p.AnalyticsDataAPIURL = s.analytics, s.analytics+"/revoke", s.analytics
	return func(k string) (string, bool) {
		switch k {
		case "TRIGGERD_CODEHOST_CLIENT_SECRET", "TRIGGERD_DEPLOY_CLIENT_SECRET", "TRIGGERD_ANALYTICS_CLIENT_SECRET":
			return "sandbox", true
		}
		return lookup(k)
	}
}

// adopt makes one connected account per connector in tenantID (the same
// ones on every start) and logs their ids.
func (s *sandbox) adopt(ctx context.Context, acct *accounts.Service, tenantID string, log zerolog.Logger) ([]store.Account, error) {
	type seed struct {
		connector string
		who       connectors.Identity
		token     string
	}
	seeds := []seed{
		{"codehost", connectors.Identity{ExternalID: "1", Login: fakecodehost.SeedOwner, Scopes: []string{"repo", "workflow", "gist"}}, sandboxCodeHostToken},
		{"deploy", connectors.Identity{ExternalID: fakedeploy.DefaultTeamID, Login: "sandbox-team",
			Metadata: map[string]string{"team_id": fakedeploy.DefaultTeamID, "user_id": fakedeploy.DefaultUserID}}, sandboxDeployToken},
		{"analytics", connectors.Identity{ExternalID: "sandbox-analytics", Login: fakeanalytics.DefaultUser,
			Scopes:   []string{"https://www.googleapis.com/auth/analytics.readonly", "https://www.googleapis.com/auth/analytics.edit"},
			Metadata: map[string]string{"analytics_accounts": "accounts/" + s.gaAccount + "=Sandbox"}}, sandboxAnalyticsToken},
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
