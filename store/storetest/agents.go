package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

func normAgent(x store.Agent) store.Agent {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.NATSPasswordSetAt = normTime(x.NATSPasswordSetAt)
	x.Steps = slices.Clone(x.Steps)
	for i := range x.Steps {
		x.Steps[i].Input = normJSON(x.Steps[i].Input)
	}
	return x
}

// agent returns a minimal agent.
func agent(tenantID, id string, created time.Time) store.Agent {
	return store.Agent{ID: id, TenantID: tenantID, Name: "agent " + id, Delivery: store.DeliverNATS, CreatedAt: created, UpdatedAt: created}
}

// fullAgent returns an agent with every field set.
func fullAgent(tenantID, id string) store.Agent {
	return store.Agent{
		ID:                id,
		TenantID:          tenantID,
		Name:              "Zoë's <agent> \"one\"\n",
		Delivery:          store.DeliverHTTP,
		URL:               "https://agent.example.com/runs?x=1&y=ü",
		SealedSecret:      everyByte(),
		NATSPasswordHash:  everyByte(),
		NATSPasswordSetAt: base.Add(time.Second),
		Steps: []store.PipelineStep{
			{Name: "comment", Step: "codehost.create_comment", Account: "acc1",
				Input: json.RawMessage(`{"body": "Hello {{ .event.subject }} <b>&</b>", "n": [1, 2.5, null, true], "nested": {"k": ""}}`)},
			{Name: "redeploy", Step: "deploy.redeploy", Account: "acc2"},
		},
		CreatedAt: base,
		UpdatedAt: base.Add(time.Hour + time.Nanosecond).In(pdt),
	}
}

func agentID(a store.Agent) string { return a.ID }

func testAgentCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := fullAgent("t1", "ag1")
	a.Version = 42 // ignored: a new agent is version 1
	created, err := s.CreateAgent(ctx, a)
	must(t, "CreateAgent", err)
	want := a
	want.Version = 1
	same(t, "CreateAgent result", normAgent, created, want)

	got, err := s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent", err)
	same(t, "GetAgent", normAgent, got, want)
	// The caller owns what it gets: changing it changes nothing stored.
	got.Steps[0].Name = "changed"
	got.Steps[0].Input[0] = ' '
	got.SealedSecret[0] = 'x'
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent again", err)
	same(t, "GetAgent after changing the result of the first", normAgent, got, want)

	_, err = s.GetAgent(ctx, "t2", "ag1")
	wantErr(t, "GetAgent with another tenant id", err, store.ErrNotFound)
	_, err = s.GetAgent(ctx, "t1", "nope")
	wantErr(t, "GetAgent unknown", err, store.ErrNotFound)
	// An agent connecting to NATS names only itself.
	got, err = s.FindAgent(ctx, "ag1")
	must(t, "FindAgent", err)
	same(t, "FindAgent", normAgent, got, want)
	_, err = s.FindAgent(ctx, "nope")
	wantErr(t, "FindAgent unknown", err, store.ErrNotFound)

	_, err = s.CreateAgent(ctx, agent("t1", "ag1", base))
	wantErr(t, "CreateAgent with a taken id", err, store.ErrConflict)
	// Agent ids are global: runs are published to agents.<agent-id>.runs.
	_, err = s.CreateAgent(ctx, agent("t2", "ag1", base))
	wantErr(t, "CreateAgent with another tenant's agent id", err, store.ErrConflict)
	_, err = s.GetAgent(ctx, "t2", "ag1")
	wantErr(t, "GetAgent of the refused agent", err, store.ErrNotFound)
	list, err := s.ListAgents(ctx, "t2")
	must(t, "ListAgents t2", err)
	if len(list) != 0 {
		t.Fatalf("ListAgents t2 after a refused create = %+v", list)
	}
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after conflicts", err)
	same(t, "GetAgent after conflicts", normAgent, got, want)
}

