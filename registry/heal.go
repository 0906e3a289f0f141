package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/store"
)

// Healing. GitHub never sends a failed delivery again by itself: while
// triggerd cannot be reached, or answers 503, every event GitHub tries to
// deliver is lost unless someone redelivers it by hand. After a hook is
// reconciled, heal reads the attempts GitHub made to it since the hook's
// HealedThrough and asks GitHub to redeliver each event whose attempts all
// failed in a way another attempt could fix (no answer, 408, 429, 5xx).
// A redelivery carries the same X-GitHub-Delivery, so ingest takes an
// event it had accepted after all (answering too late for GitHub) as a
// duplicate.
const (
	// DefaultMaxRedeliveries is how many redeliveries heal asks for per
	// event before it gives up on it.
	DefaultMaxRedeliveries = 3
	// DefaultHealBatch is how many redeliveries heal asks for per hook and
	// pass; the rest wait for the next pass (GitHub limits how fast one
	// token may write).
	DefaultHealBatch = 100
	// healOverlap is read again below HealedThrough on every pass: an
	// attempt in flight when a pass listed the deliveries shows up later
	// with an earlier time (GitHub gives up on a receiver after 10 s).
	healOverlap = 5 * time.Minute
	// healMargin keeps heal clear of GitHub's 3-day redelivery limit.
	healMargin = time.Hour
	// redeliveryGrace is how long after asking for a redelivery heal
	// waits for its attempt to be listed before it may ask again: GitHub
	// lists an attempt once it ends, and gives up on a receiver after
	// 10 s. Without it a pass soon after another (a short
	// --reconcile-interval, a slow receiver) asked twice for one event.
	redeliveryGrace = 30 * time.Second
)

// redeliveries remembers the redeliveries heal asked for lately, by hook
// and delivery guid, so that the next passes do not ask again while the
// attempt is under way.
type redeliveries struct {
	mu    sync.Mutex
	asked map[string]time.Time
}

func redeliveryKey(hookID, guid string) string { return hookID + "/" + guid }

// pending reports whether a redelivery of key was asked for less than
// redeliveryGrace before now, forgetting those asked for earlier.
func (r *redeliveries) pending(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, at := range r.asked {
		if now.Sub(at) >= redeliveryGrace {
			delete(r.asked, k)
		}
	}
	_, ok := r.asked[key]
	return ok
}

// add records that a redelivery of key was asked for at now.
func (r *redeliveries) add(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asked == nil {
		r.asked = map[string]time.Time{}
	}
	r.asked[key] = now
}

// healReport says what heal did for one hook.
type healReport struct {
	// redelivered events were asked to be sent again.
	redelivered int
	// abandoned events failed in a way another attempt would not fix (the
	// receiver refused them), failed MaxRedeliveries redeliveries, or grew
	// too old to redeliver.
	abandoned int
}

// pendingEvent is one event's attempts, newest first.
type pendingEvent struct {
	guid     string
	attempts []codehost.HookDelivery
}

func (e pendingEvent) first() time.Time { return e.attempts[len(e.attempts)-1].DeliveredAt }

