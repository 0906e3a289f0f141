package bus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxReplicas is the most replicas JetStream keeps of a stream.
const MaxReplicas = 5

// ErrReplicas reports a replica count the NATS cluster cannot hold.
var ErrReplicas = errors.New("more replicas than the NATS cluster has JetStream servers")

// clusterSize returns how many JetStream servers the cluster triggerd is
// connected to has: the embedded server's cluster as its routes name it
// (Options.Embedded), else 1 for a server outside any cluster, else the
// distinct servers the connection knows of (those given in the URL and
// those the server gossips in its INFO: every member with a client port).
func (b *Bus) clusterSize() int {
	if e := b.opts.Embedded; e != nil && e.ClusterSize() > 0 {
		return e.ClusterSize()
	}
	if b.nc.ConnectedClusterName() == "" {
		return 1
	}
	seen := map[string]bool{}
	for _, s := range b.nc.Servers() {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			seen[u.Host] = true
		}
	}
	return max(len(seen), 1)
}

// chooseReplicas sets b.replicas from Options.Replicas (0: 3 on a cluster
// of three or more JetStream servers, else 1), and refuses a count above
// the cluster's size.
func (b *Bus) chooseReplicas() error {
	size := b.clusterSize()
	n := b.opts.Replicas
	if n == 0 {
		n = 1
		if size >= 3 {
			n = 3
		}
	}
	flagName := b.replicasFlag()
	switch {
	case n < 1 || n > MaxReplicas:
		return fmt.Errorf("%s %d: %w: JetStream keeps 1 to %d replicas", flagName, n, ErrReplicas, MaxReplicas)
	case n > size:
		return fmt.Errorf("%s %d: %w (the NATS at %s has %d); lower %s, or add servers to the cluster", flagName, n, ErrReplicas, b.nc.ConnectedUrlRedacted(), size, flagName)
	}
	b.replicas = n
	return nil
}

// replicasFlag names the setting Replicas came from, for errors.
func (b *Bus) replicasFlag() string {
	if b.opts.ReplicasFlag == "" {
		return "replicas"
	}
	return b.opts.ReplicasFlag
}

// Replicas returns how many replicas the streams triggerd creates are
// given (those an operator gave more keep theirs).
func (b *Bus) Replicas() int { return b.replicas }

// ensureStream creates cfg's stream, or updates it to cfg, with
// b.replicas replicas, but never fewer than it has: an operator who raised
// a stream's replicas keeps them (OnReplicasKept is told), and placement
// set by hand stays.
func (b *Bus) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var err error
	if cfg.Replicas, cfg.Placement, err = b.replicasFor(ctx, cfg.Name, cfg.Placement); err != nil {
		return nil, fmt.Errorf("provision stream %s: %w", cfg.Name, err)
	}
	s, err := retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) { return b.js.CreateOrUpdateStream(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("provision stream %s with %d replicas: %w", cfg.Name, cfg.Replicas, b.replicasError(err))
	}
	return s, nil
}

// ensureObjectStore is ensureStream for an object store bucket.
func (b *Bus) ensureObjectStore(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	var err error
	if cfg.Replicas, cfg.Placement, err = b.replicasFor(ctx, "OBJ_"+cfg.Bucket, cfg.Placement); err != nil {
		return nil, fmt.Errorf("provision object store %s: %w", cfg.Bucket, err)
	}
	os, err := retryJS(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return b.js.CreateOrUpdateObjectStore(ctx, cfg)
	})
	if err != nil {
		return nil, fmt.Errorf("provision object store %s with %d replicas: %w", cfg.Bucket, cfg.Replicas, b.replicasError(err))
	}
	return os, nil
}

// ensureKeyValue is ensureStream for a key-value bucket.
func (b *Bus) ensureKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var err error
	if cfg.Replicas, cfg.Placement, err = b.replicasFor(ctx, "KV_"+cfg.Bucket, cfg.Placement); err != nil {
		return nil, fmt.Errorf("provision bucket %s: %w", cfg.Bucket, err)
	}
	kv, err := retryJS(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return b.js.CreateOrUpdateKeyValue(ctx, cfg)
	})
	if err != nil {
		return nil, fmt.Errorf("provision bucket %s with %d replicas: %w", cfg.Bucket, cfg.Replicas, b.replicasError(err))
	}
	return kv, nil
}

// replicasFor returns the replicas and placement stream is to be given:
// b.replicas and placement for a stream that does not exist yet, else
// keepReplicas of what it has, and its own placement unless placement is
// set.
func (b *Bus) replicasFor(ctx context.Context, stream string, placement *jetstream.Placement) (int, *jetstream.Placement, error) {
	existing, err := retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) { return b.js.Stream(ctx, stream) })
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return b.replicas, placement, nil
	case err != nil:
		return 0, nil, err
	}
	have := existing.CachedInfo().Config
	if placement == nil {
		placement = have.Placement
	}
	return b.keepReplicas(stream, have.Replicas), placement, nil
}

// keepReplicas returns the replicas a stream that has have of them is
// given: b.replicas, or have when that is more.
func (b *Bus) keepReplicas(stream string, have int) int {
	if have <= b.replicas {
		return b.replicas
	}
	if b.opts.OnReplicasKept != nil {
		b.opts.OnReplicasKept(stream, have, b.replicas)
	}
	return have
}

// replicasError adds to a refusal for want of servers what to do about it.
func (b *Bus) replicasError(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case codeInsufficientResources, codeNoPeers, codeReplicasNotSupported:
			return fmt.Errorf("%w: %w; lower %s or add JetStream servers", ErrReplicas, err, b.replicasFlag())
		}
	}
	return err
}

// JetStream API error codes that pass by themselves in a cluster.
const (
	codeClusterNotAvail  = 10008 // JetStream system temporarily unavailable (no meta leader)
	codeClusterNotLeader = 10009 // JetStream cluster can not handle request
	codeStreamOffline    = 10118 // stream is offline
)

// JetStream API error codes of a replica count the cluster cannot hold.
const (
	codeInsufficientResources = 10023 // insufficient resources
	codeNoPeers               = 10005 // no suitable peers for placement
	codeReplicasNotSupported  = 10074 // replicas > 1 not supported in non-clustered mode
)

// transientJS reports whether err, from a JetStream API request, says that
// what was asked is being elected a leader or not yet reachable in a
// cluster: a stream whose replicas just changed answers "no responders"
// or nothing for a few seconds.
func transientJS(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case codeClusterNotAvail, codeClusterNotLeader, codeStreamOffline:
			return true
		case codeNoPeers:
			// A peer the meta leader has not heard from lately (one
			// restarting, or just after many stream changes) is offline
			// to it for a moment; too few servers is not transient, and
			// chooseReplicas refuses it before asking.
			return strings.Contains(apiErr.Description, "offline")
		}
		return false
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// jsAttempt bounds one JetStream API request of retryJS, so that a request
// no one answers leaves time to try again within the caller's deadline.
const jsAttempt = 5 * time.Second

// retryJS calls f until it returns an error other than a transient one
// (transientJS), or ctx ends; it then returns the last error. Each call
// gets at most jsAttempt.
func retryJS[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	return retryJSEvery(ctx, jsAttempt, f)
}

// retryJSEvery is retryJS with each call bounded by attempt.
func retryJSEvery[T any](ctx context.Context, attempt time.Duration, f func(context.Context) (T, error)) (T, error) {
	wait := 100 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		v, err := f(actx)
		cancel()

		if err == nil || !transientJS(err) || ctx.Err() != nil {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w (waited for the NATS cluster: %w)", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}