func testAgentList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if as, err := s.ListAgents(ctx, "t1"); err != nil || len(as) != 0 {
		t.Fatalf("ListAgents on an empty store = %v, %v; want none", as, err)
	}
	var want []store.Agent
	// Created out of order; listed by CreatedAt (nanoseconds apart), then id.
	for _, c := range []struct {
		id  string
		off time.Duration
	}{{"c", 2}, {"a", 0}, {"e", time.Hour}, {"b", 1}, {"d", 2}} {
		a, err := s.CreateAgent(ctx, agent("t1", c.id, base.Add(c.off)))
		must(t, "CreateAgent", err)
		want = append(want, a)
	}
	// Tenant ids that extend t1 with the backends' key separators.
	for i, tenant := range []string{"t", "t1/x", "t1:x", "t1x", "t1\x00x", "t2"} {
		_, err := s.CreateAgent(ctx, agent(tenant, fmt.Sprintf("other-%d", i), base.Add(-time.Hour)))
		must(t, "CreateAgent "+tenant, err)
	}
	want = []store.Agent{want[1], want[3], want[0], want[4], want[2]}
	got, err := s.ListAgents(ctx, "t1")
	must(t, "ListAgents", err)
	sameOrder(t, "ListAgents t1 (oldest first)", normAgent, agentID, got, want)

	got, err = s.ListAgents(ctx, "t3")
	must(t, "ListAgents t3", err)
	if len(got) != 0 {
		t.Fatalf("ListAgents of a tenant without agents = %+v", got)
	}
}

func testAgentUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAgent(ctx, agent("t1", "ag1", base))
	must(t, "CreateAgent", err)

	a.Name = "renamed"
	a.Delivery = store.DeliverHTTP
	a.URL = "https://agent.example.com"
	a.SealedSecret = []byte("sealed")
	a.Steps = []store.PipelineStep{{Name: "s", Step: "codehost.create_comment", Account: "acc1"}}
	a.UpdatedAt = base.Add(time.Minute)
	up, err := s.UpdateAgent(ctx, a)
	must(t, "UpdateAgent", err)
	want := a
	want.Version = 2
	same(t, "UpdateAgent result", normAgent, up, want)
	got, err := s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent", err)
	same(t, "GetAgent after update", normAgent, got, want)

	// a still has Version 1: stale.
	a.Name = "stale"
	_, err = s.UpdateAgent(ctx, a)
	wantErr(t, "UpdateAgent with a stale version", err, store.ErrConflict)
	future := up
	future.Version = 7
	_, err = s.UpdateAgent(ctx, future)
	wantErr(t, "UpdateAgent with a future version", err, store.ErrConflict)
	other := up
	other.TenantID = "t2"
	_, err = s.UpdateAgent(ctx, other)
	wantErr(t, "UpdateAgent with another tenant id", err, store.ErrNotFound)
	missing := agent("t1", "nope", base)
	missing.Version = 1
	_, err = s.UpdateAgent(ctx, missing)
	wantErr(t, "UpdateAgent unknown", err, store.ErrNotFound)
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after refused updates", err)
	same(t, "GetAgent after refused updates", normAgent, got, want)

	winner := OneWins(t, "UpdateAgent", 10, func(i int) (store.Agent, error) {
		b := up
		b.Name = fmt.Sprintf("writer-%d", i)
		return s.UpdateAgent(ctx, b)
	})
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after concurrent updates", err)
	same(t, "GetAgent after concurrent updates", normAgent, got, winner)
	if got.Version != 3 {
		t.Fatalf("Version = %d after one more update, want 3", got.Version)
	}
	list, err := s.ListAgents(ctx, "t1")
	must(t, "ListAgents", err)
	sameOrder(t, "ListAgents after updates", normAgent, agentID, list, []store.Agent{winner})
}

func testAgentDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.CreateAgent(ctx, agent("t1", "ag1", base))
	must(t, "CreateAgent", err)
	b, err := s.CreateAgent(ctx, agent("t1", "ag2", base.Add(time.Second)))
	must(t, "CreateAgent", err)

	wantErr(t, "DeleteAgent with another tenant id", s.DeleteAgent(ctx, "t2", "ag1"), store.ErrNotFound)
	_, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after a refused delete", err)

	must(t, "DeleteAgent", s.DeleteAgent(ctx, "t1", "ag1"))
	_, err = s.GetAgent(ctx, "t1", "ag1")
	wantErr(t, "GetAgent of a deleted agent", err, store.ErrNotFound)
	list, err := s.ListAgents(ctx, "t1")
	must(t, "ListAgents", err)
	sameOrder(t, "ListAgents after delete", normAgent, agentID, list, []store.Agent{b})
	wantErr(t, "second DeleteAgent", s.DeleteAgent(ctx, "t1", "ag1"), store.ErrNotFound)
	wantErr(t, "DeleteAgent unknown", s.DeleteAgent(ctx, "t1", "nope"), store.ErrNotFound)
	stale := agent("t1", "ag1", base)
	stale.Version = 1
	_, err = s.UpdateAgent(ctx, stale)
	wantErr(t, "UpdateAgent of a deleted agent", err, store.ErrNotFound)

	// The id is free again, in any tenant.
	again, err := s.CreateAgent(ctx, agent("t2", "ag1", base))
	must(t, "CreateAgent with a deleted agent's id", err)
	if again.Version != 1 {
		t.Fatalf("CreateAgent again: Version = %d, want 1", again.Version)
	}
	list, err = s.ListAgents(ctx, "t2")
	must(t, "ListAgents t2", err)
	sameOrder(t, "ListAgents t2", normAgent, agentID, list, []store.Agent{again})
}

// Of concurrent creations of one name (in any case) in one tenant,
// exactly one succeeds and the others name it; other tenants, and the
// name once its agent is deleted, are free. Rounds of creations released
// together make the losers' reads overlap the winner's write.
func testAgentConcurrentNamedCreates(t *testing.T, s store.Store) {
	ctx := t.Context()
	const rounds, n = 25, 8
	var winner store.Agent
	for r := range rounds {
		names := []string{"Triage", "triage", "TRIAGE", "tRiAgE"}
		for i := range names {
			names[i] += fmt.Sprint(r)
		}
		var mu sync.Mutex
		var refusals []error
		wins := runConcurrently(t, n, store.ErrNameTaken, func(i int) error {
			a := agent("t1", fmt.Sprintf("ag%d-%d", r, i), base.Add(time.Duration(i)*time.Second))
			a.Name = names[i%len(names)]
			_, err := s.CreateAgentNamed(ctx, a)
			if err != nil {
				mu.Lock()
				refusals = append(refusals, err)
				mu.Unlock()
			}
			return err
		})
		if wins != 1 {
			t.Fatalf("CreateAgentNamed of one name (round %d): %d of %d concurrent creations succeeded, want exactly 1", r, wins, n)
		}
		list, err := s.ListAgents(ctx, "t1")
		must(t, "ListAgents", err)
		named := slices.DeleteFunc(list, func(a store.Agent) bool { return !store.SameAgentName(a.Name, names[0]) })
		if len(named) != 1 {
			t.Fatalf("ListAgents after concurrent creations of one name (round %d): %d agents of that name, want 1", r, len(named))
		}
		winner = named[0]
		for _, err := range refusals {
			var taken *store.NameTakenError
			if !errors.As(err, &taken) || taken.AgentID != winner.ID || taken.Name != winner.Name {
				t.Fatalf("a refused creation: %v (%#v), want a *store.NameTakenError naming %s %q", err, taken, winner.ID, winner.Name)
			}
		}
	}

	other := agent("t2", "other", base)
	other.Name = winner.Name
	_, err := s.CreateAgentNamed(ctx, other)
	must(t, "CreateAgentNamed of the name in another tenant", err)
	distinct := agent("t1", "distinct", base)
	distinct.Name = "Triage 2"
	_, err = s.CreateAgentNamed(ctx, distinct)
	must(t, "CreateAgentNamed of another name", err)

	must(t, "DeleteAgent", s.DeleteAgent(ctx, "t1", winner.ID))
	again := agent("t1", "again", base)
	again.Name = strings.ToUpper(winner.Name)
	_, err = s.CreateAgentNamed(ctx, again)
	must(t, "CreateAgentNamed of a deleted agent's name", err)
	// An id already taken is still a conflict, not a name.
	dup := agent("t1", "again", base)
	dup.Name = "fresh"
	_, err = s.CreateAgentNamed(ctx, dup)
	wantErr(t, "CreateAgentNamed with a taken id", err, store.ErrConflict)
}
