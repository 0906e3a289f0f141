package analytics

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// DefaultDataAPIBaseURL is the GA4 Data API root (the Admin API root is
// DefaultAdminAPIBaseURL).
const DefaultDataAPIBaseURL = "https://analyticsdata.googleapis.com"

// Step ids of the analytics toolkit.
const (
	StepRunReports           = "analytics.run_reports"
	StepRunRealtimeReport    = "analytics.run_realtime_report"
	StepGetMetadata          = "analytics.get_metadata"
	StepCreateKeyEvents      = "analytics.create_key_events"
	StepCreateProperties     = "analytics.create_properties"
	StepListProperties       = "analytics.list_properties"
	StepGetProperty          = "analytics.get_property"
	StepListKeyEvents        = "analytics.list_key_events"
	StepListDataStreams      = "analytics.list_data_streams"
	StepGetDataStream        = "analytics.get_data_stream"
	StepListAccountSummaries = "analytics.list_account_summaries"
)

// Input patterns.
var (
	propertyPattern = regexp.MustCompile(`^properties/([0-9]+)$`)
	accountPattern  = regexp.MustCompile(`^accounts/([0-9]+)$`)
)

// ToolkitOptions configures NewToolkit.
type ToolkitOptions struct {
	// DataBaseURL is the GA4 Data API root
	// (default https://analyticsdata.googleapis.com).
	DataBaseURL string
	// AdminBaseURL is the GA4 Admin API root
	// (default https://analyticsadmin.googleapis.com).
	AdminBaseURL string
	// Now is the clock used for quota resets (default time.Now).
	Now func() time.Time

	// retryBase is the first retry's nominal wait (default 250 ms); tests
	// shorten it.
	retryBase time.Duration
}

// toolkit holds what the analytics steps share.
type toolkit struct {
	data, admin string
	now         func() time.Time
	quota       *quotaTracker
	policy      *policy
}

// NewToolkit returns the analytics connector's steps and its HTTP policy.
//
// Steps: Run Reports, Run Realtime Report and Get Metadata (Data API);
// Create Key Events, Create properties and the Admin reads List
// Properties, Get Property, List Key Events, List Data Streams, Get Data
// Stream and List Account Summaries.
//
// The policy (Toolkit.Wrap), shared by every account because GA4 quotas
// are per property: at most ten Data API requests per property in flight
// (the eleventh waits, bounded by its context); every report step asks
// for returnPropertyQuota, and what an answer's propertyQuota says is kept
// per property and category (core, realtime), so a request whose budget
// is known to be spent is refused unsent with CodeRateLimited — RetryAfter
// runs to the next midnight in America/Los_Angeles for the daily budget
// (Google: "Daily quotas refresh at midnight PST") and to the next full
// hour for the hourly ones; a 429 RESOURCE_EXHAUSTED is read the same way.
// Reads (GET and the Data API's report methods) are retried on network
// errors and 5xx, at most three attempts with jittered backoff within the
// context's deadline.
func NewToolkit(o ToolkitOptions) connectors.Toolkit {
	tk := newToolkit(o)
	return connectors.Toolkit{Connector: name, Steps: tk.steps(), Wrap: tk.policy.wrap}
}

// newToolkit fills o's defaults and builds the shared state.
func newToolkit(o ToolkitOptions) *toolkit {
	tk := &toolkit{
		data:  strings.TrimRight(o.DataBaseURL, "/"),
		admin: strings.TrimRight(o.AdminBaseURL, "/"),
		now:   o.Now,
	}
	if tk.data == "" {
		tk.data = DefaultDataAPIBaseURL
	}
	if tk.admin == "" {
		tk.admin = DefaultAdminAPIBaseURL
	}
	if tk.now == nil {
		tk.now = time.Now
	}
	rb := o.retryBase
	if rb <= 0 {
		rb = defaultRetryBase
	}
	tk.quota = newQuotaTracker(tk.now, maxConcurrentPerProperty)
	du, _ := url.Parse(tk.data) // an unparsable root only disables the quota policy
	tk.policy = &policy{data: du, quota: tk.quota, retryBase: rb}
	return tk
}

