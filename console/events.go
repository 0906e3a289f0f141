package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/triggerd/triggerd/store"
)

// eventRow is one event in the Events list: events come from the
// delivery log, each under the delivery that produced it.
type eventRow struct {
	ID, Kind   string
	Summary    string
	Delivery   store.DeliveryRecord
	ReceivedAt time.Time
}

func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	kind := strings.TrimSpace(q.Get("kind"))
	f := store.DeliveryFilter{TenantID: tid, Answer: store.AnswerAccepted, Limit: pageSize + 1}
	if f.Since, err = sinceOf(c.o.Now(), q.Get("range")); err != nil {
		return err
	}
	f.Before = q.Get("before")
	ds, err := c.o.Records.ListDeliveries(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(ds) > pageSize {
		ds = ds[:pageSize]
		last := ds[len(ds)-1]
		next = withQuery("/console/events", q, "before", last.ID)
	}
	var rows []eventRow
	for _, d := range ds {
		for _, e := range d.Events {
			if kind == "" || e.Kind == kind {
				rows = append(rows, eventRow{ID: e.ID, Kind: e.Kind, Summary: e.Summary, Delivery: d, ReceivedAt: d.ReceivedAt})
			}
		}
	}
	c.render(w, r, s, http.StatusOK, "events", "Events", map[string]any{
		"Events": rows, "Q": q, "Ranges": ranges, "Next": next, "Paged": q.Get("before") != "",
		"First": withQuery("/console/events", q, "before", ""), "Filtered": kind != "" || !f.Since.IsZero(),
	})
	return nil
}

func (c *Console) event(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	data := map[string]any{"ID": id, "CanReplay": c.o.Replayer != nil}
	rec, err := c.o.Records.GetEvent(r.Context(), tid, id)
	switch {
	case err == nil:
		data["Record"] = rec
		runs, err := c.o.Records.ListRuns(r.Context(), store.RunFilter{TenantID: tid, EventID: id, Limit: pageSize})
		if err != nil {
			return err
		}
		data["Runs"] = runs
		ts, err := c.o.Registry.ListTriggers(r.Context(), tid)
		if err != nil {
			return err
		}
		data["Triggers"] = ts
	case errors.Is(err, store.ErrNotFound):
		// No record: no trigger of this tenant was a candidate. Say so
		// only for an event one of the tenant's deliveries produced.
		d, derr := c.o.Records.GetDelivery(r.Context(), tid, r.URL.Query().Get("delivery"))
		if derr != nil || !producedEvent(d, id) {
			return errNotFound
		}
		data["Delivery"] = d
		data["CanReplay"] = false
	default:
		return err
	}
	if d := r.URL.Query().Get("delivery"); d != "" {
		data["DeliveryRef"] = d
	}
	c.render(w, r, s, http.StatusOK, "event", "Event "+id, data)
	return nil
}

func producedEvent(d store.DeliveryRecord, id string) bool {
	for _, e := range d.Events {
		if e.ID == id {
			return true
		}
	}
	return false
}

func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if c.o.Replayer == nil {
		return badRequest("replay is not available on this server")
	}
	id := r.PathValue("id")
	if _, err := c.o.Records.GetEvent(r.Context(), tid, id); err != nil {
		return err
	}
	trigger := r.PostFormValue("trigger")
	bypass := trigger != "" && r.PostFormValue("bypass") == "true"
	plans, err := c.o.Replayer.Replay(r.Context(), tid, id, trigger, bypass)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound
	} else if err != nil {
		return badRequest("replay failed: %v", err)
	}
	redirect(w, r, "/console/events/"+url.PathEscape(id), fmt.Sprintf("Replayed to %d trigger(s).", len(plans)))
	return nil
}
