package poll

import (
	"slices"
	"time"
)

// highWater is the part of a cursor that remembers which created items
// were emitted: the newest creation time emitted, and the ids emitted
// with exactly that time (several items can share one second). Items come
// oldest first. Embedded in a cursor, its fields keep their JSON names.
type highWater[ID comparable] struct {
	High time.Time `json:"high,omitzero"`
	IDs  []ID      `json:"ids,omitempty"`
}

// seen reports whether the item created at created with id is at or below
// the mark.
func (h *highWater[ID]) seen(created time.Time, id ID) bool {
	return created.Before(h.High) || created.Equal(h.High) && slices.Contains(h.IDs, id)
}

// advance records the item as emitted.
func (h *highWater[ID]) advance(created time.Time, id ID) {
	switch {
	case created.After(h.High):
		h.High, h.IDs = created, []ID{id}
	case created.Equal(h.High):
		h.IDs = append(h.IDs, id)
	}
}
