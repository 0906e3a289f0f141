package store

import (
	"context"
	"time"
)

// FlowState is the server side of one OAuth connect flow, bound to the
// tenant that started it. It is single-use and short-lived.
type FlowState struct {
	// State is the random value sent as the OAuth "state" parameter.
	State     string `json:"state"`
	TenantID  string `json:"tenant_id"`
	Connector string `json:"connector"`
	// SealedVerifier is the PKCE code verifier, sealed like tokens.
	SealedVerifier []byte `json:"sealed_verifier,omitempty"`
	// ReturnTo is where the user goes after the callback, if anywhere.
	ReturnTo  string    `json:"return_to,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// FlowStates stores OAuth flow states.
type FlowStates interface {
	// PutFlowState stores a state until its ExpiresAt.
	PutFlowState(ctx context.Context, f FlowState) error
	// TakeFlowState returns and deletes the state atomically: a second take
	// of the same state, or a take after it expired, is ErrNotFound.
	TakeFlowState(ctx context.Context, state string) (FlowState, error)
}