// heal redelivers h's failed events (see above) and moves h's
// HealedThrough to the oldest event still being healed, or to now. Only
// code-hosting hooks registered upstream are healed.
func (r *Registry) heal(ctx context.Context, api HookAPI, h store.Hook) (healReport, error) {
	var rep healReport
	if h.ExternalID == 0 {
		return rep, nil
	}
	now := r.o.Now()
	oldest := now.Add(-codehost.RedeliveryWindow + healMargin)
	from := h.HealedThrough
	if from.IsZero() {
		from = h.CreatedAt
	}
	// Read back to HealedThrough as far as GitHub lists attempts, past
	// oldest: an event held over since then (a full batch, a failed
	// redelivery) is then seen once more, and given up on and counted
	// rather than dropped unseen.
	if listed := now.Add(-codehost.RedeliveryWindow); from.Before(listed) {
		from = listed
	}
	from = from.Add(-healOverlap)
	ds, err := api.Deliveries(ctx, target(h), h.ExternalID, from)
	if err != nil {
		return rep, fmt.Errorf("read the deliveries of hook %s: %w", h.ID, err)
	}
	if ds.Truncated && len(ds.Attempts) > 0 {
		r.log.Warn().Str("hook", h.ID).Str("target", h.Target).
			Time("not_before", ds.Attempts[len(ds.Attempts)-1].DeliveredAt).
			Msg("too many webhook deliveries since the last heal: older ones were not checked for failures")
	}
	events := map[string]*pendingEvent{}
	for _, d := range ds.Attempts {
		e := events[d.GUID]
		if e == nil {
			e = &pendingEvent{guid: d.GUID}
			events[d.GUID] = e
		}
		e.attempts = append(e.attempts, d)
	}
	var failed []pendingEvent
	for _, e := range events {
		if !slices.ContainsFunc(e.attempts, codehost.HookDelivery.Delivered) {
			failed = append(failed, *e)
		}
	}
	// Oldest first, so redeliveries arrive roughly in the original order.
	slices.SortFunc(failed, func(a, b pendingEvent) int {
		return cmp.Or(a.first().Compare(b.first()), cmp.Compare(a.attempts[len(a.attempts)-1].ID, b.attempts[len(b.attempts)-1].ID))
	})
	through := now
	var errs []error
	for _, e := range failed {
		latest := e.attempts[0]
		if e.first().Before(from) {
			// Seen partly: its first attempts are older than this pass
			// reads, so an earlier pass settled it.
			continue
		}
		// An event given up on is reported by the pass that first sees
		// its last attempt; later passes that read it again skip it.
		// GitHub's times are whole seconds: an attempt in the second of
		// the last read may be reported twice, never not at all.
		judged := latest.DeliveredAt.Before(h.HealedAt.Truncate(time.Second))
		switch {
		case judged && (!latest.Retryable() || len(e.attempts) > r.o.MaxRedeliveries):
			continue
		case !latest.Retryable():
			rep.abandoned++
			r.log.Warn().Str("hook", h.ID).Str("target", h.Target).Str("delivery", e.guid).Str("event", latest.Event).
				Int("status", latest.StatusCode).Msg("webhook delivery refused by its receiver (triggerd, or a proxy in front of it); not redelivering it: see triggerd_ingest_deliveries_total for why")
			continue
		case len(e.attempts) > r.o.MaxRedeliveries, latest.DeliveredAt.Before(oldest):
			rep.abandoned++
			r.log.Warn().Str("hook", h.ID).Str("target", h.Target).Str("delivery", e.guid).Str("event", latest.Event).
				Int("attempts", len(e.attempts)).Str("status", latest.Status).
				Msg("webhook delivery still failing; giving up on redelivering it")
			continue
		}
		key := redeliveryKey(h.ID, e.guid)
		if rep.redelivered == r.o.HealBatch || len(errs) > 0 || r.redelivering.pending(key, now) {
			// Held for the next pass, or its redelivery is under way.
			through = earlier(through, e.first())
			continue
		}
		err := api.Redeliver(ctx, target(h), h.ExternalID, latest.ID)
		switch {
		case errors.Is(err, codehost.ErrHookNotFound):
			// GitHub no longer has the attempt (or the hook).
			rep.abandoned++
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("redeliver %s: %w", e.guid, err))
		default:
			rep.redelivered++
			r.redelivering.add(key, now)
		}
		// Watched until an attempt succeeds or it is given up.
		through = earlier(through, e.first())
	}
	if err := r.setHealed(ctx, h, through, now); err != nil {
		errs = append(errs, err)
	}
	r.metrics.redeliveries.WithLabelValues("requested").Add(float64(rep.redelivered))
	r.metrics.redeliveries.WithLabelValues("abandoned").Add(float64(rep.abandoned))
	if rep.redelivered > 0 {
		r.log.Info().Str("hook", h.ID).Str("target", h.Target).Int("redelivered", rep.redelivered).
			Msg("asked GitHub to redeliver failed webhook deliveries")
	}
	return rep, errors.Join(errs...)
}

// setHealed records on h how far heal has settled its deliveries, and
// when it read them. h is the hook as heal read it; a write that finds it
// changed since reads it again. A hook deleted meanwhile needs nothing.
func (r *Registry) setHealed(ctx context.Context, h store.Hook, through, at time.Time) error {
	for {
		if through.After(h.HealedThrough) {
			h.HealedThrough = through
		}
		h.HealedAt = at
		_, err := r.o.Store.UpdateHook(ctx, h)
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound):
			return nil
		case !errors.Is(err, store.ErrConflict):
			return fmt.Errorf("store hook %s: %w", h.ID, err)
		}
		id := h.ID
		if h, err = r.o.Store.GetHook(ctx, id); errors.Is(err, store.ErrNotFound) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reread hook %s: %w", id, err)
		}
	}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
