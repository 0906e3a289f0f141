package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/testenv"
)

// TestSpoolReplayAfterTheDedupWindow is reliability case 11 for real: a
// triggerd with a 100 ms dedup window takes a deployment delivery through
// NATS; NATS goes away, the sender redelivers it and a new one comes, both
// spooled; once NATS is back, long after the window, the spool forwarder
// replays them. JetStream no longer recognises the first delivery's event
// ids, yet no event is stored twice and no run made twice: the archive
// recognises the redelivery. And when JetStream does store an event
// again (a copy published after the window, as a replay of an attempt
// interrupted before its archive record would), the dispatcher's run
// records still start it once.
func TestSpoolReplayAfterTheDedupWindow(t *testing.T) {
	const window = 100 * time.Millisecond // JetStream's smallest
	natsDir, dataDir := t.TempDir(), t.TempDir()
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: natsDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Shutdown() })
	natsURL := emb.ClientURL()
	env := []string{"TRIGGERD_NATS_URL=" + natsURL, "TRIGGERD_DATA_DIR=" + dataDir, "TRIGGERD_COMMIT_TIMEOUT=1s",
		"TRIGGERD_DEDUP_WINDOW=" + window.String()}
	p := startTriggerd(t, env, "--sandbox")
	api, ids := sandboxAPI(t, &p, dataDir)
	code, agent := api(http.MethodPost, "/v1/agents", `{"name": "case-11"}`)
	if code != http.StatusCreated {
		t.Fatalf("create agent: %d %v", code, agent)
	}
	agentID := agent["id"].(string)
	code, trigger := api(http.MethodPost, "/v1/triggers", `{"kind": "deployment_started", "account": "`+ids["deploy"]+`", "agent": "`+agentID+`"}`)
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, trigger)
	}
	code, ep := api(http.MethodGet, "/v1/agents/"+agentID+"/endpoint", "")
	if code != http.StatusOK || ep["secret"] == "" {
		t.Fatalf("endpoint: %d %v", code, ep)
	}
	secret := []byte(ep["secret"].(string))

	type answer struct {
		Spooled   bool `json:"spooled"`
		Duplicate bool `json:"duplicate"`
		Events    []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	bodies := map[string][]byte{}
	deliver := func(id string, wantSpooled bool) answer {
		t.Helper()
		if bodies[id] == nil { // a redelivery sends the same bytes
			bodies[id] = fmt.Appendf(nil, `{"id":%q,"type":"deployment.created","createdAt":%d,"payload":{"deployment":{"id":"dpl_%s","url":"web.vercel.app"},"project":{"id":"prj_web"},"target":"production"}}`,
				id, time.Now().UnixMilli(), id)
		}
		req, _ := http.NewRequest(http.MethodPost, ep["url"].(string), bytes.NewReader(bodies[id]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-vercel-signature", ingest.DeployScheme.Sign(secret, bodies[id]))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var a answer
		if err := json.Unmarshal(raw, &a); err != nil || resp.StatusCode != http.StatusAccepted || a.Spooled != wantSpooled || len(a.Events) != 1 {
			t.Fatalf("delivery %s: %d %s; want 202 with one event, spooled %v", id, resp.StatusCode, raw, wantSpooled)
		}
		return a
	}
	// runs counts the trigger's runs by event id.
	runs := func() map[string]int {
		_, out := api(http.MethodGet, "/v1/runs?trigger="+trigger["id"].(string), "")
		list, _ := out["runs"].([]any)
		byEvent := map[string]int{}
		for _, r := range list {
			byEvent[r.(map[string]any)["event_id"].(string)]++
		}
		return byEvent
	}
	spooled := func() int {
		files, err := filepath.Glob(filepath.Join(dataDir, "spool", "*.rec"))
		if err != nil {
			t.Fatal(err)
		}
		return len(files)
	}

	first := deliver("evt_c11_first", false)
	accepted := time.Now()
	ev1 := first.Events[0].ID
	testenv.Eventually(t, 30*time.Second, "the first delivery's run", func() bool { return runs()[ev1] == 1 })

	emb.Shutdown()
	if again := deliver("evt_c11_first", true); again.Events[0].ID != ev1 {
		t.Fatalf("the redelivery maps to event %s, want %s", again.Events[0].ID, ev1)
	}
	ev2 := deliver("evt_c11_second", true).Events[0].ID
	if n := spooled(); n != 2 {
		t.Fatalf("spool holds %d records, want 2", n)
	}
	// The premise: JetStream has forgotten the first delivery's event id
	// by the time the spool is replayed (checked again below, by JetStream
	// itself).
	if since := time.Since(accepted); since <= window {
		t.Fatalf("only %s since the first delivery was accepted; the test needs more than the %s dedup window", since, window)
	}
	emb, err = bus.StartEmbedded(bus.EmbeddedOptions{Listen: strings.TrimPrefix(natsURL, "nats://"), DataDir: natsDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Shutdown() })
	testenv.Eventually(t, 30*time.Second, "the spool to be replayed", func() bool { return spooled() == 0 })
	testenv.Eventually(t, 30*time.Second, "the second delivery's run", func() bool { return runs()[ev2] == 1 })
	counts, _ := streamEvents(t, natsURL)
	if len(counts) != 2 || counts[ev1] != 1 || counts[ev2] != 1 {
		t.Fatalf("events stream holds %v, want %s and %s once each", counts, ev1, ev2)
	}
	if r := runs(); len(r) != 2 || r[ev1] != 1 || r[ev2] != 1 {
		t.Fatalf("runs by event %v, want one for each of %s and %s", r, ev1, ev2)
	}

	// JetStream would store the first event again now: a copy published
	// with its id is no duplicate. The dispatcher takes it, and its run
	// records keep it from starting a second run.
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, bus.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.EventsFilter}})
	if err != nil {
		t.Fatal(err)
	}
	var orig jetstream.Msg
	for orig == nil {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("looking for event %s in the stream: %v", ev1, err)
		}
		if m.Headers().Get(jetstream.MsgIDHeader) == ev1 {
			orig = m
		}
	}
	dup := nats.NewMsg(orig.Subject())
	dup.Data = orig.Data()
	for k, v := range orig.Headers() {
		if !strings.HasPrefix(k, "Nats-Expected-") {
			dup.Header[k] = v
		}
	}
	ack, err := js.PublishMsg(ctx, dup)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Duplicate {
		t.Fatalf("JetStream still recognised event %s as a duplicate: the dedup window has not passed", ev1)
	}
	if counts, _ := streamEvents(t, natsURL); counts[ev1] != 2 {
		t.Fatalf("event %s is in the stream %d times after the copy, want 2", ev1, counts[ev1])
	}
	dc, err := stream.Consumer(ctx, dispatch.EventsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the dispatcher to take the copy", func() bool {
		info, err := dc.Info(ctx)
		return err == nil && info.AckFloor.Stream >= ack.Sequence && info.NumAckPending == 0
	})
	if r := runs(); len(r) != 2 || r[ev1] != 1 || r[ev2] != 1 {
		t.Fatalf("runs by event %v after the copy, want still one for each of %s and %s", r, ev1, ev2)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.logs())
	}
}
