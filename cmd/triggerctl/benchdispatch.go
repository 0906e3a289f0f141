package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/tenants"
	"github.com/triggerd/triggerd/triggers"
)

// dispatchBenchResult is what bench-dispatch prints.
type dispatchBenchResult struct {
	Deliveries  int     `json:"deliveries"`
	Accepted    int     `json:"accepted"`
	RunsStarted int     `json:"runs_started"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate_per_second,omitempty"`
	// Throughput is runs received per second over the whole run.
	Throughput float64 `json:"runs_per_second"`
	// Ingest is the webhook's answer time as the sender sees it (the
	// baseline); EndToEnd is from the webhook's receipt (the event's
	// received_at) to the agent receiving its run over NATS.
	Ingest   latencyMS `json:"ingest_ms"`
	EndToEnd latencyMS `json:"end_to_end_ms"`
	// Ratios are EndToEnd over Ingest at p50 and p99.
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
	Duration string  `json:"duration"`
}

// latencies summarises ds (sorted in place) the way bench does, and
// returns its p50 and p99.
func latencies(ds []time.Duration) (latencyMS, time.Duration, time.Duration) {
	if len(ds) == 0 {
		return latencyMS{}, 0, 0
	}
	slices.Sort(ds)
	p50, p99 := percentile(ds, 0.50), percentile(ds, 0.99)
	return latencyMS{P50: ms(p50), P90: ms(percentile(ds, 0.90)), P99: ms(p99), Max: ms(ds[len(ds)-1])}, p50, p99
}

