// Package daemon is triggerd as one process: Run wires the parts (ingest,
// the bus and embedded NATS, the store, accounts, the registry, the
// dispatcher, the management API), serves them on one HTTP server and
// stops them, in reverse order of starting, when its context ends.
//
// cmd/triggerd reads flags into a Config and calls Run; tests and other
// programs can run the whole system in-process the same way. The order in
// which parts start is in daemon.go, one method per phase; what each part
// owns and how it stops is added to the stop list (stops.go) as it
// starts.
package daemon
