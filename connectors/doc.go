// Package connectors holds what the connector packages (codehost, deploy,
// analytics, and apicall's API Call steps) share: the OAuth contract each
// provider implements for connected accounts (Provider, Identity), and
// the named steps a connector offers (Step, Toolkit, Error). Connectors
// know nothing of triggers, ingest or dispatch.
//
// Every connector is written the same way:
//
//   - Upstream calls are methods of the connector's client, one per
//     provider request and named for it (CreateIssue, ListDeployments,
//     RunReport), each with a doc comment linking the provider's reference
//     page for that endpoint. They live in api*.go (codehost's webhook and
//     polling client, Hooks, in hooks.go, deliveries.go and poll.go); the
//     client's transport, error mapping and paging live in client.go.
//   - Steps are built in steps*.go: a step table gives each step its id,
//     name, description and schemas, and a run function that checks the
//     input, calls client methods and shapes the structured output.
//   - Input and output schemas are written with package schema
//     (connectors/schema), never as JSON text.
//   - The HTTP policy every step of the connector runs under (rate limits,
//     retries, caching) is policy.go, handed over as Toolkit.Wrap.
//   - Tests share their helpers from connectortest; fakes of the providers
//     live in sandbox/fake*, never here.
package connectors
