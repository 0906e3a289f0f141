package accounts

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/store"
)

// errFlightAborted is the result waiters see if the function of a flight
// panicked.
var errFlightAborted = errors.New("accounts: token refresh aborted")

// flightResult is what one refresh flight yields.
type flightResult struct {
	tok *oauth2.Token
	acc store.Account
}

type flightCall struct {
	done chan struct{}
	res  flightResult
	err  error
}

// flightGroup lets one caller per key do the work while the other callers
// for that key wait for its result (an in-process singleflight). Unlike
// golang.org/x/sync/singleflight, a waiter stops waiting when its own
// context ends; the first caller runs the function itself, so no goroutine
// is started.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flightCall
}

// do runs fn for key unless a run for key is already under way, in which
// case it waits for that run's result (or for ctx). shared reports that the
// result came from another caller's run.
func (g *flightGroup) do(ctx context.Context, key string, fn func() (flightResult, error)) (res flightResult, shared bool, err error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = make(map[string]*flightCall)
	}
	if c, ok := g.calls[key]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.res, true, c.err
		case <-ctx.Done():
			return flightResult{}, true, fmt.Errorf("accounts: wait for token refresh: %w", ctx.Err())
		}
	}
	c := &flightCall{done: make(chan struct{}), err: errFlightAborted}
	g.calls[key] = c
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.calls, key)
		g.mu.Unlock()
		close(c.done)
	}()
	c.res, c.err = fn()
	return c.res, false, c.err
}
