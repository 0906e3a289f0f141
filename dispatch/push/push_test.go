package push_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/dispatch/push"
	"github.com/triggerd/triggerd/internal/netguard"
)

const agentID = "0b7e3f0e-8f5a-4c2e-9d55-6b1f2a3c4d5e"

func testRun() agent.Run {
	return agent.Run{
		ID:        "run_7f1c",
		Tenant:    "t1",
		Agent:     agentID,
		Trigger:   "trg_1",
		Kind:      "new_issue",
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Event:     json.RawMessage(`{"id":"evt_1","kind":"new_issue","payload":{"n":1}}`),
	}
}

func newSecret(t *testing.T) string {
	t.Helper()
	s, err := agent.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// local is a Sender that may reach httptest servers.
func local() *push.Sender {
	return &push.Sender{Client: push.NewClient(5*time.Second, true)}
}

func sendErr(t *testing.T, err error) *push.SendError {
	t.Helper()
	var se *push.SendError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *SendError", err, err)
	}
	return se
}

func TestSendIsVerifiable(t *testing.T) {
	secret := newSecret(t)
	run := testRun()
	var got http.Header
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotBody, _ = io.ReadAll(r.Body)
		got = r.Header.Clone()
		if r.Method != http.MethodPost {
			t.Errorf("method %s", r.Method)
		}
		if err := agent.Verify([]string{secret}, r.Header, gotBody, time.Now(), 0); err != nil {
			t.Errorf("Verify: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"run_id":%q,"agent":%q,"status":"succeeded","output":{"comment":42},"finished_at":"2026-01-02T03:04:06Z"}`, run.ID, run.Agent)
	}))
	defer srv.Close()

	d, err := local().Send(context.Background(), srv.URL+"/hook", secret, run)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != http.StatusOK || d.Duration <= 0 {
		t.Errorf("delivery %+v", d)
	}
	if d.Result == nil || d.Result.RunID != run.ID || d.Result.Status != agent.StatusSucceeded || string(d.Result.Output) != `{"comment":42}` {
		t.Errorf("result %+v", d.Result)
	}
	if got.Get("Content-Type") != "application/json" || got.Get(agent.HeaderID) != run.ID || got.Get("User-Agent") != push.DefaultUserAgent {
		t.Errorf("headers %v", got)
	}
	var sent agent.Run
	if err := json.Unmarshal(gotBody, &sent); err != nil || sent.ID != run.ID || string(sent.Event) != string(run.Event) {
		t.Errorf("body %s: %v", gotBody, err)
	}
}

func TestSendToAgentHandler(t *testing.T) {
	secret := newSecret(t)
	run := testRun()
	srv := httptest.NewServer(agent.NewHTTPHandler(secret, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		if r.ID != run.ID {
			return agent.Result{}, errors.New("wrong run")
		}
		return agent.Result{Status: agent.StatusFailed, Error: "repository archived"}, nil
	}))
	defer srv.Close()

	s := local()
	s.UserAgent = "triggerd-test"
	d, err := s.Send(context.Background(), srv.URL, secret, run)
	if err != nil {
		t.Fatal(err)
	}
	if d.Result == nil || d.Result.Status != agent.StatusFailed || d.Result.Error != "repository archived" || d.Result.Agent != agentID {
		t.Fatalf("result %+v", d.Result)
	}

	// The agent refuses a run signed with another secret, for good.
	_, err = s.Send(context.Background(), srv.URL, newSecret(t), run)
	if se := sendErr(t, err); se.Status != http.StatusUnauthorized || !se.Permanent {
		t.Fatalf("error %+v", se)
	}
}

func TestSendResultIsOptional(t *testing.T) {
	run := testRun()
	for name, answer := range map[string]string{
		"empty":           "",
		"white space":     " \r\n",
		"not JSON":        "ok",
		"not a result":    `{"hello":"world"}`,
		"unknown status":  `{"status":"done"}`,
		"another run":     `{"run_id":"run_other","status":"succeeded"}`,
		"another agent":   `{"agent":"someone","status":"succeeded"}`,
		"invalid output":  `{"status":"succeeded","output":}`,
		"array":           `[{"status":"succeeded"}]`,
		"trailing binary": "\x00\x01",
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusAccepted)
				io.WriteString(w, answer)
			}))
			defer srv.Close()
			d, err := local().Send(context.Background(), srv.URL, newSecret(t), run)
			if err != nil || d.Status != http.StatusAccepted || d.Result != nil {
				t.Fatalf("delivery %+v, %v", d, err)
			}
			// What is not a result is handed back as it came, to be kept
			// on the run marked as such; an empty body is nothing (nil,
			// which the dispatcher takes as no answer).
			blank := strings.TrimSpace(answer) == ""
			if blank != (d.Unrecognized == nil) || string(d.Unrecognized) != answer && !blank {
				t.Fatalf("Unrecognized = %q (nil %v), want %q", d.Unrecognized, d.Unrecognized == nil, answer)
			}
		})
	}
	// A result naming neither run nor agent is the run's.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"succeeded"}`)
	}))
	defer srv.Close()
	d, err := local().Send(context.Background(), srv.URL, newSecret(t), run)
	if err != nil || d.Result == nil || d.Result.RunID != run.ID || d.Result.Agent != agentID || d.Unrecognized != nil {
		t.Fatalf("delivery %+v, %v", d, err)
	}
}

