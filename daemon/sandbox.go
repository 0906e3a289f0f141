package daemon

import "github.com/triggerd/triggerd/sandbox"

// pointAtSandbox aims every connector's URLs at the fakes and gives each a client
// id, so the accounts service can hold (and later remove) the sandbox's
// accounts. Sign-in is not faked: the accounts are adopted directly. The
// fakes listen on loopback, so the providers' dial guard lets private
// addresses through.
func pointAtSandbox(s *sandbox.Sandbox, p *ProviderConfig, lookup func(string) (string, bool)) func(string) (string, bool) {
	p.CodeHostClientID, p.CodeHostAuthBaseURL, p.CodeHostAPIBaseURL = "sandbox", s.CodeHostURL, s.CodeHostURL
	p.DeployClientID, p.DeployIntegrationSlug, p.DeployAuthBaseURL, p.DeployAPIBaseURL = "sandbox", "sandbox", s.DeployURL, s.DeployURL
	p.AnalyticsClientID = "sandbox"
	p.AnalyticsAuthURL, p.AnalyticsTokenURL, p.AnalyticsUserInfoURL = s.AnalyticsURL+"/auth", s.AnalyticsURL+"/token", s.AnalyticsURL+"/userinfo"
	p.AnalyticsAdminAPIURL, p.AnalyticsRevokeURL, p.AnalyticsDataAPIURL = s.AnalyticsURL, s.AnalyticsURL+"/revoke", s.AnalyticsURL
	p.AllowPrivateURLs = true
	return func(k string) (string, bool) {
		switch k {
		case "TRIGGERD_CODEHOST_CLIENT_SECRET", "TRIGGERD_DEPLOY_CLIENT_SECRET", "TRIGGERD_ANALYTICS_CLIENT_SECRET":
			return "sandbox", true
		}
		return lookup(k)
	}
}
