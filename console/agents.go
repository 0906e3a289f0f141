package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

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
	c.render(w, r, s, status, "agents", "Agents", map[string]any{"Agents": agents, "Problem": problem, "In": in, "Accounts": accs})
	return nil
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
