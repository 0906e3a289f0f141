package dispatch

import (
	"github.com/triggerd/triggerd/store"
)

// logRun writes a run's lifecycle as operators read it: one line when it
// starts and one when it finishes, at info, or at warn when it failed,
// with the ids to look it up (triggerctl runs get RUN). Called once the
// state is stored, so a line never tells of a run the store does not hold.
func (d *Dispatcher) logRun(r store.Run) {
	switch r.Status {
	case store.RunStarted:
		d.log.Info().Str("run", r.ID).Str("tenant", r.TenantID).Str("trigger", r.TriggerID).Str("agent", r.AgentID).
			Str("event", r.EventID).Bool("replay", r.Replay).Int("steps", len(r.Steps)).Msg("run started")
	case store.RunSucceeded:
		if r.StartedAt.IsZero() || r.StartedAt.Equal(r.FinishedAt) {
			// Settled in the write that started it (no pipeline steps).
			d.logRun(store.Run{ID: r.ID, TenantID: r.TenantID, TriggerID: r.TriggerID, AgentID: r.AgentID,
				EventID: r.EventID, Replay: r.Replay, Status: store.RunStarted})
		}
		d.log.Info().Str("run", r.ID).Str("tenant", r.TenantID).Str("trigger", r.TriggerID).Str("agent", r.AgentID).
			Str("status", string(r.Status)).Dur("duration", r.FinishedAt.Sub(r.CreatedAt)).Msg("run finished")
	case store.RunFailed:
		e := d.log.Warn().Str("run", r.ID).Str("tenant", r.TenantID).Str("trigger", r.TriggerID).Str("agent", r.AgentID).
			Str("status", string(r.Status)).Dur("duration", r.FinishedAt.Sub(r.CreatedAt))
		if r.Error != nil {
			e = e.Str("code", r.Error.Code).Str("reason", r.Error.Message)
		}
		e.Msg("run finished")
	}
}
