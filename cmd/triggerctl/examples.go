package main

// examples are the examples "triggerctl help COMMAND" prints after the
// command's flags, two spaces in, each with a comment line saying what it
// does.
var examples = map[string]string{
	"replay": `  # sign and post every captured issues payload to a local triggerd
  triggerctl replay ../shared/webhook-corpus/codehost/issues.*.json
  # the same delivery twice, to see the duplicate answer
  triggerctl replay --delivery d-1 issues.opened.json
`,
	"bench": `  # 30 s of signed issues deliveries from 64 connections
  triggerctl bench --duration 30s --concurrency 64
`,
	"bench-baseline": `  # a bare endpoint to compare bench's figures with
  triggerctl bench-baseline --listen 127.0.0.1:8099
`,
	"bench-dispatch": `  # receipt-to-run latency through a real trigger and agent
  triggerctl bench-dispatch --nats-url nats://127.0.0.1:4222
`,
	"tail": `  # every event triggerd publishes, one JSON line each
  triggerctl tail
  # only new issues
  triggerctl tail 'triggers.codehost.new_issue.>'
`,
	"redeliver": `  # map an archived delivery again and publish its events
  triggerctl redeliver 72d3162e-cc78-11e3-81ab-4c9367dc0958
`,
	"delivery": `  # the headers and body of an archived delivery
  triggerctl delivery 72d3162e-cc78-11e3-81ab-4c9367dc0958
  # its webhook JSON alone, for jq
  triggerctl delivery --payload 72d3162e-cc78-11e3-81ab-4c9367dc0958 | jq .action
`,
	"tenants": `  # a new tenant, with the admin key from <data-dir>/admin_key
  triggerctl tenants create acme
`,
	"keys": `  # rotate the tenant's key: make a new one, switch to it, revoke the old
  triggerctl keys create --name ci
  triggerctl keys list
  triggerctl keys revoke KEY_ID
`,
	"accounts": `  # connect GitHub: prints the URL to open in a browser
  triggerctl accounts connect codehost
  triggerctl accounts list
  triggerctl accounts remove ACCOUNT_ID
`,
	"steps": `  # find steps about issues, read one, run it
  triggerctl steps list issue
  triggerctl steps show codehost.create_issue
  triggerctl steps run codehost.create_issue --account ACCOUNT_ID --input '{"owner":"octocat","repo":"hello-world","title":"Hi"}'
  # the whole catalogue as JSON, for a program
  triggerctl steps list -o json
`,
	"agents": `  # an agent that receives runs over NATS, and one that is POSTed them
  triggerctl agents create --name triage
  triggerctl agents create --name triage-http --webhook-url https://agent.example.com/runs
  triggerctl agents list
  triggerctl agents delete AGENT_ID
`,
	"triggers": `  # the kinds, then a trigger that starts an agent on new issues
  triggerctl triggers kinds
  triggerctl triggers create --kind new_issue --account ACCOUNT_ID --agent AGENT_ID --params '{"repositories":["octocat/hello-world"]}'
  triggerctl triggers events TRIGGER_ID
  triggerctl triggers disable TRIGGER_ID
`,
	"runs": `  # the latest failed runs, then one with its steps
  triggerctl runs list --status failed
  triggerctl runs get RUN_ID
`,
	"events": `  # what each candidate trigger did with an event
  triggerctl events get EVENT_ID
`,
	"replay-event": `  # run one trigger on a past event again, its filter skipped
  triggerctl replay-event --trigger TRIGGER_ID --bypass-filter EVENT_ID
`,
	"dead": `  # what the dispatcher gave up on, then send one back
  triggerctl dead list
  triggerctl dead requeue 42
  # the same list as JSON lines with each message, for a script
  triggerctl dead list -o jsonl --data
`,
	"mcp": `  # let an MCP client (Claude Desktop, an IDE) use triggerd's tools with the tenant's key
  triggerctl mcp --url http://127.0.0.1:8080
`,
	"version": `  triggerctl version
  triggerctl version -o json
`,
}
