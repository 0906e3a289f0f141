package match

import (
	"cmp"
	"encoding/json"
	"fmt"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// FromStore converts a stored trigger for the index.
func FromStore(st store.Trigger) (Trigger, error) {
	t := Trigger{
		ID: st.ID, TenantID: st.TenantID, Kind: triggers.Kind(st.Kind), Account: st.AccountID,
		Agent: st.AgentID, Enabled: st.Enabled, Filter: st.Filter,
	}
	if len(st.Params) > 0 {
		if err := json.Unmarshal(st.Params, &t.Params); err != nil {
			return Trigger{}, fmt.Errorf("trigger %s: params: %w", st.ID, err)
		}
	}
	t.Inactive, t.InactiveCode = InactiveOf(st)
	return t, nil
}

// InactiveOf returns why a stored trigger is inactive, and its code (""
// when it is active): Trigger.Inactive and InactiveCode.
func InactiveOf(st store.Trigger) (reason, code string) {
	if st.Status != store.TriggerInactive {
		return "", ""
	}
	return cmp.Or(st.StatusReason, "inactive"), st.StatusCode
}
