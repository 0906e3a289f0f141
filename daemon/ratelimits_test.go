package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store/redisstore"
	"github.com/triggerd/triggerd/store/storetest"
)

// bearer adds a token, as the accounts package's client does.
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer shared-budget-token")
	return b.base.RoundTrip(r)
}

// TestRateLimitsSharedAcrossProcesses runs two code-hosting toolkits (two
// triggerd processes) on one Redis: once the first has spent the account's
// budget, the second refuses before sending anything.
func TestRateLimitsSharedAcrossProcesses(t *testing.T) {
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	gh := fakecodehost.New(fakecodehost.Options{RateLimit: 1})
	base := gh.Start()
	defer gh.Close()
	toolkit := func() connectors.Toolkit {
		s, err := redisstore.Open(context.Background(), url, redisstore.Options{Prefix: prefix, AllowVolatile: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return codehost.NewToolkit(codehost.ToolkitOptions{APIBaseURL: base, RateLimits: sharedRateLimits{s}})
	}
	one, two := toolkit(), toolkit()
	run := func(tk connectors.Toolkit) error {
		var step connectors.Step
		for _, s := range tk.Steps {
			if s.ID == "codehost.get_repository_info" {
				step = s
			}
		}
		hc := &http.Client{Transport: tk.Wrap("acc_shared", bearer{http.DefaultTransport})}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := step.Run(ctx, connectors.Env{HTTP: hc}, json.RawMessage(`{"owner":"octocat","repo":"hello-world"}`))
		return err
	}
	if err := run(one); err != nil {
		t.Fatalf("first process: %v", err)
	}
	sent := gh.RequestCount()
	err := run(two)
	var ce *connectors.Error
	if !errors.As(err, &ce) || ce.Code != connectors.CodeRateLimited || ce.RetryAfter <= 0 {
		t.Fatalf("second process: %v, want rate_limited with retry_after", err)
	}
	if gh.RequestCount() != sent {
		t.Fatal("the second process sent a request although the shared budget was spent")
	}
}
