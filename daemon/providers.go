package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/analytics"
	"github.com/triggerd/triggerd/connectors/apicall"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/deploy"
	"github.com/triggerd/triggerd/internal/netguard"
	"github.com/triggerd/triggerd/steps"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/store/redisstore"
)

// ProviderConfig is the connect-flow configuration of the three
// connectors. Client secrets are read from the environment only
// (TRIGGERD_<CONNECTOR>_CLIENT_SECRET), never from flags.
type ProviderConfig struct {
	CodeHostClientID, CodeHostAuthBaseURL, CodeHostAPIBaseURL                                                              string
	DeployClientID, DeployIntegrationSlug, DeployAuthBaseURL, DeployAPIBaseURL                                             string
	AnalyticsClientID, AnalyticsAuthURL, AnalyticsTokenURL, AnalyticsUserInfoURL, AnalyticsAdminAPIURL, AnalyticsRevokeURL string
	// AnalyticsDataAPIURL and CodeHostMediaType configure the tool steps.
	AnalyticsDataAPIURL, CodeHostMediaType string
	// AllowPrivateURLs lets requests to the providers (sign-in, tokens,
	// API calls and hooks) connect to loopback, private and link-local
	// addresses (--allow-private-provider-urls); without it the dial guard
	// refuses them, so that no token or client secret is sent inside the
	// network. The sandbox turns it on: its fakes listen on loopback.
	AllowPrivateURLs bool
}

// providerAddrSetting names AllowPrivateURLs in the dial guard's errors.
const providerAddrSetting = "--allow-private-provider-urls (TRIGGERD_ALLOW_PRIVATE_PROVIDER_URLS)"

// transport returns the transport of every request to the providers, the
// one place their clients get it: guarded unless p.AllowPrivateURLs. Build
// it once and share it: it pools connections.
func (p ProviderConfig) transport() http.RoundTripper {
	return netguard.Transport(netguard.TransportOptions{AllowPrivate: p.AllowPrivateURLs, Setting: providerAddrSetting})
}

// providerClient is the connectors' default client (30 s timeout, no
// redirects followed) on transport t.
func providerClient(t http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     t,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// newStepRunner builds the tool step catalogue: each connector's toolkit
// and its API Call step, on the configured API base URLs.
// Its requests go through transport t (see ProviderConfig.transport).
func newStepRunner(p ProviderConfig, t http.RoundTripper, acct *accounts.Service, limits store.RateLimits, log zerolog.Logger) (*steps.Runner, error) {
	if err := p.checkURLs(); err != nil {
		return nil, err
	}
	gh, err := codehost.NewPolicy(codehost.ToolkitOptions{APIBaseURL: p.CodeHostAPIBaseURL, RateLimits: sharedRateLimits{limits}})
	if err != nil {
		return nil, fmt.Errorf("--codehost-api-base-url: %w", err)
	}
	return steps.New(steps.Options{
		Toolkits: []connectors.Toolkit{
			gh.Toolkit(),
			deploy.NewToolkit(deploy.ToolkitOptions{APIBaseURL: p.DeployAPIBaseURL}),
			analytics.NewToolkit(analytics.ToolkitOptions{DataBaseURL: p.AnalyticsDataAPIURL, AdminBaseURL: p.AnalyticsAdminAPIURL}),
		},
		Extra: []connectors.Step{
			apicall.CodeHost(apicall.CodeHostOptions{BaseURL: p.CodeHostAPIBaseURL, MediaType: p.CodeHostMediaType}),
			apicall.Deploy(apicall.DeployOptions{BaseURL: p.DeployAPIBaseURL}),
			apicall.Analytics(apicall.AnalyticsOptions{DataBaseURL: p.AnalyticsDataAPIURL, AdminBaseURL: p.AnalyticsAdminAPIURL}),
		},
		Accounts:  acct,
		Transport: t,
		OnCircuitChange: func(c steps.CircuitChange) {
			if c.Open {
				log.Warn().Str("account", c.AccountID).Int("failures", c.Failures).Str("last", c.Last).Time("until", c.Until).
					Msg("the provider keeps failing this account's requests; its steps are held back")
				return
			}
			log.Info().Str("account", c.AccountID).Msg("the provider answers this account again; its steps run")
		},
		// One line per step run, however it was asked for (the API, MCP,
		// an agent's pipeline).
		Audit: func(a steps.Audit) {
			log.Info().Str("component", "steps").Str("tenant", a.Tenant).Str("step", a.Step).Str("account", a.Account).
				Str("via", a.Caller).Str("result", a.Code).Dur("duration", a.Duration).Msg("step run")
		},
	})
}

// checkURLs refuses an API base URL that is not an absolute http(s) URL.
func (p ProviderConfig) checkURLs() error {
	for _, u := range []struct{ flag, v string }{
		{"--deploy-api-base-url", p.DeployAPIBaseURL},
		{"--analytics-data-api-base-url", p.AnalyticsDataAPIURL},
		{"--analytics-admin-api-base-url", p.AnalyticsAdminAPIURL},
	} {
		if pu, err := url.Parse(u.v); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return fmt.Errorf("%s %q: want an absolute http or https URL", u.flag, u.v)
		}
	}
	return nil
}

