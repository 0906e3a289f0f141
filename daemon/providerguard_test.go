package daemon

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/internal/netguard"
	"github.com/triggerd/triggerd/sandbox"
	"github.com/triggerd/triggerd/store/boltstore"
)

// TestProviderRequestsGoThroughTheDialGuard wires the providers, the
// accounts service and the step runner as triggerd does, against the
// sandbox's fakes on loopback (reliability case 27): without
// --allow-private-provider-urls every kind of request to a provider (a
// tool step, an account's client, a token refresh and revocation) is
// refused at dial time with an error naming the setting; with it, each
// reaches the fake.
func TestProviderRequestsGoThroughTheDialGuard(t *testing.T) {
	sb := sandbox.Start()
	defer sb.Close()
	const tenant = "t-guard"
	for _, allow := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p := ProviderConfig{CodeHostMediaType: "application/vnd.codehost+json"}
		lookup := pointAtSandbox(sb, &p, func(string) (string, bool) { return "", false })
		if !p.AllowPrivateURLs {
			t.Fatal("the sandbox did not allow private provider addresses: its fakes listen on loopback")
		}
		p.AllowPrivateURLs = allow
		tr := p.transport()
		providers, _, err := buildProviders(p, tr, "http://127.0.0.1:8080", lookup)
		if err != nil {
			t.Fatal(err)
		}
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		key := make([]byte, 32)
		rand.Read(key)
		vault, err := accounts.NewVault(key)
		if err != nil {
			t.Fatal(err)
		}
		acct, err := accounts.New(accounts.Options{Store: st, Vault: vault, Providers: providers, Transport: tr})
		if err != nil {
			t.Fatal(err)
		}
		accs, err := sb.Adopt(ctx, acct, tenant, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, a := range accs {
			ids[a.Connector] = a.ID
		}
		runner, err := newStepRunner(p, tr, acct, st, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		// check wants err to be the guard's refusal, naming the setting,
		// when guarded, and no refusal otherwise.
		check := func(what string, err error) {
			t.Helper()
			refused := err != nil && strings.Contains(err.Error(), netguard.ErrForbiddenAddress.Error())
			switch {
			case !allow && (!refused || !strings.Contains(err.Error(), "--allow-private-provider-urls")):
				t.Errorf("%s, guarded: %v; want the dial guard's refusal naming --allow-private-provider-urls", what, err)
			case allow && refused:
				t.Errorf("%s, allowed: %v", what, err)
			}
		}
		for _, s := range []struct{ step, connector, input string }{
			{"codehost.get_repository_info", "codehost", `{"owner":"octocat","repo":"hello-world"}`},
			{"deploy.list_deployments", "deploy", `{}`},
			{"analytics.list_account_summaries", "analytics", `{}`},
			{"deploy.api_call", "deploy", `{"method":"GET","path":"/v6/deployments"}`},
		} {
			_, err := runner.Run(ctx, tenant, s.step, ids[s.connector], json.RawMessage(s.input))
			check("step "+s.step, err)
			if allow && err != nil {
				t.Errorf("step %s, allowed: %v", s.step, err)
			}
		}
		hc, _, err := acct.Client(ctx, tenant, ids["codehost"])
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, sb.CodeHostURL+"/user", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		check("an account's client", err)
		if !allow && !errors.Is(err, netguard.ErrForbiddenAddress) {
			t.Errorf("an account's client: %v does not match netguard.ErrForbiddenAddress", err)
		}
		for name, prov := range providers {
			if tok := (&oauth2.Token{AccessToken: "a", RefreshToken: "r", Expiry: time.Now().Add(-time.Hour)}); prov.CanRefresh(tok) {
				_, err := prov.Refresh(ctx, tok)
				check(name+" token refresh", err)
			}
			check(name+" revocation", prov.Revoke(ctx, &oauth2.Token{AccessToken: "a"}, map[string]string{"configuration_id": "icfg_1"}))
		}
	}
}
