// Package match is the trigger model: what a trigger is, and which
// triggers an event starts.
//
// A Trigger subscribes an agent to one kind of event (package triggers),
// narrowed by per-kind parameters (Params; which apply to which kind is
// given by ParamsFor and checked by ValidateParams) and an optional CEL
// filter over the event (filter.go). An Index holds the triggers and
// answers, for one event, the Outcome of every candidate trigger (matched,
// filtered out and why, disabled, inactive), looking only at the triggers
// of the event's connector, kind, repository and scope.
//
// The package is pure: it performs no I/O. The dispatcher (package
// dispatch) keeps an Index in memory and acts on its outcomes; the
// registry (package registry) and the API validate triggers with it.
package match