func (tk *toolkit) steps() []connectors.Step {
	step := func(id, title, desc string, in, out schema.Schema, run func(context.Context, connectors.Env, json.RawMessage) (any, error)) connectors.Step {
		return connectors.Step{
			ID: id, Name: title, Connector: name, Description: desc,
			Input: schema.Root(in), Output: schema.Root(out), Run: run,
		}
	}
	return []connectors.Step{
		step(StepRunReports, "Run Reports",
			"Runs a report of metrics by dimensions over date ranges for a GA4 property, with optional filters, ordering and paging. "+
				"GA4 processes most data within 24 hours and all of it (attribution, session stitching, key events) within 48 hours, so recent figures may still change: "+
				"the output's data_may_change_from names the first such date and may_change says whether the report reaches it; for final figures, end the date range before it (3daysAgo).",
			runReportsInput, reportOutput, tk.runReports),
		step(StepRunRealtimeReport, "Run Realtime Report",
			"Runs a report of the last 30 minutes of activity of a GA4 property (covers_minutes in the output), before GA4's processing: figures lack processed signals and differ from Run Reports'.",
			runRealtimeInput, reportOutput, tk.runRealtimeReport),
		step(StepGetMetadata, "Get Metadata",
			"Lists the dimensions and metrics available to reports of a GA4 property, custom ones included.",
			getMetadataInput, metadataOutput, tk.getMetadata),
		step(StepCreateKeyEvents, "Create Key Events",
			"Marks an event already collected in a GA4 property as a key event.",
			createKeyEventInput, keyEventOutput, tk.createKeyEvent),
		step(StepCreateProperties, "Create properties",
			"Creates a GA4 property under an analytics account; a data stream must be set up separately to collect data.",
			createPropertyInput, propertyOutput, tk.createProperty),
		step(StepListProperties, "List Properties",
			"Lists the GA4 properties of an analytics account.",
			listPropertiesInput, listPropertiesOutput, tk.listProperties),
		step(StepGetProperty, "Get Property",
			"Reads a GA4 property's settings.",
			getPropertyInput, propertyOutput, tk.getProperty),
		step(StepListKeyEvents, "List Key Events",
			"Lists the key events of a GA4 property.",
			listKeyEventsInput, listKeyEventsOutput, tk.listKeyEvents),
		step(StepListDataStreams, "List Data Streams",
			"Lists the data streams (web, Android, iOS) of a GA4 property.",
			listDataStreamsInput, listDataStreamsOutput, tk.listDataStreams),
		step(StepGetDataStream, "Get Data Stream",
			"Reads one data stream of a GA4 property, with its measurement id.",
			getDataStreamInput, dataStreamOutput, tk.getDataStream),
		step(StepListAccountSummaries, "List Account Summaries",
			"Lists the analytics accounts the connected account can see, with their properties.",
			listAccountSummariesInput, listAccountSummariesOutput, tk.listAccountSummaries),
	}
}

// propertyID validates "properties/<id>" and returns the id.
func propertyID(field, v string) (string, error) {
	m := propertyPattern.FindStringSubmatch(v)
	if m == nil {
		return "", connectors.Errorf(connectors.CodeValidation, "%s %q: want properties/<numeric id>", field, v)
	}
	return m[1], nil
}

// defaultAccount is the first account of the connected account's
// analytics_accounts metadata ("accounts/123=Name,…"), or "".
func defaultAccount(md map[string]string) string {
	first, _, _ := strings.Cut(md[MetaAccounts], ",")
	acc, _, _ := strings.Cut(first, "=")
	acc = strings.TrimSpace(acc)
	if !accountPattern.MatchString(acc) {
		return ""
	}
	return acc
}

// accountOrDefault validates an optional account input, accounts/<id>,
// defaulting to the connected account's first analytics account (which
// defaultAccount has already checked).
func accountOrDefault(account string, md map[string]string) (string, error) {
	if account == "" {
		if account = defaultAccount(md); account == "" {
			return "", connectors.Errorf(connectors.CodeValidation, "account: the connected account lists no analytics account; name one as accounts/<id>")
		}
		return account, nil
	}
	if !accountPattern.MatchString(account) {
		return "", connectors.Errorf(connectors.CodeValidation, "account %q: want accounts/<numeric id>", account)
	}
	return account, nil
}
