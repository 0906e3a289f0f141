package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/triggerd/triggerd/bus"
)

// Dead letters are the dispatcher's and every tenant's together, so only
// the admin sees and requeues them.
func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, s *session) error {
	data := map[string]any{"Admin": s.admin, "Available": c.o.Dead != nil}
	if s.admin && c.o.Dead != nil {
		from, _ := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		source := r.URL.Query().Get("source")
		ds, err := c.o.Dead.ListDead(r.Context(), source, from, pageSize+1)
		if err != nil {
			return err
		}
		if len(ds) > pageSize {
			data["Next"] = withQuery(Prefix+"dead", r.URL.Query(), "from", strconv.FormatUint(ds[pageSize].Seq, 10))
			ds = ds[:pageSize]
		}
		data["Dead"] = ds
		data["Source"] = source
	}
	c.render(w, r, s, http.StatusOK, "dead", "Dead letters", data)
	return nil
}

func (c *Console) requeue(w http.ResponseWriter, r *http.Request, s *session) error {
	if !s.admin {
		return errAdmin
	}
	if c.o.Dead == nil {
		return errNotFound
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		return errNotFound
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
// filter, stating how many.
func (c *Console) requeueFilteredPage(w http.ResponseWriter, r *http.Request, s *session) error {
	if !s.admin {
		return errAdmin
	}
	if c.o.Dead == nil {
		return errNotFound
	}
	source := r.URL.Query().Get("source")
	ds, err := c.o.Dead.ListDead(r.Context(), source, 0, maxBulk+1)
	if err != nil {
		return err
	}
	what := "every source"
	if source != "" {
		what = "source " + source
	}
	says := []string{"Each is published again on its subject, for its consumer to take again, and leaves the dead letters.",
		"What a consumer already did for a message is not done twice (runs are keyed by event and trigger)."}
	if len(ds) > maxBulk {
		says = append(says, fmt.Sprintf("There are more: only the oldest %d are requeued at a time.", maxBulk))
		ds = ds[:maxBulk]
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
	if !s.admin {
		return errAdmin
	}
	if c.o.Dead == nil {
		return errNotFound
	}
	source := r.URL.Query().Get("source")
	ds, err := c.o.Dead.ListDead(r.Context(), source, 0, maxBulk)
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
