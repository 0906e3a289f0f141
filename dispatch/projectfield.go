package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/triggers"
)

// ProjectFieldStep is the tool step that reads a Projects (v2) field by
// its node id (package connectors/codehost). The dispatcher runs it to
// name the field of a project_item_status_changed event in the older
// payload shape, which carries only the field's node id.
const ProjectFieldStep = "codehost.get_project_v2_field"

// Field names are kept this long, and at most this many: a field can be
// renamed, rarely.
const (
	fieldNameTTL = 10 * time.Minute
	maxFieldIDs  = 4096
	// fieldNameTimeout bounds one read of a field's name.
	fieldNameTimeout = 30 * time.Second
)

// fieldNames remembers the names of project fields by tenant and node id:
// a name read with one tenant's account is not another tenant's to see.
type fieldNames struct {
	mu sync.Mutex
	m  map[string]fieldName
}

type fieldName struct {
	name string
	at   time.Time
}

func (c *fieldNames) get(key string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[key]
	if !ok || now.Sub(f.at) > fieldNameTTL {
		return "", false
	}
	return f.name, true
}

func (c *fieldNames) put(key, name string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]fieldName{}
	}
	if len(c.m) >= maxFieldIDs {
		for k, f := range c.m {
			if now.Sub(f.at) > fieldNameTTL {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxFieldIDs {
			clear(c.m)
		}
	}
	c.m[key] = fieldName{name, now}
}

// projectField returns the name of the project field with node id as the
// given account reads it.
func (d *Dispatcher) projectField(ctx context.Context, tenantID, accountID, id string) (string, error) {
	now := d.o.Now()
	key := tenantID + "\x00" + id
	if name, ok := d.fields.get(key, now); ok {
		return name, nil
	}
	in, err := json.Marshal(map[string]string{"field_id": id})
	if err != nil {
		return "", err
	}
	out, err := d.o.Steps.Run(connectors.WithCaller(ctx, "dispatch"), tenantID, ProjectFieldStep, accountID, in)
	if err != nil {
		return "", err
	}
	var f struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(out, &f); err != nil || f.Name == "" {
		return "", &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("%s answered without a field name", ProjectFieldStep)}
	}
	d.fields.put(key, f.Name, now)
	return f.Name, nil
}

// nameProjectField settles, for a project_item_status_changed event in the
// older payload shape (Resource.FieldID without Resource.Field), whether
// the single-select field that changed is Status, for every outcome that
// matched: it reads the field's name through ProjectFieldStep as the
// outcome's trigger's account. An outcome whose field is another one is
// FilteredOut; one whose field cannot be read (the account may not see
// the organisation's projects) is ResultFailed, saying why. It returns an
// error, and changes nothing, when a read failed for a reason that passes
// (a rate limit, GitHub unavailable): the caller tries the event again
// later. Other events are left as they are.
func (d *Dispatcher) nameProjectField(ctx context.Context, ev *triggers.Event, outcomes []match.Outcome) error {
	id := ev.Resource.FieldID
	if ev.Kind != triggers.ProjectItemStatusChanged || ev.Resource.Field != "" || id == "" {
		return nil
	}
	type verdict struct{ result, reason string }
	verdicts := make([]*verdict, len(outcomes))
	for i, o := range outcomes {
		if o.Result != match.Matched {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, min(d.o.StepTimeout, fieldNameTimeout))
		name, err := d.projectField(ctx, o.TenantID, o.Account, id)
		cancel()
		var ce *connectors.Error
		switch {
		case err == nil && strings.EqualFold(name, "Status"):
		case err == nil:
			verdicts[i] = &verdict{match.FilteredOut, fmt.Sprintf("project field %q (%s) is not Status", name, id)}
		case errors.As(err, &ce) && !waits(string(ce.Code)) && !ce.Retryable:
			verdicts[i] = &verdict{ResultFailed, fmt.Sprintf("cannot tell whether project field %s is Status: %s (%s); "+
				"the trigger's account must be able to read the organisation's projects (GitHub's project or read:project scope, and an organisation that allows the app)", id, ce.Message, ce.Code)}
		default:
			return fmt.Errorf("name project field %s: %w", id, err)
		}
	}
	for i, v := range verdicts {
		if v != nil {
			outcomes[i].Result, outcomes[i].Reason = v.result, v.reason
		}
	}
	return nil
}
