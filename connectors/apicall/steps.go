package apicall

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// Defaults used when an option is empty.
const (
	// DefaultCodeHostBaseURL is the code host's REST API root.
	DefaultCodeHostBaseURL = "https://api.github.com"
	// DefaultCodeHostMediaType is the value the code-host step requires
	// in the "accept" header.
	DefaultCodeHostMediaType = "application/vnd.codehost+json"
	// DefaultDeployBaseURL is the deployment platform's REST API root.
	DefaultDeployBaseURL = "https://api.vercel.com"
	// DefaultAnalyticsDataURL is the analytics Data API root.
	DefaultAnalyticsDataURL = "https://analyticsdata.googleapis.com"
	// DefaultAnalyticsAdminURL is the analytics Admin API root.
	DefaultAnalyticsAdminURL = "https://analyticsadmin.googleapis.com"
)

const (
	// deployTeamMetadataKey is the account metadata key holding the
	// deployment platform's team id.
	deployTeamMetadataKey = "team_id"
	// deployTeamQuery is the query parameter naming the team.
	deployTeamQuery = "teamId"

	analyticsAPIData  = "data"
	analyticsAPIAdmin = "admin"

	codeHostEndpointExample  = "/repos/{owner}/{repo}/collaborators/{username}"
	deployPathExample        = "/v13/deployments"
	analyticsEndpointExample = "v1beta/properties/123:runReport"
)

var (
	// restMethods are the methods the code-host and deployment steps accept.
	restMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}
	// analyticsMethods are the methods of the analytics step.
	analyticsMethods = []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete}
	// versionSegment matches a deployment-platform API version ("v13").
	versionSegment = regexp.MustCompile(`^v[0-9]+$`)
	// analyticsVersion matches an analytics API version ("v1beta", "v1").
	analyticsVersion = regexp.MustCompile(`^v[0-9]+(alpha|beta)?[0-9]*$`)
)

// CodeHostOptions configures the code-host API Call step.
type CodeHostOptions struct {
	// BaseURL is the REST API root, e.g. https://api.github.com (the
	// default). It may carry a path prefix.
	BaseURL string
	// MediaType is the value the "accept" header must have (default
	// application/vnd.codehost+json).
	MediaType string
}

// DeployOptions configures the deployment-platform API Call step.
type DeployOptions struct {
	// BaseURL is the REST API root (default https://api.vercel.com).
	BaseURL string
}

// AnalyticsOptions configures the analytics API Call step.
type AnalyticsOptions struct {
	// DataBaseURL is the Data API root (default
	// https://analyticsdata.googleapis.com).
	DataBaseURL string
	// AdminBaseURL is the Admin API root (default
	// https://analyticsadmin.googleapis.com).
	AdminBaseURL string
}

type codeHostInput struct {
	Method   string            `json:"method"`
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers"`
	Body     json.RawMessage   `json:"body"`
}

// CodeHost returns the "GitHub-style API Call" step (codehost.api_call).
// Its input is a method, an endpoint path, headers that must contain
// "accept" with exactly o.MediaType, and an optional JSON object body.
func CodeHost(o CodeHostOptions) connectors.Step {
	if o.MediaType == "" {
		o.MediaType = DefaultCodeHostMediaType
	}
	t := newTarget("codehost", o.BaseURL, DefaultCodeHostBaseURL, true)
	mediaType := o.MediaType
	return connectors.Step{
		ID:          "codehost.api_call",
		Name:        "GitHub-style API Call",
		Connector:   "codehost",
		Description: "Sends a request to any endpoint of the code host's REST API as the connected account; the platform adds authentication and the headers must contain \"accept\": \"" + mediaType + "\".",
		Input: schema.Root(schema.Object(schema.Props{
			"method":   methodSchema(restMethods),
			"endpoint": endpointSchema("API path such as "+codeHostEndpointExample+", optionally with a query; the host is always the code host's API.", MaxEndpointLength),
			"headers":  headersSchema("Request headers. Must contain \"accept\": \"" + mediaType + "\". Authorization, Cookie, Host, Proxy-*, X-Forwarded-* and hop-by-hop headers are refused."),
			"body":     bodySchema,
		}, "method", "endpoint", "headers")),
		Output: schema.Root(outputSchema),
		Run: func(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
			var in codeHostInput
			if err := decodeInput(input, &in); err != nil {
				return nil, err
			}
			if err := checkMethod(in.Method, restMethods); err != nil {
				return nil, err
			}
			u, err := t.resolve(in.Endpoint)
			if err != nil {
				return nil, err
			}
			h, err := requestHeaders(in.Headers)
			if err != nil {
				return nil, err
			}
			if err := checkAccept(h, mediaType); err != nil {
				return nil, err
			}
			body, err := requestBody(in.Method, in.Body, h)
			if err != nil {
				return nil, err
			}
			return t.do(ctx, env, in.Method, u, h, body)
		},
	}
}

