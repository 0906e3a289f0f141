package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/triggerd/triggerd/bus"
)

// Dead letters are every tenant's together in one stream. The admin sees
// and requeues them all; a tenant sees and requeues its own, those whose
// message names it (deadTenant), and another tenant's answer 404.

// maxDeadScan bounds the dead letters one tenant's page reads to fill
// itself: past it the page comes back short, and its Later link goes on
// from the last one read.
const maxDeadScan = 2000

// deadProbe is what deadTenant reads of a dead message: a trigger event
// (its scope, or none for the shared endpoints), a replay or resumption
// request (its tenant_id), an agent's result (its run_id).
type deadProbe struct {
	TenantID string `json:"tenant_id"`
	Scope    *struct {
		Tenant string `json:"tenant"`
	} `json:"scope"`
	Kind  string `json:"kind"`
	RunID string `json:"run_id"`
}

// deadTenant returns the tenant a dead letter belongs to, "" when its
// message names none (undecodable, or of no tenant): the admin's alone.
func (c *Console) deadTenant(ctx context.Context, d bus.Dead) string {
	var p deadProbe
	if json.Unmarshal(d.Data, &p) != nil {
		return ""
	}
	switch {
	case p.TenantID != "":
		return p.TenantID
	case p.Scope != nil:
		return p.Scope.Tenant
	case d.Stream == bus.EventsStream && p.Kind != "":
		// An event of the shared endpoints: their tenant's.
		if c.o.SharedTenant != nil {
			if t, err := c.o.SharedTenant(ctx); err == nil {
				return t
			}
		}
	case p.RunID != "":
		if r, err := c.o.Records.GetRun(ctx, "", p.RunID); err == nil {
			return r.TenantID
		}
	}
	return ""
}

// listDead returns at most limit dead letters of source from sequence
// from on that s may see, and where the next page starts (0: none).
func (c *Console) listDead(ctx context.Context, s *session, source string, from uint64, limit int) ([]bus.Dead, uint64, error) {
	if s.admin {
		ds, err := c.o.Dead.ListDead(ctx, source, from, limit+1)
		if err != nil || len(ds) <= limit {
			return ds, 0, err
		}
		return ds[:limit], ds[limit].Seq, nil
	}
	var out []bus.Dead
	for read := 0; read < maxDeadScan; {
		ds, err := c.o.Dead.ListDead(ctx, source, from, min(200, maxDeadScan-read))
		if err != nil {
			return nil, 0, err
		}
		for _, d := range ds {
			if c.deadTenant(ctx, d) != s.tenant {
				continue
			}
			if len(out) == limit {
				return out, d.Seq, nil
			}
			out = append(out, d)
		}
		if len(ds) < min(200, maxDeadScan-read) {
			return out, 0, nil
		}
		read += len(ds)
		from = ds[len(ds)-1].Seq + 1
	}
	return out, from, nil
}

// deadLetter returns the dead letter at seq if s may see it.
func (c *Console) deadLetter(ctx context.Context, s *session, seq uint64) (bus.Dead, error) {
	ds, err := c.o.Dead.ListDead(ctx, "", seq, 1)
	if err != nil {
		return bus.Dead{}, err
	}
	if len(ds) == 0 || ds[0].Seq != seq || (!s.admin && c.deadTenant(ctx, ds[0]) != s.tenant) {
		return bus.Dead{}, errNotFound
	}
	return ds[0], nil
}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, s *session) error {
	data := map[string]any{"Admin": s.admin, "Available": c.o.Dead != nil}
	if !s.admin {
		if _, err := tenant(s); err != nil {
			return err
		}
	}
	if c.o.Dead != nil {
		from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		source := r.URL.Query().Get("source")
		ds, next, err := c.listDead(r.Context(), s, source, from, pageSize)
		if err != nil {
			return err
		}
		if next != 0 {
			data["Next"] = withQuery(Prefix+"dead", r.URL.Query(), "from", strconv.FormatUint(next, 10))
		}
		data["Dead"] = ds
		data["Source"] = source
	}
	c.render(w, r, s, http.StatusOK, "dead", "Dead letters", data)
	return nil
}

