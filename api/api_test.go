package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/api/apitest"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakeoauth"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/store/redisstore"
	"github.com/triggerd/triggerd/store/storetest"
	"github.com/triggerd/triggerd/tenants"
)

// adminKey and newAdminKey are the admin keys during a rotation, as
// TRIGGERD_ADMIN_KEY="admin-key-for-tests,new-admin-key-for-tests" gives
// them: both are accepted.
const (
	adminKey    = "admin-key-for-tests"
	newAdminKey = "new-admin-key-for-tests"
)

// env is one triggerd management API over real components: a store
// backend, the accounts service with the three real providers pointed at
// fake authorization servers, and tenants.
type env struct {
	t        *testing.T
	store    store.Store
	accounts *accounts.Service
	tenants  *tenants.Service
	e        *echo.Echo
	gh       *fakeoauth.GitHub
	vc       *fakeoauth.Vercel
	gg       *fakeoauth.Google
	logs     *testenv.Buffer
	// check checks every exchange against the OpenAPI document.
	check *apitest.Checker
}

type backend struct {
	name string
	open func(t *testing.T) store.Store
	// files returns every stored byte, to search for secrets in clear.
	files func(t *testing.T, s store.Store) []byte
}

func backends() []backend {
	return []backend{
		{
			name: "bolt",
			open: func(t *testing.T) store.Store {
				s, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			files: func(t *testing.T, s store.Store) []byte {
				b, err := os.ReadFile(s.(*boltstore.Store).Path())
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
		},
		{
			name: "redis",
			open: func(t *testing.T) store.Store {
				s, err := redisstore.Open(context.Background(), storetest.RedisURL(t), redisstore.Options{Prefix: storetest.Prefix(t), AllowVolatile: true})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			files: func(t *testing.T, s store.Store) []byte {
				opt, _ := redis.ParseURL(storetest.RedisURL(t))
				c := redis.NewClient(opt)
				defer c.Close()
				ctx := context.Background()
				var all []byte
				iter := c.Scan(ctx, 0, s.(*redisstore.Store).Prefix()+"*", 100).Iterator()
				for iter.Next(ctx) {
					dump, err := c.Dump(ctx, iter.Val()).Result()
					if err == nil {
						all = append(all, dump...)
					}
				}
				return all
			},
		},
	}
}

// newBoltEnv returns an env on a fresh bolt store, and the API key of its
// tenant "acme".
func newBoltEnv(t *testing.T) (*env, string) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v := newEnv(t, st)
	_, key := v.tenant("acme")
	return v, key
}

func newEnv(t *testing.T, st store.Store) *env {
	t.Helper()
	v := &env{t: t, store: st, gh: fakeoauth.NewGitHub(t), vc: fakeoauth.NewVercel(t), gg: fakeoauth.NewGoogle(t), logs: &testenv.Buffer{}, check: apitest.New(t)}
	log := zerolog.New(v.logs)
	public := "https://triggerd.example.test"
	providers := map[string]connectors.Provider{
		"codehost":  v.gh.Provider(public + "/v1/connect/codehost/callback"),
		"deploy":    v.vc.Provider(public + "/v1/connect/deploy/callback"),
		"analytics": v.gg.Provider(public + "/v1/connect/analytics/callback"),
	}
	vault, err := accounts.NewVault(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	v.accounts, err = accounts.New(accounts.Options{Store: st, Vault: vault, Providers: providers, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	v.tenants = tenants.New(st, nil)
	a, err := api.New(api.Options{Accounts: v.accounts, Auth: v.tenants, Tenants: v.tenants, AdminKeys: []string{adminKey, newAdminKey}, Logger: log,
		ReturnOrigins: []string{public, "https://app.example.test"}, ReturnOriginsSetting: "--connect-return-origins"})
	if err != nil {
		t.Fatal(err)
	}
	v.e = echo.New()
	a.Register(v.e)
	return v
}

// do is send without a body.
func (v *env) do(method, path, key string) (int, map[string]any) {
	v.t.Helper()
	code, body, _ := v.send(method, path, key, "")
	return code, body
}

func (v *env) tenant(name string) (string, string) {
	v.t.Helper()
	ten, key, err := v.tenants.Create(context.Background(), name)
	if err != nil {
		v.t.Fatal(err)
	}
	return ten.ID, key
}

func (v *env) fake(connector string) *fakeoauth.Fake {
	switch connector {
	case "codehost":
		return v.gh.Fake
	case "deploy":
		return v.vc.Fake
	}
	return v.gg.Fake
}

// startFlow asks the API for the authorize URL and signs in at the fake
// provider, returning the callback query the provider redirects to.
func (v *env) startFlow(connector, key string) string {
	v.t.Helper()
	code, body := v.do(http.MethodGet, "/v1/connect/"+connector+"/start", key)
	if code != http.StatusOK {
		v.t.Fatalf("start %s: %d %v", connector, code, body)
	}
	cb, err := v.fake(connector).SignIn(context.Background(), body["authorize_url"].(string))
	if err != nil {
		v.t.Fatalf("sign in at the fake %s: %v", connector, err)
	}
	return cb.Encode()
}

func (v *env) connect(connector, key string) map[string]any {
	v.t.Helper()
	query := v.startFlow(connector, key)
	code, body := v.do(http.MethodGet, "/v1/connect/"+connector+"/callback?"+query, "")
	if code != http.StatusOK {
		v.t.Fatalf("callback %s: %d %v", connector, code, body)
	}
	return body["account"].(map[string]any)
}

func TestConnectedAccounts(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			defer st.Close()
			v := newEnv(t, st)
			tenantA, keyA := v.tenant("acme")
			_, keyB := v.tenant("globex")

			t.Run("connect all three", func(t *testing.T) {
				gh := v.connect("codehost", keyA)
				if gh["login"] != "octocat" || gh["external_id"] != "583231" || gh["status"] != "active" {
					t.Fatalf("codehost account %v", gh)
				}
				dp := v.connect("deploy", keyA)
				if dp["status"] != "active" || dp["login"] == "" {
					t.Fatalf("deploy account %v", dp)
				}
				an := v.connect("analytics", keyA)
				md, _ := an["metadata"].(map[string]any)
				if an["status"] != "active" || md["analytics_accounts"] == "" || md["analytics_accounts"] == nil {
					t.Fatalf("analytics account %v, want the visible analytics accounts in metadata", an)
				}
				code, body := v.do(http.MethodGet, "/v1/accounts", keyA)
				if code != 200 || len(body["accounts"].([]any)) != 3 {
					t.Fatalf("list: %d %v", code, body)
				}
				for _, raw := range body["accounts"].([]any) {
					for k := range raw.(map[string]any) {
						if strings.Contains(k, "token") {
							t.Fatalf("an account answer has the field %q", k)
						}
					}
				}
			})

			t.Run("reconnect updates the same account", func(t *testing.T) {
				before := v.connect("codehost", keyA)
				again := v.connect("codehost", keyA)
				if before["id"] != again["id"] {
					t.Fatalf("reconnecting made a second account: %v then %v", before["id"], again["id"])
				}
				_, body := v.do(http.MethodGet, "/v1/accounts", keyA)
				n := 0
				for _, raw := range body["accounts"].([]any) {
					if raw.(map[string]any)["connector"] == "codehost" {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("%d codehost accounts after reconnecting, want 1", n)
				}
			})

			t.Run("tenant isolation", func(t *testing.T) {
				acc := v.connect("deploy", keyA)
				if code, _ := v.do(http.MethodGet, "/v1/accounts/"+acc["id"].(string), keyB); code != http.StatusNotFound {
					t.Fatalf("another tenant read the account: %d", code)
				}
				if code, _ := v.do(http.MethodDelete, "/v1/accounts/"+acc["id"].(string), keyB); code != http.StatusNotFound {
					t.Fatalf("another tenant removed the account: %d", code)
				}
				_, body := v.do(http.MethodGet, "/v1/accounts", keyB)
				if len(body["accounts"].([]any)) != 0 {
					t.Fatalf("tenant B sees %v", body["accounts"])
				}
			})

			t.Run("state abuse never reaches the token endpoint", func(t *testing.T) {
				query := v.startFlow("codehost", keyA)
				exchanges := v.gh.Exchanges() + v.vc.Exchanges()
				for name, path := range map[string]string{
					"no state":          "/v1/connect/codehost/callback?code=abc",
					"unknown state":     "/v1/connect/codehost/callback?code=abc&state=forged",
					"foreign connector": "/v1/connect/deploy/callback?" + query,
				} {
					if code, body := v.do(http.MethodGet, path, ""); code != http.StatusBadRequest {
						t.Fatalf("%s: %d %v, want 400", name, code, body)
					}
				}
				if got := v.gh.Exchanges() + v.vc.Exchanges(); got != exchanges {
					t.Fatalf("refused callbacks made %d token exchanges", got-exchanges)
				}
				// The foreign-connector attempt used the state up, so the
				// genuine callback is refused too: states are single-use.
				if code, _ := v.do(http.MethodGet, "/v1/connect/codehost/callback?"+query, ""); code != http.StatusBadRequest {
					t.Fatalf("a state taken by a refused callback was accepted again: %d", code)
				}
				query = v.startFlow("codehost", keyA)
				if code, _ := v.do(http.MethodGet, "/v1/connect/codehost/callback?"+query, ""); code != http.StatusOK {
					t.Fatalf("genuine callback: %d", code)
				}
				exchanges = v.gh.Exchanges()
				if code, _ := v.do(http.MethodGet, "/v1/connect/codehost/callback?"+query, ""); code != http.StatusBadRequest {
					t.Fatalf("replayed callback: %d, want 400", code)
				}
				if v.gh.Exchanges() != exchanges {
					t.Fatal("a replayed callback reached the token endpoint")
				}
			})

			t.Run("authentication", func(t *testing.T) {
				if code, _ := v.do(http.MethodGet, "/v1/accounts", ""); code != http.StatusUnauthorized {
					t.Fatalf("no key: %d", code)
				}
				if code, _ := v.do(http.MethodGet, "/v1/accounts", "tdk_"+strings.Repeat("A", 43)); code != http.StatusUnauthorized {
					t.Fatalf("unknown key: %d", code)
				}
				if code, _ := v.do(http.MethodGet, "/v1/connect/codehost/start", ""); code != http.StatusUnauthorized {
					t.Fatalf("start without a key: %d", code)
				}
			})

			t.Run("refresh, rotation and invalid_grant", func(t *testing.T) {
				ctx := context.Background()
				v.gh.SetAccessTTL(10 * time.Second) // inside the refresh skew
				acc := v.connect("codehost", keyA)
				id := acc["id"].(string)
				v.gh.SetAccessTTL(8 * time.Hour)
				refreshes := v.gh.Refreshes()
				var wg sync.WaitGroup
				tokens := make([]string, 20)
				for i := range tokens {
					wg.Go(func() {
						tok, _, err := v.accounts.Token(ctx, tenantA, id)
						if err != nil {
							t.Error(err)
							return
						}
						tokens[i] = tok.AccessToken
					})
				}
				wg.Wait()
				if got := v.gh.Refreshes() - refreshes; got != 1 {
					t.Fatalf("20 concurrent uses made %d refreshes, want 1", got)
				}
				for _, tok := range tokens {
					if tok != tokens[0] || !v.gh.Live(tok) {
						t.Fatalf("callers got different or dead tokens")
					}
				}
				// The rotated refresh token was stored: the next refresh works.
				v.gh.SetAccessTTL(10 * time.Second)
				v.connect("codehost", keyA)
				v.gh.SetAccessTTL(8 * time.Hour)
				if _, _, err := v.accounts.Token(ctx, tenantA, id); err != nil {
					t.Fatalf("refresh after reconnect: %v", err)
				}

				v.gh.SetAccessTTL(10 * time.Second)
				v.connect("codehost", keyA)
				v.gh.RefuseRefresh(true)
				defer v.gh.RefuseRefresh(false)
				if _, _, err := v.accounts.Token(ctx, tenantA, id); !errors.Is(err, accounts.ErrNeedsReauth) {
					t.Fatalf("refused refresh: %v, want ErrNeedsReauth", err)
				}
				refreshes = v.gh.Refreshes()
				for range 5 {
					v.accounts.Token(ctx, tenantA, id)
				}
				if v.gh.Refreshes() != refreshes {
					t.Fatal("an account needing reauth kept calling the provider")
				}
				_, body := v.do(http.MethodGet, "/v1/accounts/"+id, keyA)
				if body["status"] != "needs_reauth" || body["status_reason"] == "" {
					t.Fatalf("account after invalid_grant: %v", body)
				}
				v.gh.SetAccessTTL(8 * time.Hour)
				if again := v.connect("codehost", keyA); again["status"] != "active" {
					t.Fatalf("reconnecting did not reactivate: %v", again)
				}
			})

			t.Run("removal revokes, and works with the provider down", func(t *testing.T) {
				ctx := context.Background()
				acc := v.connect("analytics", keyA)
				id := acc["id"].(string)
				tok, _, err := v.accounts.Token(ctx, tenantA, id)
				if err != nil {
					t.Fatal(err)
				}
				code, body := v.do(http.MethodDelete, "/v1/accounts/"+id, keyA)
				if code != 200 || body["revoked"] != true {
					t.Fatalf("remove: %d %v", code, body)
				}
				if v.gg.Live(tok.AccessToken) {
					t.Fatal("the provider still honours the removed account's token")
				}
				_, body = v.do(http.MethodGet, "/v1/accounts/"+id, keyA)
				if body["status"] != "removed" || body["removed_at"] == nil {
					t.Fatalf("removed account reads %v", body)
				}
				if _, _, err := v.accounts.Client(ctx, tenantA, id); !errors.Is(err, accounts.ErrAccountRemoved) || !strings.Contains(err.Error(), "reconnect") {
					t.Fatalf("using a removed account: %v, want ErrAccountRemoved saying to reconnect", err)
				}

				dep := v.connect("deploy", keyA)
				v.vc.FailNext(fakeoauth.RouteVercelConfiguration, 1, http.StatusServiceUnavailable)
				code, body = v.do(http.MethodDelete, "/v1/accounts/"+dep["id"].(string), keyA)
				if code != 200 || body["revoked"] != false || body["revoke_error"] == "" {
					t.Fatalf("remove with the provider down: %d %v, want revoked false and the reason", code, body)
				}
				stored, err := v.store.GetAccount(ctx, tenantA, dep["id"].(string))
				if err != nil || stored.SealedToken != nil || stored.Status != store.StatusRemoved {
					t.Fatalf("credentials kept after a failed revocation: %+v %v", stored, err)
				}
			})

			t.Run("tenant creation needs the admin key", func(t *testing.T) {
				req := func(key string) int {
					r := httptest.NewRequest(http.MethodPost, "/v1/tenants", strings.NewReader(`{"name":"initech"}`))
					r.Header.Set("Content-Type", "application/json")
					if key != "" {
						r.Header.Set("Authorization", "Bearer "+key)
					}
					rec := v.check.Serve(v.e, r)
					if rec.Code == http.StatusCreated && rec.Header().Get("Cache-Control") != "no-store" {
						t.Errorf("the answer holding the new tenant's key has Cache-Control %q, want no-store", rec.Header().Get("Cache-Control"))
					}
					return rec.Code
				}
				if code := req(keyA); code != http.StatusUnauthorized {
					t.Fatalf("a tenant key created a tenant: %d", code)
				}
				if code := req(adminKey); code != http.StatusCreated {
					t.Fatalf("admin key: %d", code)
				}
				// During a rotation of the admin key, the second key
				// works as well as the first; others still do not.
				if code := req(newAdminKey); code != http.StatusCreated {
					t.Fatalf("the second admin key: %d", code)
				}
				for _, k := range []string{"", adminKey + "," + newAdminKey, adminKey[:len(adminKey)-1], "another-key"} {
					if code := req(k); code != http.StatusUnauthorized {
						t.Fatalf("admin key %q: %d, want 401", k, code)
					}
				}
			})

			t.Run("no token in clear in the store or the logs", func(t *testing.T) {
				stored := b.files(t, st)
				logs := v.logs.String()
				var values []string
				for _, f := range []*fakeoauth.Fake{v.gh.Fake, v.vc.Fake, v.gg.Fake} {
					for tok := range f.Tokens() {
						values = append(values, tok)
					}
				}
				values = append(values, v.gh.ClientSecret)
				if len(values) < 10 {
					t.Fatalf("only %d token values to look for; the test would prove little", len(values))
				}
				for _, val := range values {
					if bytes.Contains(stored, []byte(val)) {
						t.Fatalf("a token or secret is in the %s store in clear", b.name)
					}
					if strings.Contains(logs, val) {
						t.Fatal("a token or secret is in the logs")
					}
				}
				if len(stored) == 0 {
					t.Fatal("read no stored bytes; the check proved nothing")
				}
			})
		})
	}
}

// TestRefreshOnceAcrossProcesses runs two accounts services (two triggerd
// processes) on one Redis: concurrent uses of an expiring token cause one
// refresh in all.
func TestRefreshOnceAcrossProcesses(t *testing.T) {
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	open := func() store.Store {
		s, err := redisstore.Open(context.Background(), url, redisstore.Options{Prefix: prefix, AllowVolatile: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	one := newEnv(t, open())
	tenantID, key := one.tenant("acme")
	// The second process shares the first's fake provider and store data.
	two := *one
	twoStore := open()
	vault, _ := accounts.NewVault(bytes.Repeat([]byte{7}, 32))
	var err error
	two.accounts, err = accounts.New(accounts.Options{Store: twoStore, Vault: vault,
		Providers: map[string]connectors.Provider{"codehost": one.gh.Provider("https://triggerd.example.test/v1/connect/codehost/callback")},
		Logger:    zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	one.gh.SetAccessTTL(10 * time.Second)
	id := one.connect("codehost", key)["id"].(string)
	one.gh.SetAccessTTL(8 * time.Hour)
	before := one.gh.Refreshes()
	var wg sync.WaitGroup
	for i := range 20 {
		svc := one.accounts
		if i%2 == 1 {
			svc = two.accounts
		}
		wg.Go(func() {
			if _, _, err := svc.Token(context.Background(), tenantID, id); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := one.gh.Refreshes() - before; got != 1 {
		t.Fatalf("two processes made %d refreshes, want 1", got)
	}
}

func TestConnectFlowEdges(t *testing.T) {
	v, key := newBoltEnv(t)
	get := func(path, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		return v.check.Serve(v.e, req)
	}
	if rec := get("/v1/connect/nope/start", key); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "nope") {
		t.Fatalf("unknown connector: %d %s", rec.Code, rec.Body)
	}
	if rec := get("/v1/connect/codehost/start?return_to=javascript:alert(1)", key); rec.Code != http.StatusBadRequest {
		t.Fatalf("bad return_to: %d", rec.Code)
	}
	// The callback redirects only to origins the operator named: a flow
	// started by anyone with a tenant key must not make triggerd's own
	// address a redirector to any site.
	for _, c := range []struct{ returnTo, want string }{
		{"https://evil.example.test/done", "return_to's origin https://evil.example.test is not one this server sends users back to; the operator can add it to --connect-return-origins"},
		{"http://app.example.test/done", "origin http://app.example.test is not"},
		{"https://app.example.test:8443/done", "origin https://app.example.test:8443 is not"},
		{"https://app.example.test@evil.example.test/", "must not carry a user name"},
		{"https://app.example.test.evil.example.test/", "origin https://app.example.test.evil.example.test is not"},
	} {
		rec := get("/v1/connect/codehost/start?return_to="+url.QueryEscape(c.returnTo), key)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("return_to %s: %d %s, want 400 saying %q", c.returnTo, rec.Code, rec.Body, c.want)
		}
	}
	if rec := get("/v1/connect/codehost/start?return_to="+url.QueryEscape("HTTPS://App.Example.Test/done?x=1"), key); rec.Code != http.StatusOK {
		t.Errorf("return_to at a listed origin, spelled in capitals: %d %s, want 200", rec.Code, rec.Body)
	}
	if rec := get("/v1/connect/codehost/start?return_to="+url.QueryEscape("https://triggerd.example.test/ui/done"), key); rec.Code != http.StatusOK {
		t.Errorf("return_to at the public URL's origin: %d %s, want 200", rec.Code, rec.Body)
	}
	rec := get("/v1/connect/codehost/start?redirect=true&return_to="+url.QueryEscape("https://app.example.test/done"), key)
	if rec.Code != http.StatusFound || !strings.HasPrefix(rec.Header().Get("Location"), v.gh.URL()) {
		t.Fatalf("redirect=true: %d Location=%q, want 302 to the provider", rec.Code, rec.Header().Get("Location"))
	}
	cb, err := v.gh.SignIn(context.Background(), rec.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	rec = get("/v1/connect/codehost/callback?"+cb.Encode(), "")
	loc, _ := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusFound || loc == nil || loc.Host != "app.example.test" || !strings.HasPrefix(loc.Query().Get("account"), "acc_") {
		t.Fatalf("callback with return_to: %d Location=%q, want 302 to return_to with the account id", rec.Code, rec.Header().Get("Location"))
	}
	// The provider failing the token exchange is the provider's fault: 502.
	query := v.startFlow("codehost", key)
	v.gh.FailNext(fakeoauth.RouteGitHubToken, 1, http.StatusServiceUnavailable)
	if rec := get("/v1/connect/codehost/callback?"+query, ""); rec.Code != http.StatusBadGateway {
		t.Fatalf("token endpoint down: %d %s, want 502", rec.Code, rec.Body)
	} else if strings.Contains(rec.Body.String(), "code=") {
		t.Fatalf("the answer echoes the callback: %s", rec.Body)
	}
}
