package store

// AgentSecretAAD is the additional data an HTTP agent's signing secret is
// sealed with.
func AgentSecretAAD(agentID string) string { return "agent:" + agentID }