// checkAccept requires exactly one Accept header whose value is mediaType.
func checkAccept(h http.Header, mediaType string) error {
	v, ok := h["Accept"]
	if !ok {
		return invalid("the headers must contain \"accept\" with the value %q; add \"accept\": %q to headers", mediaType, mediaType)
	}
	if len(v) != 1 || v[0] != mediaType {
		return invalid("the \"accept\" header must be exactly %q; set \"accept\": %q in headers", mediaType, mediaType)
	}
	return nil
}

type deployInput struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// Deploy returns the "Vercel-style API Call" step (deploy.api_call). Its
// input is a method, a versioned path such as /v13/deployments, optional
// headers and an optional JSON object body. For a team account (metadata
// team_id set) it adds the teamId query parameter unless the path has one.
func Deploy(o DeployOptions) connectors.Step {
	t := newTarget("deploy", o.BaseURL, DefaultDeployBaseURL, false)
	return connectors.Step{
		ID:          "deploy.api_call",
		Name:        "Vercel-style API Call",
		Connector:   "deploy",
		Description: "Sends a request to any endpoint of the deployment platform's REST API as the connected account; the platform adds authentication and, for team accounts, the teamId.",
		Input: schema.Root(schema.Object(schema.Props{
			"method":  methodSchema(restMethods),
			"path":    endpointSchema("Versioned API path such as "+deployPathExample+", optionally with a query; the host is always the deployment platform's API.", MaxEndpointLength),
			"headers": headersSchema("Custom request headers. Authorization, Cookie, Host, Proxy-*, X-Forwarded-* and hop-by-hop headers are refused."),
			"body":    bodySchema,
		}, "method", "path")),
		Output: schema.Root(outputSchema),
		Run: func(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
			var in deployInput
			if err := decodeInput(input, &in); err != nil {
				return nil, err
			}
			if err := checkMethod(in.Method, restMethods); err != nil {
				return nil, err
			}
			u, err := t.resolve(in.Path)
			if err != nil {
				return nil, err
			}
			first, _, _ := strings.Cut(strings.TrimPrefix(u.EscapedPath()[len(t.prefix):], "/"), "/")
			if !versionSegment.MatchString(first) {
				return nil, invalid("the path must start with the API version segment, e.g. %q; put the version of this resource (such as /v13 or /v9) in front of the path", deployPathExample)
			}
			h, err := requestHeaders(in.Headers)
			if err != nil {
				return nil, err
			}
			body, err := requestBody(in.Method, in.Body, h)
			if err != nil {
				return nil, err
			}
			if team := env.Account.Metadata[deployTeamMetadataKey]; team != "" {
				q := u.Query()
				if !q.Has(deployTeamQuery) {
					q.Set(deployTeamQuery, team)
					u.RawQuery = q.Encode()
				}
			}
			return t.do(ctx, env, in.Method, u, h, body)
		},
	}
}

type analyticsInput struct {
	Method   string          `json:"method"`
	API      string          `json:"api"`
	Endpoint string          `json:"endpoint"`
	Body     json.RawMessage `json:"body"`
}