func (c *Console) deadLetterPage(w http.ResponseWriter, r *http.Request, s *session) error {
	if c.o.Dead == nil {
		return errNotFound
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		return errNotFound
	}
	d, err := c.deadLetter(r.Context(), s, seq)
	if err != nil {
		return err
	}
	var hs []header
	for _, h := range headersOf(d.Header) {
		if !strings.HasPrefix(h.Name, "Triggerd-Dead-") {
			hs = append(hs, h)
		}
	}
	c.render(w, r, s, http.StatusOK, "deadletter", fmt.Sprintf("Dead letter %d", d.Seq), map[string]any{
		"D": d, "Headers": hs, "Body": prettyJSON(d.Data),
	})
	return nil
}

func (c *Console) requeue(w http.ResponseWriter, r *http.Request, s *session) error {
	if c.o.Dead == nil {
		return errNotFound
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		return errNotFound
	}
	if _, err := c.deadLetter(r.Context(), s, seq); err != nil {
		return err
	}
	d, err := c.o.Dead.Requeue(r.Context(), seq)
	if errors.Is(err, bus.ErrNotDead) {
		return errNotFound
	} else if err != nil {
		return err
	}
	redirect(w, r, Prefix+"dead", fmt.Sprintf("Requeued dead letter %d on %s.", seq, d.Subject))
	return nil
}

// requeueFilteredPage asks to requeue the dead letters of the source
// filter that s may see, stating how many.
func (c *Console) requeueFilteredPage(w http.ResponseWriter, r *http.Request, s *session) error {
	if c.o.Dead == nil {
		return errNotFound
	}
	source := r.URL.Query().Get("source")
	ds, next, err := c.listDead(r.Context(), s, source, 0, maxBulk)
	if err != nil {
		return err
	}
	what := "every source"
	if source != "" {
		what = "source " + source
	}
	says := []string{"Each is published again on its subject, for its consumer to take again, and leaves the dead letters.",
		"What a consumer already did for a message is not done twice (runs are keyed by event and trigger)."}
	if next != 0 {
		says = append(says, fmt.Sprintf("There are more: only the oldest %d are requeued at a time.", maxBulk))
	}
	c.render(w, r, s, http.StatusOK, "confirm", "Requeue dead letters", map[string]any{
		"Question": fmt.Sprintf("Requeue %d dead letter(s) of %s?", len(ds), what),
		"Says":     says,
		"Action":   withQuery(Prefix+"dead/requeue", r.URL.Query(), "count", strconv.Itoa(len(ds))),
		"Button":   fmt.Sprintf("Requeue %d", len(ds)), "Back": withQuery(Prefix+"dead", r.URL.Query()),
	})
	return nil
}

func (c *Console) requeueFiltered(w http.ResponseWriter, r *http.Request, s *session) error {
	if c.o.Dead == nil {
		return errNotFound
	}
	source := r.URL.Query().Get("source")
	ds, _, err := c.listDead(r.Context(), s, source, 0, maxBulk)
	if err != nil {
		return err
	}
	if strconv.Itoa(len(ds)) != r.URL.Query().Get("count") {
		return badRequest("the dead letters changed since they were counted: go back and confirm again")
	}
	done, failed := 0, 0
	for _, d := range ds {
		if _, err := c.o.Dead.Requeue(r.Context(), d.Seq); err != nil {
			c.log.Warn().Err(err).Uint64("seq", d.Seq).Msg("requeueing a dead letter")
			failed++
			continue
		}
		done++
	}
	msg := fmt.Sprintf("Requeued %d dead letter(s).", done)
	if failed > 0 {
		msg += fmt.Sprintf(" %d could not be requeued (see the log).", failed)
	}
	redirect(w, r, Prefix+"dead", msg)
	return nil
}
