// Package pipeline renders the inputs of an agent's tool steps.
//
// A pipeline step's input is JSON whose string values may be Go templates
// over the run's data: the event envelope and the outputs of the steps
// before it ({{ .resource.number }}, {{ .steps.find.output.id }}).
// CheckTemplates refuses an input that cannot render when an agent is
// saved; RenderInput renders it for one run, within MaxRenderedBytes;
// InputReadsPayload tells the dispatcher whether an event's payload must be
// read from the archive first.
//
// The package is pure: it performs no I/O.
package pipeline
