package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Key names (the package doc lists them).
func (s *Store) runKey(id string) string      { return s.prefix + "run:" + id }
func (s *Store) runsKey(tenant string) string { return s.prefix + "runs:" + tenant }
func (s *Store) allRunsKey() string           { return s.prefix + "runs" }
func (s *Store) triggerRunsKey(trigger string) string {
	return s.prefix + "trigger-runs:" + trigger
}
func (s *Store) agentRunsKey(agent string) string { return s.prefix + "agent-runs:" + agent }
func (s *Store) eventRunsKey(tenant, event string) string {
	return s.prefix + "event-runs:" + tenant + ":" + event
}

// runSets returns the sorted sets that list r: every run is in runs and
// runs:{tenant}; runs with a trigger, agent or event id are in
// trigger-runs, agent-runs or event-runs too.
func (s *Store) runSets(r store.Run) []string {
	sets := []string{s.allRunsKey(), s.runsKey(r.TenantID)}
	if r.TriggerID != "" {
		sets = append(sets, s.triggerRunsKey(r.TriggerID))
	}
	if r.AgentID != "" {
		sets = append(sets, s.agentRunsKey(r.AgentID))
	}
	if r.EventID != "" {
		sets = append(sets, s.eventRunsKey(r.TenantID, r.EventID))
	}
	return sets
}

// newerRun orders runs newest first, by CreatedAt then id.
func newerRun(a, b store.Run) int {
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
}

// runs keeps runs: by id (the same event and trigger never make two
// runs, in any tenant), in the sorted sets runSets lists, which follow
// the run's trigger, agent, event and CreatedAt.
//
// Run writes are replicated before they are acknowledged (through
// Sentinel; see Store.write). The dispatcher marks a step running before
// it runs it and acts only on acknowledged writes, so a failover cannot
// take a run back to before a step it ran: the promoted replica holds the
// step as running (or done), and the step is not run again.
func (s *Store) runs() kind[store.Run] {
	return kind[store.Run]{
		s:          s,
		what:       "run",
		key:        func(_, id string) string { return s.runKey(id) },
		fields:     record.OfRun,
		reaches:    record.InTenantOrAny,
		sets:       s.runSets,
		replicated: true,
		counts:     store.RunActivity,
	}
}

// CreateRun stores a new run with Version 1; store.ErrConflict if the id
// exists, in any tenant: the run was already claimed by someone.
func (s *Store) CreateRun(ctx context.Context, r store.Run) (store.Run, error) {
	return s.runs().create(ctx, r)
}

// GetRun returns the tenant's run (any tenant's for ""), or
// store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, tenantID, id string) (store.Run, error) {
	return s.runs().get(ctx, "get", tenantID, id)
}

// UpdateRun replaces the run if its stored Version equals r.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first, store.ErrNotFound if the tenant has no such run. The sorted
// sets follow the new run's trigger, agent, event and CreatedAt.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) (store.Run, error) {
	return s.runs().update(ctx, r)
}

// ListRuns returns the runs f selects, newest first (by CreatedAt, then
// id), at most f.Limit (100 if not positive). It reads the most selective
// sorted set f allows (the tenant's event, the trigger, the agent, the
// tenant, or every run), from f.Before's score when it is set, and checks
// the rest, the status included, on the runs it reads.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	var zkey string
	switch {
	case f.TenantID != "" && f.EventID != "":
		zkey = s.eventRunsKey(f.TenantID, f.EventID)
	case f.TriggerID != "":
		zkey = s.triggerRunsKey(f.TriggerID)
	case f.AgentID != "":
		zkey = s.agentRunsKey(f.AgentID)
	case f.TenantID != "":
		zkey = s.runsKey(f.TenantID)
	default:
		zkey = s.allRunsKey()
	}
	// From the cursor's score down: runs of the same score (scores are
	// coarser than nanoseconds) are read, and f.Match keeps those after it.
	max := ""
	if !f.Before.IsZero() {
		max = score(f.Before.CreatedAt)
	}
	rs, err := newestFirst(ctx, s.rdb, zkey, max, s.runKey, f.Match, newerRun, store.ListLimit(f.Limit))
	if err != nil {
		return nil, fmt.Errorf("redisstore: list runs: %w", err)
	}
	return rs, nil
}

// PruneRuns deletes the runs of every tenant that finished before before
// (see store.Run.FinishedBefore), with their members of every sorted set,
// oldest CreatedAt first (then least id), at most limit
// (store.DefaultPruneLimit if not positive), and returns how many it
// deleted. It reads runs from the lowest score up to before's, past the
// runs that have not finished, and deletes each with a script that checks
// the stored run is still the one read: a run updated meanwhile is left
// for a later call. It also removes the members of runs that are gone.
func (s *Store) PruneRuns(ctx context.Context, before time.Time, limit int) (int, error) {
	keep := func(r store.Run) bool { return r.FinishedBefore(before) }
	older := func(a, b store.Run) int { return newerRun(b, a) }
	sets := func(r sortedRecord[store.Run]) (keys, members []string) {
		keys = s.runSets(r.v)
		for range keys {
			members = append(members, r.member)
		}
		return keys, members
	}
	n, err := pruneOldest(ctx, s.rdb, s.allRunsKey(), s.runKey, keep, older, before, store.PruneLimit(limit), sets)
	if err != nil {
		return n, fmt.Errorf("redisstore: prune runs: %w", err)
	}
	return n, nil
}
