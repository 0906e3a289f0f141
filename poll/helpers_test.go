package poll_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/poll"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/triggers"
)

// token is the fake's token acting as login.
func token(login string) string { return "tok-" + login }

// bearer adds a bearer token to requests.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// fakeAccounts hands out clients acting as the fake's users.
type fakeAccounts struct {
	mu sync.Mutex
	m  map[[2]string]fakeAccount
}

type fakeAccount struct {
	login string
	err   error
}

func (f *fakeAccounts) add(tenant, id, login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[[2]string{tenant, id}] = fakeAccount{login: login}
}

func (f *fakeAccounts) fail(tenant, id string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[[2]string{tenant, id}] = fakeAccount{err: err}
}

func (f *fakeAccounts) Client(_ context.Context, tenant, id string) (*http.Client, store.Account, error) {
	f.mu.Lock()
	a, ok := f.m[[2]string{tenant, id}]
	f.mu.Unlock()
	switch {
	case !ok:
		return nil, store.Account{}, fmt.Errorf("account %s not found", id)
	case a.err != nil:
		return nil, store.Account{ID: id, TenantID: tenant, Connector: "codehost", Status: store.StatusNeedsReauth}, a.err
	}
	c := &http.Client{
		Transport:     bearer{token(a.login), http.DefaultTransport},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, store.Account{ID: id, TenantID: tenant, Connector: "codehost", Login: a.login, Status: store.StatusActive}, nil
}

type harness struct {
	t      *testing.T
	clock  *testenv.Clock
	fake   *fakecodehost.Server
	url    string
	st     *boltstore.Store
	bus    *bus.Bus
	stream jetstream.Stream
	accts  *fakeAccounts
	logs   *testenv.Buffer
	ids    atomic.Int64
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		clock: testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)),
		accts: &fakeAccounts{m: map[[2]string]fakeAccount{}},
		logs:  &testenv.Buffer{},
	}
	t.Cleanup(func() {
		if os.Getenv("POLL_LOGS") != "" {
			t.Log(h.logs.String())
		}
		if strings.Contains(h.logs.String(), "tok-") {
			t.Errorf("a token was logged:\n%s", h.logs.String())
		}
	})
	h.fake = fakecodehost.New(fakecodehost.Options{
		Now: h.clock.Now,
		Authenticate: func(tok string) (string, bool) {
			login, ok := strings.CutPrefix(tok, "tok-")
			return login, ok && login != ""
		},
	})
	h.url = h.fake.Start()
	t.Cleanup(h.fake.Close)

	dir := t.TempDir()
	var emb *bus.Embedded
	h.bus, emb = bustest.Start(t)
	nc, err := nats.Connect(emb.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if h.stream, err = js.Stream(t.Context(), bus.EventsStream); err != nil {
		t.Fatal(err)
	}
	h.st, err = boltstore.Open(filepath.Join(dir, "triggerd.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.st.Close() })
	return h
}

// poller returns a new Poller over the harness's store and bus; edit
// adjusts its options.
func (h *harness) poller(edit ...func(*poll.Options)) *poll.Poller {
	h.t.Helper()
	o := poll.Options{
		Store: h.st, Accounts: h.accts, Committer: h.bus, CodeHostAPI: h.url,
		Logger: zerolog.New(h.logs), Now: h.clock.Now,
	}
	for _, e := range edit {
		e(&o)
	}
	p, err := poll.New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) pollOnce(p *poll.Poller) {
	h.t.Helper()
	if err := p.PollOnce(h.t.Context()); err != nil {
		h.t.Fatalf("PollOnce: %v", err)
	}
}

// trigger stores an active, enabled trigger created now.
func (h *harness) trigger(tenant, account string, kind triggers.Kind, params string) store.Trigger {
	h.t.Helper()
	t := store.Trigger{
		ID: fmt.Sprintf("trg-%d", h.ids.Add(1)), TenantID: tenant, Kind: string(kind), AccountID: account, AgentID: "agent-1",
		Enabled: true, Status: store.TriggerActive, CreatedAt: h.clock.Now(),
	}
	if params != "" {
		t.Params = json.RawMessage(params)
	}
	t, err := h.st.CreateTrigger(h.t.Context(), t)
	if err != nil {
		h.t.Fatal(err)
	}
	return t
}

// call calls the fake's REST API as login and decodes the answer.
func (h *harness) call(login, method, path, body string) map[string]any {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token(login))
	req.Header.Set("User-Agent", "poll-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		h.t.Fatalf("%s %s as %s: %d %s", method, path, login, resp.StatusCode, b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return out
}

// createGist creates a gist of login now and returns its id.
func (h *harness) createGist(login, description string) string {
	h.t.Helper()
	out := h.call(login, http.MethodPost, "/gists",
		fmt.Sprintf(`{"description":%q,"public":true,"files":{"notes.md":{"content":"# %s"}}}`, description, description))
	return out["id"].(string)
}

// got is one event read back from the events stream.
type got struct {
	subject string
	ev      triggers.Event
}

// events returns every event the stream holds, in order, without the
// archive records and index messages beside them. Commit waits for
// JetStream's acknowledgements, so after PollOnce they are all there.
func (h *harness) events() []got {
	h.t.Helper()
	ctx := h.t.Context()
	info, err := h.stream.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []got
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := h.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			h.t.Fatal(err)
		}
		if strings.HasPrefix(m.Subject, bus.DeliveriesPrefix+".") {
			continue // the archive, sharing the stream
		}
		var ev triggers.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			h.t.Fatalf("event %d: %v", seq, err)
		}
		out = append(out, got{m.Subject, ev})
	}
	return out
}

// wantEvents fails unless the stream holds n events.
func (h *harness) wantEvents(n int, when string) []got {
	h.t.Helper()
	evs := h.events()
	if len(evs) != n {
		var ids []string
		for _, e := range evs {
			ids = append(ids, string(e.ev.Kind)+"/"+e.ev.DeliveryID)
		}
		h.t.Fatalf("%s: %d events %v, want %d", when, len(evs), ids, n)
	}
	return evs
}
