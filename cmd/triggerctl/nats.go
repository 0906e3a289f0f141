package main

import (
	"context"
	"fmt"
	"time"

	"github.com/triggerd/triggerd/bus"
)

// defaultNATSURL is where triggerd's embedded NATS listens by default.
const defaultNATSURL = "nats://127.0.0.1:4222"

// connectBus connects to triggerd's NATS without changing its streams.
func connectBus(ctx context.Context, url string) (*bus.Bus, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, url, bus.Options{Name: "triggerctl", SkipProvision: true})
	if err != nil {
		return nil, fmt.Errorf("%w (is triggerd running? point --nats-url or TRIGGERD_NATS_URL at its NATS)", err)
	}
	return b, nil
}