func TestSendClassifiesStatuses(t *testing.T) {
	tests := []struct {
		status    int
		ok        bool
		permanent bool
	}{
		{200, true, false}, {201, true, false}, {202, true, false}, {204, true, false},
		{301, false, true}, {302, false, true}, {303, false, true}, {307, false, true}, {308, false, true},
		{400, false, true}, {401, false, true}, {403, false, true}, {404, false, true}, {405, false, true},
		{409, false, true}, {410, false, true}, {413, false, true}, {422, false, true},
		{408, false, false}, {429, false, false},
		{500, false, false}, {501, false, false}, {502, false, false}, {503, false, false}, {504, false, false},
	}
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := int(status.Load()); s >= 300 && s < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			status.Store(int32(tt.status))
			d, err := local().Send(context.Background(), srv.URL, newSecret(t), testRun())
			if d.Status != tt.status {
				t.Errorf("delivery status %d", d.Status)
			}
			if tt.ok {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			se := sendErr(t, err)
			if se.Status != tt.status || se.Permanent != tt.permanent || push.IsPermanent(err) != tt.permanent {
				t.Fatalf("error %+v: want permanent %v", se, tt.permanent)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(tt.status)) {
				t.Errorf("error text %q does not name the status", err)
			}
		})
	}
}

func TestSendRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		status int
		header string
		want   time.Duration
	}{
		{429, "120", 2 * time.Minute},
		{503, " 5 ", 5 * time.Second},
		{408, "7", 7 * time.Second},
		{503, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{503, now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{503, now.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour},
		{429, "86400", time.Hour},
		{429, "99999999999999999999999", time.Hour},
		{429, "-5", 0},
		{429, "soon", 0},
		{429, "", 0},
		{500, "1.5", 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %q", tt.status, tt.header), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			s := local()
			s.Now = func() time.Time { return now }
			_, err := s.Send(context.Background(), srv.URL, newSecret(t), testRun())
			se := sendErr(t, err)
			if se.Permanent || se.RetryAfter != tt.want {
				t.Fatalf("error %+v, want retry after %s", se, tt.want)
			}
			if d := push.Delay(err, 1); d < tt.want || d > max(tt.want, push.DefaultBackoffBase) {
				t.Fatalf("Delay %s", d)
			}
		})
	}
}

func TestSendDoesNotFollowRedirects(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	// Even a client that would follow them.
	for _, s := range []*push.Sender{local(), {Client: &http.Client{}}} {
		d, err := s.Send(context.Background(), redirector.URL, newSecret(t), testRun())
		se := sendErr(t, err)
		if !se.Permanent || se.Status != http.StatusTemporaryRedirect || d.Status != http.StatusTemporaryRedirect {
			t.Fatalf("error %+v", se)
		}
	}
	if reached.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

// countingTransport counts the response body bytes its caller reads.
type countingTransport struct {
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func TestSendReadsAtMostOneMiB(t *testing.T) {
	run := testRun()
	result := fmt.Sprintf(`{"run_id":%q,"status":"succeeded"}`, run.ID)
	var size atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A result padded with white space to the size asked.
		io.WriteString(w, result)
		pad := strings.Repeat(" ", 64<<10)
		for left := size.Load() - int64(len(result)); left > 0; left -= int64(len(pad)) {
			if _, err := io.WriteString(w, pad[:min(left, int64(len(pad)))]); err != nil {
				return
			}
		}
	}))
	defer srv.Close()

	for _, tt := range []struct {
		size       int64
		withResult bool
	}{
		{push.MaxResponseBytes, true},
		{push.MaxResponseBytes + 1, false},
		{16 << 20, false},
	} {
		size.Store(tt.size)
		ct := &countingTransport{}
		s := &push.Sender{Client: &http.Client{Transport: ct}}
		d, err := s.Send(context.Background(), srv.URL, newSecret(t), run)
		if err != nil {
			t.Fatalf("size %d: %v", tt.size, err)
		}
		if (d.Result != nil) != tt.withResult {
			t.Errorf("size %d: result %+v", tt.size, d.Result)
		}
		if n := ct.read.Load(); n > push.MaxResponseBytes+1 {
			t.Errorf("size %d: read %d bytes", tt.size, n)
		}
	}
}

func TestSendNetworkErrorsAreRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	closedURL := srv.URL
	srv.Close()
	_, err := local().Send(context.Background(), closedURL, newSecret(t), testRun())
	if se := sendErr(t, err); se.Permanent || se.Status != 0 || se.Err == nil {
		t.Fatalf("error %+v", se)
	}

	// A timeout from the context.
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-block:
		}
	}))
	defer slow.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = local().Send(ctx, slow.URL, newSecret(t), testRun())
	if se := sendErr(t, err); se.Permanent || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %+v", se)
	}
	if time.Since(begin) > 5*time.Second {
		t.Fatal("the deadline was not honoured")
	}
}

func TestSendRefusesBadInput(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	for name, tt := range map[string]struct{ url, secret string }{
		"bad scheme":     {"ftp://example.com/", newSecret(t)},
		"credentials":    {"http://u:p@" + strings.TrimPrefix(srv.URL, "http://"), newSecret(t)},
		"no host":        {"http:///x", newSecret(t)},
		"invalid secret": {srv.URL, "whsec_!!!notbase64"},
		"empty secret":   {srv.URL, ""},
	} {
		_, err := local().Send(context.Background(), tt.url, tt.secret, testRun())
		if !push.IsPermanent(err) {
			t.Errorf("%s: error %v, want permanent", name, err)
		}
	}
}

func TestErrorsNeverContainSecretOrQuery(t *testing.T) {
	secret := newSecret(t)
	key := strings.TrimPrefix(secret, agent.SecretPrefix)
	statuses := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "secret was "+secret) // an agent echoing it
		case "/302":
			http.Redirect(w, r, "/?"+secret, http.StatusFound)
		default:
			w.WriteHeader(http.StatusGone)
			io.WriteString(w, secret)
		}
	}))
	defer statuses.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	var errs []error
	for _, u := range []string{statuses.URL + "/500", statuses.URL + "/302", statuses.URL + "/410", closed.URL + "/?token=sesame"} {
		_, err := local().Send(context.Background(), u, secret, testRun())
		errs = append(errs, err)
	}
	_, err := (&push.Sender{}).Send(context.Background(), statuses.URL+"/?token=sesame", secret, testRun())
	errs = append(errs, err)
	for _, bad := range []string{"whsec_" + key[:10] + "!!!", key[:10] + "%%%"} {
		_, err := local().Send(context.Background(), statuses.URL, bad, testRun())
		errs = append(errs, err)
	}
	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if msg := err.Error(); strings.Contains(msg, key[:10]) || strings.Contains(msg, "sesame") {
			t.Errorf("case %d: error %q leaks", i, msg)
		}
	}
}

func TestNewClientRefusesLoopbackAtDialTime(t *testing.T) {
	var reached atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	strict := &push.Sender{Client: push.NewClient(5*time.Second, false)}
	// 127.0.0.1 literally, a name that resolves to it, and the zero Sender's
	// default client.
	for _, s := range []struct {
		sender *push.Sender
		url    string
	}{
		{strict, srv.URL},
		{strict, "http://localhost:" + port + "/hook"},
		{&push.Sender{}, srv.URL},
	} {
		_, err := s.sender.Send(context.Background(), s.url, newSecret(t), testRun())
		if !errors.Is(err, netguard.ErrForbiddenAddress) || !push.IsPermanent(err) {
			t.Errorf("%s: error %v, want a permanent ErrForbiddenAddress", s.url, err)
		}
	}
	if reached.Load() != 0 {
		t.Fatal("the server was reached")
	}
	// The same server is reachable when private addresses are allowed.
	if _, err := local().Send(context.Background(), srv.URL, newSecret(t), testRun()); err != nil {
		t.Fatal(err)
	}
}