// buildProviders returns a provider for each connector whose client id is
// configured, and the names of those left unconfigured. Their requests go
// through transport t (see ProviderConfig.transport).
func buildProviders(p ProviderConfig, t http.RoundTripper, publicURL string, lookup func(string) (string, bool)) (map[string]connectors.Provider, []string, error) {
	redirect := func(c string) string { return strings.TrimRight(publicURL, "/") + "/v1/connect/" + c + "/callback" }
	secret := func(c, id string) (string, error) {
		env := "TRIGGERD_" + strings.ToUpper(c) + "_CLIENT_SECRET"
		v, _ := lookup(env)
		if v == "" {
			return "", fmt.Errorf("--%s-client-id is set but %s is empty: set the client secret from the provider's app settings", c, env)
		}
		return v, nil
	}
	out := map[string]connectors.Provider{}
	var off []string
	if p.CodeHostClientID == "" {
		off = append(off, "codehost")
	} else {
		s, err := secret("codehost", p.CodeHostClientID)
		if err != nil {
			return nil, nil, err
		}
		prov, err := codehost.New(codehost.Config{ClientID: p.CodeHostClientID, ClientSecret: s, RedirectURL: redirect("codehost"),
			AuthBaseURL: p.CodeHostAuthBaseURL, APIBaseURL: p.CodeHostAPIBaseURL, HTTPClient: providerClient(t)})
		if err != nil {
			return nil, nil, err
		}
		out["codehost"] = prov
	}
	if p.DeployClientID == "" {
		off = append(off, "deploy")
	} else {
		s, err := secret("deploy", p.DeployClientID)
		if err != nil {
			return nil, nil, err
		}
		prov, err := deploy.New(deploy.Config{ClientID: p.DeployClientID, ClientSecret: s, RedirectURL: redirect("deploy"),
			IntegrationSlug: p.DeployIntegrationSlug, AuthBaseURL: p.DeployAuthBaseURL, APIBaseURL: p.DeployAPIBaseURL, HTTPClient: providerClient(t)})
		if err != nil {
			return nil, nil, err
		}
		out["deploy"] = prov
	}
	if p.AnalyticsClientID == "" {
		off = append(off, "analytics")
	} else {
		s, err := secret("analytics", p.AnalyticsClientID)
		if err != nil {
			return nil, nil, err
		}
		prov, err := analytics.New(analytics.Config{ClientID: p.AnalyticsClientID, ClientSecret: s, RedirectURL: redirect("analytics"),
			AuthBaseURL: p.AnalyticsAuthURL, TokenURL: p.AnalyticsTokenURL, UserInfoURL: p.AnalyticsUserInfoURL,
			AdminAPIBaseURL: p.AnalyticsAdminAPIURL, RevokeURL: p.AnalyticsRevokeURL, HTTPClient: providerClient(t)})
		if err != nil {
			return nil, nil, err
		}
		out["analytics"] = prov
	}
	return out, off, nil
}

// openStore opens Redis when --redis-url is set, else the embedded file
// store under the data dir.
func openStore(ctx context.Context, cfg Config, log zerolog.Logger) (store.Store, error) {
	if cfg.RedisURL == "" {
		path := filepath.Join(cfg.DataDir, "triggerd.db")
		s, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			return nil, err
		}
		log.Info().Str("store", path).Msg("embedded store opened")
		return s, nil
	}
	s, err := redisstore.Open(ctx, cfg.RedisURL, redisstore.Options{Prefix: cfg.RedisPrefix, AllowVolatile: cfg.RedisAllowVolatile})
	if err != nil {
		return nil, err
	}
	if why := s.PolicyUnverified(); why != "" {
		log.Warn().Str("reason", why).Msg("could not verify Redis's maxmemory-policy; it must be noeviction, or tokens and flow states can be evicted")
	}
	if why := s.DurabilityUnverified(); why != "" {
		log.Warn().Str("reason", why).Msg("could not verify that Redis persists every write; it must have appendonly yes, or a restart of it can run tool steps again and disconnect every account")
	}
	if why := s.Volatile(); why != "" {
		log.Warn().Str("flag", "--redis-allow-volatile").Str("reason", why).
			Msg("!!! REDIS IS VOLATILE: a restart of it loses run records (tool steps of redelivered events can run again) and sealed tokens (every account must be connected again); " +
				"accepted only because of --redis-allow-volatile, for tests and throwaway setups !!!")
	}
	log.Info().Str("prefix", s.Prefix()).Msg("Redis store opened")
	return s, nil
}

// StepCatalog returns the tool steps a daemon configured with p serves, in
// catalogue order, without an account service: for the OpenAPI document's
// generated part (api.StepsDocument), which must list the same steps with
// the same schemas. Its steps are not to be run.
func StepCatalog(p ProviderConfig) ([]connectors.Step, error) {
	runner, err := newStepRunner(p, nil, (*accounts.Service)(nil), nil, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return runner.List(""), nil
}
