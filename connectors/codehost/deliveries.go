package codehost

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// RedeliveryWindow is how far back GitHub redelivers: a delivery attempt
// older than this can be listed but no longer sent again.
const RedeliveryWindow = 72 * time.Hour

// maxDeliveryPages bounds one Deliveries call: 100 pages of 100 attempts.
// A hook that received more since the cutoff is read to that depth only,
// and the call says so with Truncated.
const maxDeliveryPages = 100

// HookDelivery is one attempt GitHub made to deliver an event to a hook,
// as its deliveries API lists it.
type HookDelivery struct {
	// ID is the attempt's own id: what Redeliver takes.
	ID int64
	// GUID is the X-GitHub-Delivery header, shared by every attempt for
	// the same event (and by every hook it went to).
	GUID        string
	DeliveredAt time.Time
	Redelivery  bool
	// StatusCode is the receiver's answer; 0 when there was none (the
	// connection failed or GitHub's 10 s ran out). Status is GitHub's
	// summary ("OK", "Invalid HTTP Response: 503", "timed out", ...).
	StatusCode    int
	Status        string
	Event, Action string
}

// Delivered reports whether the receiver accepted the attempt with a 2xx.
// GitHub's own "success" filter counts 3xx too, but a redirect is not a
// receiver taking the event.
func (d HookDelivery) Delivered() bool { return d.StatusCode/100 == 2 }

// Retryable reports whether sending the event again could succeed: the
// receiver did not answer, timed out (408), was busy (429) or failed
// (5xx). Other answers (400, 401, 413, ...) would be given again.
func (d HookDelivery) Retryable() bool {
	switch {
	case d.StatusCode == 0, d.StatusCode == http.StatusRequestTimeout, d.StatusCode == http.StatusTooManyRequests:
		return true
	default:
		return d.StatusCode >= 500
	}
}

// hookDeliveryJSON is GitHub's hook-delivery-item.
type hookDeliveryJSON struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      *string   `json:"action"`
}

// Deliveries is what Deliveries read.
type Deliveries struct {
	// Attempts are newest first, back to the cutoff.
	Attempts []HookDelivery
	// Truncated is true when the pages ran out (maxDeliveryPages) before
	// the cutoff: attempts older than the last one were not read.
	Truncated bool
}

// Deliveries lists the delivery attempts of hook id of t, newest first,
// back to the first one older than since (GitHub keeps about 30 days), by
// following the cursor in GitHub's Link rel="next". A 404 is
// ErrHookNotFound.
//
// GitHub API docs: https://docs.github.com/rest/repos/webhooks#list-deliveries-for-a-repository-webhook
// and https://docs.github.com/rest/orgs/webhooks#list-deliveries-for-an-organization-webhook
func (h Hooks) Deliveries(ctx context.Context, t HookTarget, id int64, since time.Time) (Deliveries, error) {
	what := fmt.Sprintf("list the deliveries of webhook %d of %s", id, t)
	if err := t.check(); err != nil {
		return Deliveries{}, wrapHook(what, err)
	}
	c, err := h.client()
	if err != nil {
		return Deliveries{}, wrapHook(what, err)
	}
	var out Deliveries
	out.Truncated, err = hookPages(ctx, h, c, what, "webhook deliveries", t.path()+"/"+strconv.FormatInt(id, 10)+"/deliveries", nil,
		ErrHookNotFound, maxDeliveryPages, func(page []hookDeliveryJSON) bool {
			for _, j := range page {
				d := HookDelivery{ID: j.ID, GUID: j.GUID, DeliveredAt: j.DeliveredAt, Redelivery: j.Redelivery,
					StatusCode: j.StatusCode, Status: j.Status, Event: j.Event}
				if j.Action != nil {
					d.Action = *j.Action
				}
				out.Attempts = append(out.Attempts, d)
			}
			return len(page) == 0 || !page[len(page)-1].DeliveredAt.Before(since)
		})
	if err != nil {
		return Deliveries{}, err
	}
	return out, nil
}

// Redeliver asks GitHub to send delivery attempt deliveryID of hook id
// again, with the same X-GitHub-Delivery; GitHub answers 202 and sends it
// shortly after. A 404 (no such hook or attempt) is ErrHookNotFound.
//
// GitHub API docs: https://docs.github.com/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook
// and https://docs.github.com/rest/orgs/webhooks#redeliver-a-delivery-for-an-organization-webhook
func (h Hooks) Redeliver(ctx context.Context, t HookTarget, id, deliveryID int64) error {
	what := fmt.Sprintf("redeliver delivery %d of webhook %d of %s", deliveryID, id, t)
	if err := t.check(); err != nil {
		return wrapHook(what, err)
	}
	c, err := h.client()
	if err != nil {
		return wrapHook(what, err)
	}
	u := c.url(t.path()+"/"+strconv.FormatInt(id, 10)+"/deliveries/"+strconv.FormatInt(deliveryID, 10)+"/attempts", nil)
	a, err := h.exchange(ctx, c, http.MethodPost, u, nil, nil)
	if err != nil {
		return h.fail(c, what, http.MethodPost, a, err, ErrHookNotFound, "")
	}
	return nil
}
