package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/triggerd/triggerd/store"
)

var runStatuses = []store.RunStatus{store.RunClaimed, store.RunStarted, store.RunSucceeded, store.RunFailed}

func (c *Console) runs(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := store.RunFilter{TenantID: tid, Status: store.RunStatus(q.Get("status")),
		AgentID: strings.TrimSpace(q.Get("agent")), TriggerID: strings.TrimSpace(q.Get("trigger")), Limit: pageSize + 1}
	if f.Status != "" && !slices.Contains(runStatuses, f.Status) {
		return badRequest("status %q: choose one of the listed states", f.Status)
	}
	if f.Before, err = store.ParseRunCursor(q.Get("before")); err != nil {
		return badRequest("%v", err)
	}
	since, err := sinceOf(c.o.Now(), q.Get("range"))
	if err != nil {
		return err
	}
	runs, err := c.o.Records.ListRuns(r.Context(), f)
	if err != nil {
		return err
	}
	next := ""
	if len(runs) > pageSize {
		runs = runs[:pageSize]
		next = withQuery(Prefix+"runs", q, "before", store.CursorOf(runs[len(runs)-1]).String())
	}
	if !since.IsZero() {
		// Runs come newest first: the page, and the list, end at the
		// first older one.
		if i := slices.IndexFunc(runs, func(r store.Run) bool { return r.CreatedAt.Before(since) }); i >= 0 {
			runs, next = runs[:i], ""
		}
	}
	agents, err := c.o.Registry.ListAgents(r.Context(), tid)
	if err != nil {
		return err
	}
	ts, err := c.o.Registry.ListTriggers(r.Context(), tid)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for _, a := range agents {
		names[a.ID] = a.Name
	}
	c.render(w, r, s, http.StatusOK, "runs", "Runs", map[string]any{
		"Runs": runs, "AgentNames": names, "Q": q, "Statuses": runStatuses, "Ranges": ranges, "Agents": agents, "Triggers": ts,
		"Next": next, "Paged": !f.Before.IsZero(), "First": withQuery(Prefix+"runs", q, "before", ""),
		"Filtered": f.Status != "" || f.AgentID != "" || f.TriggerID != "" || !since.IsZero(),
	})
	return nil
}

func (c *Console) run(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	run, err := c.o.Records.GetRun(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "run", "Run "+run.ID, map[string]any{"R": run})
	return nil
}