func TestDialControl(t *testing.T) {
	for addr, ok := range map[string]bool{
		"93.184.216.34:443":          true,
		"8.8.8.8:53":                 true,
		"[2606:4700::1111]:443":      true,
		"127.0.0.1:80":               false,
		"10.1.2.3:80":                false,
		"169.254.169.254:80":         false,
		"100.64.0.1:80":              false,
		"0.0.0.0:80":                 false,
		"[::1]:80":                   false,
		"[::]:80":                    false,
		"[::ffff:10.0.0.1]:80":       false,
		"[fe80::1%eth0]:80":          false,
		"[fc00::1]:80":               false,
		"[2002:a9fe:a9fe::]:80":      false,
		"[64:ff9b::7f00:1]:80":       false,
		"[64:ff9b::5db8:d822]:80":    true,
		"example.com:80":             false,
		"239.255.255.250:1900":       false,
		"[2001:0:4136:e378::1]:3544": false,
	} {
		err := netguard.DialControl("tcp", addr, nil)
		if ok && err != nil || !ok && !errors.Is(err, netguard.ErrForbiddenAddress) {
			t.Errorf("DialControl(%s) = %v, want allowed %v", addr, err, ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	const base, limit = time.Second, 5 * time.Minute
	top := func() float64 { return math.Nextafter(1, 0) }
	half := func() float64 { return 0.5 }
	zero := func() float64 { return 0 }
	ceilings := map[int]time.Duration{
		-3: base, 0: base, 1: base, 2: 2 * base, 3: 4 * base, 8: 128 * base, 9: 256 * base,
		10: limit, 63: limit, 64: limit, 1000: limit, math.MaxInt: limit,
	}
	for attempt, ceiling := range ceilings {
		if got := push.Backoff(attempt, base, limit, top); got > ceiling || got < ceiling-time.Microsecond {
			t.Errorf("attempt %d, rnd≈1: %s, want ≈%s", attempt, got, ceiling)
		}
		if got := push.Backoff(attempt, base, limit, half); got != ceiling/2 {
			t.Errorf("attempt %d, rnd=0.5: %s, want %s", attempt, got, ceiling/2)
		}
		if got := push.Backoff(attempt, base, limit, zero); got != 0 {
			t.Errorf("attempt %d, rnd=0: %s", attempt, got)
		}
	}
	// Out-of-range random numbers are clamped; a huge base does not
	// overflow; defaults fill in.
	if got := push.Backoff(1, base, limit, func() float64 { return 7 }); got != base {
		t.Errorf("rnd=7: %s", got)
	}
	if got := push.Backoff(1, base, limit, func() float64 { return -1 }); got != 0 {
		t.Errorf("rnd=-1: %s", got)
	}
	if got := push.Backoff(40, math.MaxInt64/3, math.MaxInt64, half); got <= 0 {
		t.Errorf("huge base: %s", got)
	}
	if got := push.Backoff(2, 0, 0, top); got > 2*push.DefaultBackoffBase {
		t.Errorf("defaults: %s", got)
	}
	if got := push.Backoff(1, time.Hour, time.Minute, top); got > time.Minute {
		t.Errorf("base over max: %s", got)
	}
	for attempt := range 100 {
		if got := push.Backoff(attempt, base, limit, nil); got < 0 || got > limit {
			t.Fatalf("attempt %d: %s", attempt, got)
		}
	}
}

func TestDelay(t *testing.T) {
	for attempt := 1; attempt < 50; attempt++ {
		if d := push.Delay(errors.New("network"), attempt); d < 0 || d > push.DefaultBackoffMax {
			t.Fatalf("attempt %d: %s", attempt, d)
		}
	}
	if d := push.Delay(&push.SendError{RetryAfter: 10 * time.Minute}, 1); d != 10*time.Minute {
		t.Fatalf("Retry-After 10m: %s", d)
	}
	if d := push.Delay(fmt.Errorf("wrapped: %w", &push.SendError{RetryAfter: 5 * time.Hour}), 1); d != push.MaxRetryAfter {
		t.Fatalf("Retry-After 5h: %s", d)
	}
}

func TestSendErrorText(t *testing.T) {
	for _, tt := range []struct {
		err  *push.SendError
		want string
	}{
		{&push.SendError{Status: 503, RetryAfter: 30 * time.Second}, "push: agent answered 503 Service Unavailable (retry after 30s)"},
		{&push.SendError{Status: 302, Permanent: true}, "push: agent answered 302 Found, redirects are not followed (permanent)"},
		{&push.SendError{Err: &url.Error{Op: "Post", URL: "https://a.example", Err: errors.New("EOF")}}, `push: Post "https://a.example": EOF`},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
