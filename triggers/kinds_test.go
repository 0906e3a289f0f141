package triggers

import (
	"testing"
)

func TestKinds(t *testing.T) {
	all := Kinds()
	if len(all) != 30 {
		t.Errorf("%d kinds, want 26 code-hosting + 4 deployment", len(all))
	}
	for _, k := range all {
		if !k.Kind.Valid() || k.Kind.Connector() != k.Connector || !k.Connector.Valid() {
			t.Errorf("kind %+v: inconsistent", k)
		}
	}
	if Kind("new_thing").Valid() || Kind("new_thing").Connector() != "" {
		t.Errorf("unknown kind reported valid")
	}
	// The catalogue is the caller's to modify, Sources included.
	all[0].Sources[0] = "changed"
	if got := Kinds()[0].Sources[0]; got == "changed" {
		t.Errorf("modifying Kinds() changed the catalogue")
	}
}