// benchDispatch measures the latency from a webhook's receipt to the agent
// receiving its run: it creates a NATS agent and a new_issue trigger on a
// repository (registering the hook through a connected account, as a user
// would), posts signed issues.opened deliveries to the shared code-hosting
// endpoint at a fixed concurrency, and times each run's arrival on
// agents.<id>.runs. It deletes the trigger and the agent afterwards.
func benchDispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-dispatch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", defaultURL, "root URL of triggerd")
	dataDir := fs.String("data-dir", "./data", "triggerd's data dir (tenant key, code-hosting webhook secret and NATS operator password)")
	natsURL := fs.String("nats-url", "nats://127.0.0.1:4222", "triggerd's NATS, where the agent receives runs")
	repo := fs.String("repo", "octocat/hello-world", "repository the trigger watches (the account must administer it)")
	account := fs.String("account", "", "code-hosting account for the trigger (default: the tenant's first)")
	n := fs.Int("n", 2000, "deliveries to send")
	conc := fs.Int("c", 8, "deliveries in flight at once")
	rate := fs.Float64("rate", 0, "deliveries per second, paced (0: as fast as the senders go, which measures queueing at saturation)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up waiting for runs after this long")
	force := fs.Bool("force", false, "run even though other triggers watch --repo (each delivery then starts them too, acting as their accounts)")
	synopsis := "usage: triggerctl bench-dispatch [flags]\n\nMeasures webhook receipt → agent run received over NATS, against the webhook's own answer time.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "triggerctl bench-dispatch: %v\n", err); return 1 }
	key, err := managementKey(apiKeyFlag(fs), "TRIGGERD_API_KEY", tenants.DefaultKeyFile, *dataDir)
	if err != nil {
		return fail(err)
	}
	secret, _, err := loadSecret(connectorCodeHost, *dataDir)
	if err != nil {
		return fail(err)
	}
	root := strings.TrimRight(*baseURL, "/") + "/v1"
	if *account == "" {
		var accs struct {
			Accounts []struct{ ID, Connector, Status string } `json:"accounts"`
		}
		if err := callAPI(ctx, http.MethodGet, root+"/accounts", key, nil, &accs); err != nil {
			return fail(err)
		}
		for _, a := range accs.Accounts {
			if a.Connector == connectorCodeHost && a.Status == "active" {
				*account = a.ID
				break
			}
		}
		if *account == "" {
			return fail(errors.New("the tenant has no active code-hosting account; connect one or pass --account (triggerd --sandbox has one)"))
		}
	}
	// Every delivery the bench posts is a real new issue on --repo for the
	// tenant's triggers: one that watches it would start its agent and
	// run its steps as its account (comment on real issues) each time.
	if !*force {
		others, err := triggersOn(ctx, root, key, *repo)
		if err != nil {
			return fail(err)
		}
		if len(others) > 0 {
			return fail(fmt.Errorf("%d of the tenant's triggers watch new issues on %s (%s): each bench delivery would start them too, "+
				"acting as their accounts; give --repo a repository no trigger watches, or pass --force", len(others), *repo, strings.Join(others, ", ")))
		}
	}
	var ag struct{ ID string }
	if err := callAPI(ctx, http.MethodPost, root+"/agents", key, map[string]string{"name": "bench-dispatch"}, &ag); err != nil {
		return fail(err)
	}
	defer callAPI(context.WithoutCancel(ctx), http.MethodDelete, root+"/agents/"+ag.ID, key, nil, nil)
	var tr struct{ ID string }
	body := map[string]any{"kind": "new_issue", "account": *account, "agent": ag.ID, "params": map[string]any{"repositories": []string{*repo}}}
	if err := callAPI(ctx, http.MethodPost, root+"/triggers", key, body, &tr); err != nil {
		return fail(err)
	}
	defer callAPI(context.WithoutCancel(ctx), http.MethodDelete, root+"/triggers/"+tr.ID, key, nil, nil)

	// It reads the runs as the operator does: an ordered consumer, which
	// an agent's own permissions would not allow.
	user, pw, _, err := natsCredentials(*natsURL, *dataDir)
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(*natsURL, nats.Name("triggerctl bench-dispatch"), nats.UserInfo(user, pw))
	if err != nil {
		return fail(fmt.Errorf("connect to %s: %w", *natsURL, err))
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(ctx, agent.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{agent.RunsSubject(ag.ID)}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return fail(err)
	}
	var mu sync.Mutex
	var e2e []time.Duration
	got := make(chan struct{}, *n)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		var run struct {
			Event struct {
				ReceivedAt time.Time `json:"received_at"`
			} `json:"event"`
		}
		if json.Unmarshal(m.Data(), &run) == nil {
			mu.Lock()
			e2e = append(e2e, now.Sub(run.Event.ReceivedAt))
			mu.Unlock()
		}
		got <- struct{}{}
	})
	if err != nil {
		return fail(err)
	}
	defer cc.Stop()

	owner, name, _ := strings.Cut(*repo, "/")
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conc}}
	endpoint := endpointURL(*baseURL, connectorCodeHost)
	var ingestLat []time.Duration
	accepted := 0
	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var firstErr firstError
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				payload := fmt.Sprintf(`{"action":"opened","issue":{"number":%d,"title":"bench %d","body":"","user":{"login":"octocat"},"labels":[]},"repository":{"id":1,"name":%q,"full_name":%q,"owner":{"login":%q}},"sender":{"login":"octocat"}}`,
					i+1, i, name, *repo, owner)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader([]byte(payload)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "issues")
				req.Header.Set("X-GitHub-Delivery", uuid.NewString())
				req.Header.Set("X-Hub-Signature-256", ingest.CodeHostScheme.Sign(secret, []byte(payload)))
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					firstErr.note(func() string { return err.Error() })
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(t0)
				mu.Lock()
				if resp.StatusCode == http.StatusAccepted {
					accepted++
					ingestLat = append(ingestLat, d)
				}
				mu.Unlock()
				if resp.StatusCode != http.StatusAccepted {
					firstErr.note(func() string { return fmt.Sprintf("answer %d", resp.StatusCode) })
				}
			}
		}()
	}
	var tick <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / *rate))
		defer t.Stop()
		tick = t.C
	}
	for i := range *n {
		if tick != nil {
			<-tick
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	deadline := time.After(*timeout)
	for received := 0; received < accepted; received++ {
		select {
		case <-got:
		case <-deadline:
			return fail(fmt.Errorf("only %d of %d runs arrived within %s", received, accepted, *timeout))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	elapsed := time.Since(start)
	if msg := firstErr.get(); msg != "" {
		fmt.Fprintf(stderr, "triggerctl bench-dispatch: first failure: %s\n", msg)
	}
	mu.Lock()
	defer mu.Unlock()
	res := dispatchBenchResult{Deliveries: *n, Accepted: accepted, RunsStarted: len(e2e), Concurrency: *conc, Rate: *rate,
		Throughput: math.Round(float64(len(e2e))/elapsed.Seconds()*10) / 10, Duration: elapsed.Round(time.Millisecond).String()}
	var i50, i99, e50, e99 time.Duration
	res.Ingest, i50, i99 = latencies(ingestLat)
	res.EndToEnd, e50, e99 = latencies(e2e)
	if i50 > 0 && i99 > 0 {
		res.RatioP50 = math.Round(float64(e50)/float64(i50)*100) / 100
		res.RatioP99 = math.Round(float64(e99)/float64(i99)*100) / 100
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	fmt.Fprintln(stdout, string(out))
	return 0
}

// triggersOn returns the ids of the tenant's new_issue triggers that watch
// repo, which the bench's deliveries would start.
func triggersOn(ctx context.Context, root, key, repo string) ([]string, error) {
	var list struct {
		Triggers []struct {
			ID     string `json:"id"`
			Kind   string `json:"kind"`
			Params struct {
				Repositories []string `json:"repositories"`
			} `json:"params"`
		} `json:"triggers"`
	}
	if err := callAPI(ctx, http.MethodGet, root+"/triggers", key, nil, &list); err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range list.Triggers {
		if t.Kind == string(triggers.NewIssue) && slices.ContainsFunc(t.Params.Repositories, func(r string) bool { return strings.EqualFold(r, repo) }) {
			ids = append(ids, t.ID)
		}
	}
	return ids, nil
}
