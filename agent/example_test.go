package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
)

// An HTTP agent: triggerd POSTs each run to it, signed with the secret it
// was registered with.
func ExampleNewHTTPHandler() {
	secret := os.Getenv("AGENT_SECRET") // "whsec_..."
	h := agent.NewHTTPHandler(secret, func(ctx context.Context, run agent.Run) (agent.Result, error) {
		var event struct {
			Kind       string `json:"kind"`
			Repository string `json:"repository"`
		}
		if err := json.Unmarshal(run.Event, &event); err != nil {
			// Not worth retrying: report the failure.
			return agent.Result{Status: agent.StatusFailed, Error: err.Error()}, nil
		}
		log.Printf("run %s: %s on %s", run.ID, event.Kind, event.Repository)
		return agent.Result{Status: agent.StatusSucceeded, Output: json.RawMessage(`{"handled":true}`)}, nil
	})
	http.Handle("POST /triggerd", h)
	log.Fatal(http.ListenAndServe(":8081", nil))
}

// A NATS agent: it pulls its runs from JetStream until interrupted. It
// connects as itself, with the password triggerd showed when it created
// the agent.
func ExampleConsume() {
	agentID := os.Getenv("AGENT_ID") // the agent's UUID
	nc, err := agent.Connect("nats://127.0.0.1:4222", agentID, os.Getenv("AGENT_NATS_PASSWORD"),
		nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	err = agent.Consume(ctx, js, agentID, func(ctx context.Context, run agent.Run) (agent.Result, error) {
		log.Printf("run %s (attempt %d) of trigger %s", run.ID, agent.Attempt(ctx), run.Trigger)
		return agent.Result{Status: agent.StatusSucceeded}, nil
	}, agent.WithConcurrency(4), agent.WithErrorHandler(func(err error) { log.Print(err) }))
	if err != nil {
		log.Fatal(err)
	}
}

// Verifying a run by hand, for agents that serve HTTP their own way.
func ExampleVerify() {
	secret := os.Getenv("AGENT_SECRET")
	http.HandleFunc("POST /runs", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, agent.MaxRunBytes))
		if err != nil {
			http.Error(w, "cannot read", http.StatusBadRequest)
			return
		}
		if err := agent.Verify([]string{secret}, r.Header, body, time.Now(), agent.DefaultTolerance); err != nil {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		var run agent.Run
		if err := json.Unmarshal(body, &run); err != nil {
			http.Error(w, "not a run", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
