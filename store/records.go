package store

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Helpers the backends share. Besides accounts (accounts.go), the records
// the dispatcher persists each have their file: agents, triggers, hooks
// (the webhooks registered for triggers), runs, events (the outcome of
// every event for every candidate trigger) and cursors (pollers' state).
// Every record that can be changed carries a Version that updates compare.

// DefaultListLimit is what a zero (or negative) list limit means.
const DefaultListLimit = 100

// ListLimit returns limit, or DefaultListLimit when it is not positive.
func ListLimit(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return limit
}

// DefaultPruneLimit is how many records a PruneRuns or PruneEvents with a
// zero (or negative) limit deletes at most.
const DefaultPruneLimit = 1000

// PruneLimit returns limit, or DefaultPruneLimit when it is not positive.
func PruneLimit(limit int) int {
	if limit <= 0 {
		return DefaultPruneLimit
	}
	return limit
}

// RequireIDs reports the first of a record's identifiers that is empty,
// after what; names and values alternate.
func RequireIDs(what string, nameValues ...string) error {
	if err := requireIDs(nameValues...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// requireIDs reports the first of a record's identifiers that is empty;
// names and values alternate.
func requireIDs(nameValues ...string) error {
	for i := 0; i+1 < len(nameValues); i += 2 {
		if nameValues[i+1] == "" {
			return fmt.Errorf("empty %s", nameValues[i])
		}
	}
	return nil
}

// Stamp fills a zero created with now and a zero updated with created, as
// records are stored on creation.
func Stamp(created, updated *time.Time, now time.Time) {
	if created.IsZero() {
		*created = now
	}
	if updated.IsZero() {
		*updated = *created
	}
}

// SortOldestFirst sorts xs by creation time, then id, exactly (to the
// nanosecond, whatever the zone).
func SortOldestFirst[T any](xs []T, created func(T) time.Time, id func(T) string) {
	slices.SortStableFunc(xs, func(a, b T) int {
		return cmp.Or(created(a).Compare(created(b)), cmp.Compare(id(a), id(b)))
	})
}
