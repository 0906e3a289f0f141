package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
)

func (c *Console) agents(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.agentsPage(w, r, s, http.StatusOK, "", nil)
}

func (c *Console) agentsPage(w http.ResponseWriter, r *http.Request, s *session, status int, problem string, in map[string]string) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	agents, err := c.o.Registry.ListAgents(r.Context(), tid)
	if err != nil {
		return err
	}
	accs, err := c.o.Accounts.List(r.Context(), tid)
	if err != nil {
		return err
	}
	var catalogue []connectors.Step
	if c.o.Steps != nil {
		catalogue = c.o.Steps.List("")
	}
	rows := pipelineRows(r)
	c.render(w, r, s, status, "agents", "Agents", map[string]any{"Agents": agents, "Problem": problem, "In": in, "Accounts": accs,
		"Catalogue": catalogue, "Rows": rows})
	return nil
}

// maxPipelineRows bounds the step rows the agent form reads.
const maxPipelineRows = 20

// pipelineRow is one step row of the agent form's pipeline editor.
type pipelineRow struct {
	Index                      int
	Name, Step, Account, Input string
}

// pipelineRows returns the step rows the form sent (pstep.<field>.<i>),
// the empty ones left out, or one empty row to start from.
func pipelineRows(r *http.Request) []pipelineRow {
	var rows []pipelineRow
	for i := range maxPipelineRows {
		row := pipelineRow{Index: len(rows)}
		get := func(f string) string { return strings.TrimSpace(r.PostFormValue(fmt.Sprintf("pstep.%s.%d", f, i))) }
		row.Name, row.Step, row.Account, row.Input = get("name"), get("step"), get("account"), get("input")
		if row.Name != "" || row.Step != "" || row.Input != "" {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		rows = []pipelineRow{{}}
	}
	return rows
}

// pipelineOf builds the pipeline from the editor's rows; an input must
// be a JSON object (its string values may be templates).
func pipelineOf(rows []pipelineRow) ([]store.PipelineStep, error) {
	var out []store.PipelineStep
	for i, row := range rows {
		if row.Name == "" && row.Step == "" && row.Input == "" {
			continue
		}
		if row.Name == "" || row.Step == "" {
			return nil, fmt.Errorf("pipeline step %d: give it a name and choose its tool step", i+1)
		}
		in := row.Input
		if in == "" {
			in = "{}"
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(in), &obj); err != nil {
			return nil, fmt.Errorf("pipeline step %d (%s): its input must be a JSON object: %v", i+1, row.Name, err)
		}
		out = append(out, store.PipelineStep{Name: row.Name, Step: row.Step, Account: row.Account, Input: json.RawMessage(in)})
	}
	return out, nil
}

func (c *Console) createAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	in := map[string]string{
		"name": r.PostFormValue("name"), "delivery": r.PostFormValue("delivery"),
		"url": strings.TrimSpace(r.PostFormValue("url")), "steps": strings.TrimSpace(r.PostFormValue("steps")),
	}
	ai := registry.AgentInput{Name: in["name"], Delivery: store.AgentDelivery(in["delivery"]), URL: in["url"]}
	steps, err := pipelineOf(pipelineRows(r))
	if err != nil {
		return c.agentsPage(w, r, s, http.StatusBadRequest, err.Error(), in)
	}
	if len(steps) > 0 && in["steps"] != "" {
		return c.agentsPage(w, r, s, http.StatusBadRequest, "Give the pipeline either as steps or as JSON, not both.", in)
	}
	ai.Steps = steps
	if in["steps"] != "" {
		if err := json.Unmarshal([]byte(in["steps"]), &ai.Steps); err != nil {
			return c.agentsPage(w, r, s, http.StatusBadRequest,
				"The pipeline must be a JSON array of steps, each {\"name\", \"step\", \"account\", \"input\"}: "+err.Error(), in)
		}
	}
	a, secret, err := c.o.Registry.CreateAgent(r.Context(), tid, ai)
	if err != nil {
		if msg := registryProblem(err); msg != "" {
			return c.agentsPage(w, r, s, http.StatusBadRequest, msg, in)
		}
		return err
	}
	// The secret is shown once, as the API does, on the agent's page
	// after a redirect (a reload does not create another agent).
	c.sessions.keepOnce(s, "agent:"+a.ID, secret)
	redirect(w, r, Prefix+"agents/"+url.PathEscape(a.ID), "Agent created.")
	return nil
}

func (c *Console) agent(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	a, err := c.o.Registry.GetAgent(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.agentPage(w, r, s, a, c.sessions.takeOnce(s, "agent:"+a.ID))
}

func (c *Console) agentPage(w http.ResponseWriter, r *http.Request, s *session, a store.Agent, secret string) error {
	data := map[string]any{"A": a, "Secret": secret}
	h, ok, err := c.o.Registry.AgentEndpoint(r.Context(), a.TenantID, a.ID)
	if err != nil {
		return err
	}
	if ok {
		data["Endpoint"] = c.o.Registry.HookURL(h)
		data["EndpointSecretsSet"] = !h.SecretsSetAt.IsZero()
	}
	c.render(w, r, s, http.StatusOK, "agent", "Agent "+a.Name, data)
	return nil
}

func (c *Console) deleteAgentPage(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	a, err := c.o.Registry.GetAgent(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "confirm", "Delete agent", map[string]any{
		"Question": "Delete the agent " + a.Name + "?",
		"Says":     []string{"Triggers that start it must be deleted first; the deletion is refused while any remain.", "Its past runs stay listed."},
		"Action":   Prefix + "agents/" + a.ID + "/delete", "Button": "Delete", "Back": Prefix + "agents/" + a.ID,
	})
	return nil
}

func (c *Console) deleteAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if err := c.o.Registry.DeleteAgent(r.Context(), tid, r.PathValue("id")); err != nil {
		if msg := registryProblem(err); msg != "" && !errorsIsNotFound(err) {
			return badRequest("%s", msg)
		}
		return err
	}
	redirect(w, r, Prefix+"agents", "Agent deleted.")
	return nil
}
