package push_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/dispatch/push"
)

// Sending a run and deciding what to do with the JetStream message that
// carried it.
func ExampleSender_Send() {
	secret, _ := agent.NewSecret()
	// An HTTP agent, here in the same process.
	srv := httptest.NewServer(agent.NewHTTPHandler(secret, func(ctx context.Context, run agent.Run) (agent.Result, error) {
		return agent.Result{Output: json.RawMessage(`{"labels":["bug"]}`)}, nil
	}))
	defer srv.Close()

	// allowPrivate only because this agent listens on 127.0.0.1.
	s := &push.Sender{Client: push.NewClient(10*time.Second, true)}
	run := agent.Run{ID: "run_1", Agent: "0b7e3f0e-8f5a-4c2e-9d55-6b1f2a3c4d5e", Kind: "new_issue", Event: json.RawMessage(`{}`)}
	attempt := 1 // the message's NumDelivered

	d, err := s.Send(context.Background(), srv.URL, secret, run)
	switch {
	case err == nil:
		// msg.Ack(); record d.Result if there is one.
		fmt.Println(d.Status, d.Result.Status, string(d.Result.Output))
	case push.IsPermanent(err):
		// msg.TermWithReason(err.Error())
		fmt.Println("giving up:", err)
	default:
		// msg.NakWithDelay(push.Delay(err, attempt))
		fmt.Println("retrying in", push.Delay(err, attempt))
	}
	// Output: 200 succeeded {"labels":["bug"]}
}
