package fakecodehost

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// redeliveryWindow is how old an attempt may be and still be redelivered:
// GitHub redelivers the past 3 days only.
const redeliveryWindow = 72 * time.Hour

// deliveryStatus is GitHub's summary of an attempt.
func deliveryStatus(d Delivery) string {
	switch {
	case d.StatusCode/100 == 2:
		return "OK"
	case d.StatusCode != 0:
		return "Invalid HTTP Response: " + strconv.Itoa(d.StatusCode)
	case strings.Contains(d.Error, "deadline exceeded"), strings.Contains(d.Error, "Timeout"):
		return "timed out"
	default:
		return "failed to connect to host"
	}
}

// deliveryItem is GitHub's hook-delivery-item for d.
func deliveryItem(d Delivery) M {
	var repoID any
	if d.TargetType == TargetRepository {
		repoID = d.TargetID
	}
	return M{
		"id": d.AttemptID, "guid": d.ID, "delivered_at": ts(d.At), "redelivery": d.Redelivery,
		"duration": d.Duration.Seconds(), "status": deliveryStatus(d), "status_code": d.StatusCode,
		"event": d.Event, "action": nullable(d.Action), "installation_id": nil, "repository_id": repoID,
		"throttled_at": nil,
	}
}

// listHookDeliveries answers GET .../hooks/{hook_id}/deliveries: the
// hook's finished attempts, newest first, per_page (30, at most 100) at a
// time from cursor, with the next page's cursor in Link rel="next".
// status (success: 2xx and 3xx; failure: anything else, no answer
// included) and redelivery filter them.
func (c *call) listHookDeliveries() *reply {
	_, h, rep := c.hookParam()
	if rep != nil {
		return rep
	}
	q := c.r.URL.Query()
	per := c.perPage(30, 100)
	from := int64(-1)
	if cur := q.Get("cursor"); cur != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(cur, "v1_"), 10, 64)
		if !strings.HasPrefix(cur, "v1_") || err != nil {
			return errorf(http.StatusBadRequest, "Invalid cursor")
		}
		from = n
	}
	status, redelivery := q.Get("status"), q.Get("redelivery")
	switch {
	case status != "" && status != "success" && status != "failure":
		return invalid("HookDelivery", "status", "invalid")
	case redelivery != "" && redelivery != "true" && redelivery != "false":
		return invalid("HookDelivery", "redelivery", "invalid")
	}
	// Newest attempt first, by id: the log is in the order attempts
	// finished, which concurrent ones do out of order.
	var mine []Delivery
	for _, d := range c.s.deliveries {
		if d.HookID == h.id {
			mine = append(mine, d)
		}
	}
	slices.SortFunc(mine, func(a, b Delivery) int { return cmp.Compare(b.AttemptID, a.AttemptID) })
	var items []any
	next := int64(0)
	for _, d := range mine {
		if from >= 0 && d.AttemptID > from {
			continue
		}
		if ok := d.StatusCode >= 200 && d.StatusCode < 400; (status == "success" && !ok) || (status == "failure" && ok) {
			continue
		}
		if redelivery != "" && strconv.FormatBool(d.Redelivery) != redelivery {
			continue
		}
		if len(items) == per {
			next = d.AttemptID
			break
		}
		items = append(items, deliveryItem(d))
	}
	if items == nil {
		items = []any{}
	}
	r := okBody(items)
	if next != 0 {
		q.Set("per_page", strconv.Itoa(per))
		q.Set("cursor", "v1_"+strconv.FormatInt(next, 10))
		r.header = http.Header{"Link": {fmt.Sprintf(`<%s%s?%s>; rel="next"`, c.base, c.r.URL.EscapedPath(), q.Encode())}}
	}
	return r
}

// redeliverHookDelivery answers POST .../deliveries/{delivery_id}/attempts:
// 202, and the attempt's event sent again to the hook as it is configured
// now, with the same X-GitHub-Delivery and redelivery true. An unknown
// attempt is 404; one older than redeliveryWindow 422.
func (c *call) redeliverHookDelivery() *reply {
	sc, h, rep := c.hookParam()
	if rep != nil {
		return rep
	}
	id, err := strconv.ParseInt(c.p["delivery_id"], 10, 64)
	if err != nil {
		return notFound()
	}
	for i := len(c.s.deliveries) - 1; i >= 0; i-- {
		d := c.s.deliveries[i]
		if d.HookID != h.id || d.AttemptID != id {
			continue
		}
		if c.now.Sub(d.At) > redeliveryWindow {
			return validation(M{"resource": "HookDelivery", "code": "custom",
				"message": "Deliveries older than 3 days cannot be redelivered"})
		}
		o := newOutgoing(hookAt{sc, h}, d.Event, d.Payload, c.now)
		o.id, o.redelivery = d.ID, true
		c.s.launchLocked(o)
		return &reply{status: http.StatusAccepted, body: M{}}
	}
	return notFound()
}

// hookDeliveryRoutes are the deliveries API's routes below a hooks
// collection (base).
func hookDeliveryRoutes(base string) []row {
	return []row{
		{Route("GET " + base + "/{hook_id}/deliveries"), (*call).listHookDeliveries},
		{Route("POST " + base + "/{hook_id}/deliveries/{delivery_id}/attempts"), (*call).redeliverHookDelivery},
	}
}
