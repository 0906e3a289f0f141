package registry

import (
	"context"
	"errors"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// ActivityStore is what an ActivityRecorder writes to.
type ActivityStore interface {
	AddHookActivity(ctx context.Context, id string, a store.HookActivity) error
}

// Defaults for ActivityOptions.
const (
	DefaultActivityInterval = 2 * time.Second
	// DefaultActivityMaxHooks bounds the hooks one interval's activity is
	// held for: deliveries to made-up hook ids cost memory until the
	// flush finds those ids absent, and past the bound they are not
	// counted.
	DefaultActivityMaxHooks = 10_000
	// maxRefusalMessage bounds a refusal's message as stored.
	maxRefusalMessage = 1000
)

// ActivityOptions configures an ActivityRecorder; zero values take the
// defaults.
type ActivityOptions struct {
	Interval   time.Duration
	MaxHooks   int
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
}

// ActivityRecorder collects what became of the deliveries to tenants'
// hooks (ingest.Activity) and adds it to each hook's activity in the
// store every Interval, so that a hook's owner can see that deliveries
// arrive, or why they are refused, without the store being written for
// every delivery. Several processes add theirs to the same records.
type ActivityRecorder struct {
	st       ActivityStore
	interval time.Duration
	maxHooks int
	log      zerolog.Logger
	dropped  prometheus.Counter

	mu      sync.Mutex
	pending map[string]store.HookActivity
}

// NewActivityRecorder returns a recorder writing to st; Run flushes it.
func NewActivityRecorder(st ActivityStore, o ActivityOptions) (*ActivityRecorder, error) {
	if o.Interval <= 0 {
		o.Interval = DefaultActivityInterval
	}
	if o.MaxHooks <= 0 {
		o.MaxHooks = DefaultActivityMaxHooks
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "triggerd_hook_activity_dropped_total",
		Help: "Deliveries to hooks left out of the hooks' activity because too many hooks had activity pending.",
	})
	if o.Registerer != nil {
		if err := o.Registerer.Register(dropped); err != nil {
			return nil, err
		}
	}
	return &ActivityRecorder{
		st: st, interval: o.Interval, maxHooks: o.MaxHooks, dropped: dropped,
		log:     o.Logger.With().Str("component", "registry").Logger(),
		pending: map[string]store.HookActivity{},
	}, nil
}

// Accepted records a delivery to hook that was taken (or was a
// duplicate of one that was).
func (r *ActivityRecorder) Accepted(_ triggers.Connector, hook string, at time.Time) {
	r.add(hook, store.HookActivity{LastAcceptedAt: at})
}

// Refused records a delivery to hook that was refused with status, code
// and message.
func (r *ActivityRecorder) Refused(_ triggers.Connector, hook string, at time.Time, status int, code, message string) {
	r.add(hook, store.HookActivity{Refused: 1, LastRefusal: &store.HookRefusal{
		At: at, Status: status, Code: code, Message: truncate(message, maxRefusalMessage),
	}})
}

// add merges a into hook's pending activity, unless MaxHooks other hooks
// have some pending.
func (r *ActivityRecorder) add(hook string, a store.HookActivity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[hook]
	if !ok && len(r.pending) >= r.maxHooks {
		r.dropped.Inc()
		return
	}
	p.Add(a)
	r.pending[hook] = p
}

// Flush adds the activity collected so far to the store. A hook the store
// no longer has is forgotten; activity that could not be written is kept
// for the next Flush, unless newer activity has filled the bound since.
func (r *ActivityRecorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	batch := r.pending
	r.pending = make(map[string]store.HookActivity, len(batch))
	r.mu.Unlock()
	var errs []error
	for hook, a := range batch {
		err := r.st.AddHookActivity(ctx, hook, a)
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound):
			continue
		}
		errs = append(errs, err)
		r.add(hook, a)
	}
	return errors.Join(errs...)
}

// Run flushes every Interval until ctx ends, then once more within
// finalTimeout, so that a process stopping keeps what it saw last.
func (r *ActivityRecorder) Run(ctx context.Context, finalTimeout time.Duration) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), finalTimeout)
			defer cancel()
			if err := r.Flush(final); err != nil {
				r.log.Warn().Err(err).Msg("the hooks' last activity could not be stored before stopping")
			}
			return
		case <-t.C:
			if err := r.Flush(ctx); err != nil {
				r.log.Warn().Err(err).Msg("storing the hooks' activity failed; it is tried again at the next flush")
			}
		}
	}
}

// HookActivity returns what reached hook id lately.
func (r *Registry) HookActivity(ctx context.Context, id string) (store.HookActivity, error) {
	return r.o.Store.GetHookActivity(ctx, id)
}

// truncate shortens s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
