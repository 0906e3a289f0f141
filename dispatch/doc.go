// Package dispatch is the dispatcher: it consumes trigger events from
// JetStream, matches them against the tenants' triggers, starts agents
// exactly once and runs their tool steps.
//
// One Dispatcher per process pulls from durable consumers of the events
// and push streams (bus.Work), so several processes share the work:
//   - runs.go: an event's outcomes (package match) are recorded, and each
//     matched trigger gets a run whose id is derived from the event and
//     the trigger, so a redelivered event never starts an agent twice;
//   - work.go: runs are handed to NATS agents, or queued and POSTed to
//     HTTP agents (Pusher, package dispatch/push); results come back on
//     the results consumer; replays and resumed runs come the same way;
//   - the pipeline's tool steps run as the trigger's connected account
//     (StepRunner), their inputs rendered by package pipeline; a step
//     refused for a rate limit waits, parked, without holding a worker;
//   - payload.go reads an event's payload from the delivery archive when
//     it was left out of the event and a filter or template needs it;
//   - interest.go narrows the events consumer to the kinds that have
//     triggers; outage.go pauses work while the store is unreachable;
//     prune.go deletes old runs and event records; dryrun.go replays
//     recent events against a trigger without starting anything.
//
// The trigger index is reloaded from the store on every change broadcast
// on ControlSubject and every Resync.
package dispatch
