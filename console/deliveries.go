package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// pageSize is how many rows a list shows at once.
const pageSize = 50

// ranges are the time ranges list filters offer.
var ranges = []struct{ Value, Label string }{
	{"", "Any time"}, {"1h", "Last hour"}, {"24h", "Last 24 hours"}, {"168h", "Last 7 days"},
}

func sinceOf(now time.Time, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, badRequest("time range %q: choose one of the listed ranges", v)
	}
	return now.Add(-d), nil
}

// withQuery returns path with q's values, set and without the empty ones.
func withQuery(path string, q url.Values, set ...string) string {
	out := url.Values{}
	for k, vs := range q {
		if k != "flash" && len(vs) > 0 && vs[0] != "" {
			out.Set(k, vs[0])
		}
	}
	for i := 0; i+1 < len(set); i += 2 {
		if set[i+1] == "" {
			out.Del(set[i])
		} else {
			out.Set(set[i], set[i+1])
		}
	}
	if len(out) == 0 {
		return path
	}
	return path + "?" + out.Encode()
}

var answers = []string{store.AnswerAccepted, store.AnswerDuplicate, store.AnswerIgnored, store.AnswerRefused}

func (c *Console) deliveries(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.DeliveryFilter{TenantID: tid, Answer: q.Get("answer"), Event: strings.TrimSpace(q.Get("event")),
		DeliveryID: strings.TrimSpace(q.Get("id")), Limit: pageSize + 1}
	if f.Answer != "" && !slices.Contains(answers, f.Answer) {
		return badRequest("answer %q: choose one of %s", f.Answer, strings.Join(answers, ", "))
	}
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
		next = withQuery("/console/deliveries", q, "before", last.ID)
	}
	c.render(w, r, s, http.StatusOK, "deliveries", "Deliveries", map[string]any{
		"Deliveries": ds, "Q": q, "Answers": answers, "Ranges": ranges, "Next": next,
		"First": withQuery("/console/deliveries", q, "before", ""), "Paged": q.Get("before") != "",
		"Filtered":          f.Answer != "" || f.Event != "" || f.DeliveryID != "" || !f.Since.IsZero(),
		"RedeliverFiltered": withQuery(Prefix+"deliveries/redeliver", q, "before", ""),
	})
	return nil
}

// header is one header line shown on a delivery's page.
type header struct{ Name, Value string }

// hiddenHeader reports whether a header carries a credential (a
// signature, a token, a cookie): its value is not shown.
func hiddenHeader(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"authorization", "cookie", "signature", "token", "secret", "password", "api-key", "apikey"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

func headersOf(h map[string][]string) []header {
	var out []header
	for _, k := range slices.Sorted(maps.Keys(h)) {
		v := strings.Join(h[k], ", ")
		if hiddenHeader(k) {
			v = "(hidden: a credential)"
		}
		out = append(out, header{k, v})
	}
	return out
}

func (c *Console) delivery(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	d, err := c.o.Records.GetDelivery(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	data := map[string]any{"D": d, "CanRedeliver": c.o.Redeliver != nil && c.o.Archive != nil && d.Key != ""}
	if c.o.Archive != nil && d.Key != "" {
		capture, err := c.o.Archive.Delivery(r.Context(), triggers.Connector(d.Connector), d.Key)
		switch {
		case errors.Is(err, bus.ErrNotArchived):
			data["ArchiveNote"] = "The archive no longer holds this delivery (older than its retention), so its headers and body cannot be shown or redelivered."
			data["CanRedeliver"] = false
		case err != nil:
			c.log.Warn().Err(err).Str("delivery", d.Key).Msg("reading an archived delivery")
			data["ArchiveNote"] = "The archived headers and body could not be read right now; reload to try again."
		default:
			data["Headers"] = headersOf(capture.Header)
			data["Body"] = prettyJSON(capture.Body)
		}
	} else if d.Key == "" {
		data["ArchiveNote"] = "A refused delivery is not archived: only what triggerd answered is kept."
	}
	c.render(w, r, s, http.StatusOK, "delivery", "Delivery "+d.DeliveryID, data)
	return nil
}

func (c *Console) redeliver(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if c.o.Redeliver == nil || c.o.Archive == nil {
		return badRequest("redelivery is not available on this server")
	}
	d, err := c.o.Records.GetDelivery(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	if d.Key == "" {
		return badRequest("a refused delivery was not archived, so it cannot be redelivered")
	}
	capture, err := c.o.Archive.Delivery(r.Context(), triggers.Connector(d.Connector), d.Key)
	if errors.Is(err, bus.ErrNotArchived) {
		return badRequest("the archive no longer holds this delivery")
	} else if err != nil {
		return err
	}
	// The record is the tenant's; a hook's delivery must be too (one of
	// the shared endpoints has no scope: its tenant is the record's).
	if capture.Scope != nil && capture.Scope.Tenant != tid {
		return errNotFound
	}
	asNew := r.PostFormValue("as_new") == "true"
	rec, err := c.o.Redeliver.Redeliver(r.Context(), tid, capture, asNew)
	if err != nil {
		return badRequest("redelivery failed: %v", err)
	}
	redirect(w, r, "/console/deliveries/"+url.PathEscape(rec.ID), fmt.Sprintf("Redelivered: answered %s.", rec.Answer))
	return nil
}
