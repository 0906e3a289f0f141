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