// Analytics returns the "Analytics API Call" step (analytics.api_call).
// Its input is the spec's: a method, an endpoint relative to the API's
// base starting at the version segment (no leading slash, e.g.
// v1beta/properties/123:runReport) and an optional JSON object body. The
// endpoint says which API serves it (see analyticsAPIOf): the Data API's
// report methods, metadata and audience exports, the Admin API's
// accounts, account summaries, properties and their collections. The
// optional api ("data" or "admin") must agree with a known endpoint and
// chooses the API of one neither is known to serve.
func Analytics(o AnalyticsOptions) connectors.Step {
	targets := map[string]*target{
		analyticsAPIData:  newTarget("analytics", o.DataBaseURL, DefaultAnalyticsDataURL, false),
		analyticsAPIAdmin: newTarget("analytics", o.AdminBaseURL, DefaultAnalyticsAdminURL, false),
	}
	return connectors.Step{
		ID:          "analytics.api_call",
		Name:        "Analytics API Call",
		Connector:   "analytics",
		Description: "Sends a request to any endpoint of the analytics Data or Admin API as the connected account; the endpoint chooses the API, and the platform adds authentication.",
		Input: schema.Root(schema.Object(schema.Props{
			"method": methodSchema(analyticsMethods),
			"endpoint": endpointSchema("Path relative to the API's base, starting at the version segment and without a leading slash, e.g. "+analyticsEndpointExample+"; it may carry a query. "+
				"It chooses the API: the Data API serves the report methods on a property (:runReport, :batchRunReports, :runPivotReport, :batchRunPivotReports, :runRealtimeReport, :checkCompatibility), "+
				"properties/<id>/metadata and audienceExports; the Admin API serves accounts, accountSummaries, properties and their other collections (keyEvents, dataStreams, customDimensions, ...).", MaxEndpointLength-1),
			"api": schema.Enum("Optional: which API, \"data\" or \"admin\". The endpoint already says which; an api that contradicts it is refused. Needed only for an endpoint neither API is known to serve.",
				analyticsAPIData, analyticsAPIAdmin),
			"body": bodySchema,
		}, "method", "endpoint")),
		Output: schema.Root(outputSchema),
		Run: func(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
			var in analyticsInput
			if err := decodeInput(input, &in); err != nil {
				return nil, err
			}
			if err := checkMethod(in.Method, analyticsMethods); err != nil {
				return nil, err
			}
			if err := checkAnalyticsEndpoint(in.Endpoint); err != nil {
				return nil, err
			}
			api, err := chooseAnalyticsAPI(in.API, in.Endpoint)
			if err != nil {
				return nil, err
			}
			u, err := targets[api].resolve("/" + in.Endpoint)
			if err != nil {
				return nil, err
			}
			body, err := requestBody(in.Method, in.Body, http.Header{})
			if err != nil {
				return nil, err
			}
			return targets[api].do(ctx, env, in.Method, u, http.Header{"Accept": {"application/json"}}, body)
		},
	}
}

// checkAnalyticsEndpoint applies the analytics step's own rules before
// Resolve: not empty, no leading slash, not a URL, and a version segment
// first.
func checkAnalyticsEndpoint(e string) error {
	switch {
	case e == "":
		return invalid("the endpoint is empty; give a path such as %q", analyticsEndpointExample)
	case e[0] == '/' || e[0] == '\\':
		return invalid("the endpoint must not start with %q; write it from the version segment, e.g. %q", e[:1], analyticsEndpointExample)
	case hasScheme(e) && !versionMethod(e):
		return invalid("the endpoint is an absolute URL; give only the path from the version segment, e.g. %q", analyticsEndpointExample)
	}
	path, _, _ := strings.Cut(e, "?")
	first, _, _ := strings.Cut(path, "/")
	first, _, _ = strings.Cut(first, ":") // v1alpha:runReport
	if !analyticsVersion.MatchString(first) {
		return invalid("the endpoint must start with the API version segment, e.g. %q; put the version (such as v1beta) first", analyticsEndpointExample)
	}
	return nil
}

// versionMethod reports whether e starts with a method on the version
// itself (v1alpha:runReport), which looks like a URL scheme but is not.
func versionMethod(e string) bool {
	v, rest, ok := strings.Cut(e, ":")
	return ok && analyticsVersion.MatchString(v) && rest != "" && (rest[0] >= 'a' && rest[0] <= 'z')
}

func methodSchema(methods []string) schema.Schema { return schema.Enum("HTTP method.", methods...) }

// endpointSchema describes an endpoint string. It has no pattern on
// purpose: Run's refusals name the fix, a pattern mismatch would not.
func endpointSchema(description string, maxLength int) schema.Schema {
	return schema.Text(description).MaxLength(maxLength)
}

func headersSchema(description string) schema.Schema {
	return schema.Map(schema.String(""), description)
}

var (
	bodySchema = schema.AnyObject("JSON request body, where the endpoint needs one (not for GET).")

	outputSchema = schema.Object(schema.Props{
		"status":  schema.Integer("Upstream HTTP status."),
		"headers": schema.Map(schema.String(""), "Safe subset of the response headers, by lower-case name."),
		"body":    schema.Any("Response body: JSON when the answer is JSON, else text; null when empty."),
	}, "status", "headers", "body").Describe("The upstream answer: status, a safe subset of the headers, and the body (JSON when the answer is JSON, else text).")
)
