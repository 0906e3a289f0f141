package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// maxBulk bounds the deliveries one "Redeliver filtered" redelivers.
const maxBulk = 200

// filteredDeliveries returns the distinct archived deliveries (by key)
// the filter in q selects, at most maxBulk, and whether there were more,
// and how many records it left out for not being archived.
func (c *Console) filteredDeliveries(r *http.Request, tid string, q url.Values) (ds []store.DeliveryRecord, more bool, unarchived int, err error) {
	f := store.DeliveryFilter{TenantID: tid, Answer: q.Get("answer"), Event: strings.TrimSpace(q.Get("event")),
		DeliveryID: strings.TrimSpace(q.Get("id")), Limit: 1000}
	if f.Since, err = sinceOf(c.o.Now(), q.Get("range")); err != nil {
		return nil, false, 0, err
	}
	if f.Answer == "" && f.Event == "" && f.DeliveryID == "" && f.Since.IsZero() {
		return nil, false, 0, badRequest("choose filters first: Redeliver filtered redelivers what the filters select")
	}
	seen := map[string]bool{}
	for page := 0; page < 5; page++ {
		recs, err := c.o.Records.ListDeliveries(r.Context(), f)
		if err != nil {
			return nil, false, 0, err
		}
		for _, d := range recs {
			switch {
			case d.Key == "":
				unarchived++
			case seen[d.Connector+" "+d.Key]:
			case len(ds) == maxBulk:
				return ds, true, unarchived, nil
			default:
				seen[d.Connector+" "+d.Key] = true
				ds = append(ds, d)
			}
		}
		if len(recs) < f.Limit {
			break
		}
		f.Before = recs[len(recs)-1].ID
	}
	return ds, false, unarchived, nil
}

func (c *Console) redeliverFilteredPage(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if c.o.Redeliver == nil || c.o.Archive == nil {
		return badRequest("redelivery is not available on this server")
	}
	q := r.URL.Query()
	ds, more, unarchived, err := c.filteredDeliveries(r, tid, q)
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "redeliverfiltered", "Redeliver filtered", map[string]any{
		"Count": len(ds), "More": more, "Max": maxBulk, "Unarchived": unarchived, "Q": q,
		"Back": withQuery(Prefix+"deliveries", q),
	})
	return nil
}

func (c *Console) redeliverFiltered(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if c.o.Redeliver == nil || c.o.Archive == nil {
		return badRequest("redelivery is not available on this server")
	}
	if err := r.ParseForm(); err != nil {
		return badRequest("the form could not be read")
	}
	ds, _, _, err := c.filteredDeliveries(r, tid, r.PostForm)
	if err != nil {
		return err
	}
	if fmt.Sprint(len(ds)) != r.PostForm.Get("count") {
		return badRequest("the filtered set changed since it was counted (%s then, %d now): go back and confirm again", r.PostForm.Get("count"), len(ds))
	}
	asNew := r.PostForm.Get("as_new") == "true"
	answers := map[string]int{}
	failed := 0
	for _, d := range ds {
		capture, err := c.o.Archive.Delivery(r.Context(), triggers.Connector(d.Connector), d.Key)
		if errors.Is(err, bus.ErrNotArchived) || (err == nil && capture.Scope != nil && capture.Scope.Tenant != tid) {
			failed++
			continue
		} else if err != nil {
			return err
		}
		rec, err := c.o.Redeliver.Redeliver(r.Context(), tid, capture, asNew)
		if err != nil {
			c.log.Warn().Err(err).Str("delivery", d.Key).Msg("redelivering a filtered delivery")
			failed++
			continue
		}
		answers[rec.Answer]++
	}
	var parts []string
	for _, name := range []string{store.AnswerAccepted, store.AnswerDuplicate, store.AnswerIgnored} {
		if n := answers[name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, name))
		}
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d could not be redelivered (see the log)", failed))
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing to redeliver")
	}
	redirect(w, r, Prefix+"deliveries", "Redelivered the filtered set: "+strings.Join(parts, ", ")+".")
	return nil
}
