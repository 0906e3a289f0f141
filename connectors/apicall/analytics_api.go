package apicall

import (
	"net/url"
	"slices"
	"strings"
)

// Which of Google's two analytics APIs an endpoint belongs to. The two
// share the version segment and the properties/{id} prefix, but not a
// single method or collection: the Data API's methods are the report
// methods on a property (properties/1:runReport) and its metadata and
// audience resources; everything else (accounts, account summaries, the
// properties themselves and their settings collections) is the Admin
// API's. Google's discovery documents for analyticsdata and
// analyticsadmin, v1beta and v1alpha, are the source of these lists; the
// conformance test holds every method they describe against
// analyticsAPIOf.
var (
	// analyticsDataMethods are the Data API's custom methods on a
	// property (properties/{id}:<method>) or on the version itself
	// (v1alpha:runReport, which names the property in the body).
	analyticsDataMethods = []string{
		"runReport", "batchRunReports", "runPivotReport", "batchRunPivotReports",
		"runRealtimeReport", "checkCompatibility", "runFunnelReport",
	}
	// analyticsDataCollections are the Data API's resources below a
	// property (properties/{id}/<collection>...).
	analyticsDataCollections = []string{"metadata", "audienceExports", "audienceLists", "recurringAudienceLists", "reportTasks"}

	// analyticsAdminTop are the Admin API's top-level collections.
	analyticsAdminTop = []string{"accounts", "accountSummaries", "properties"}
	// analyticsAdminMethods are the Admin API's custom methods on a
	// property.
	analyticsAdminMethods = []string{"acknowledgeUserDataCollection", "runAccessReport", "submitUserDeletion"}
	// analyticsAdminCollections are the Admin API's resources below a
	// property.
	analyticsAdminCollections = []string{
		"accessBindings", "adSenseLinks", "attributionSettings", "audiences", "bigQueryLinks",
		"calculatedMetrics", "channelGroups", "conversionEvents", "customDimensions", "customMetrics",
		"dataRedactionSettings", "dataRetentionSettings", "dataSharingSettings", "dataStreams",
		"displayVideo360AdvertiserLinkProposals", "displayVideo360AdvertiserLinks",
		"enhancedMeasurementSettings", "eventCreateRules", "eventEditRules", "expandedDataSets",
		"firebaseLinks", "globalSiteTag", "googleAdsLinks", "googleSignalsSettings", "keyEvents",
		"reportingDataAnnotations", "reportingIdentitySettings", "rollupPropertySourceLinks",
		"searchAds360Links", "skAdNetworkConversionValueSchema", "subpropertyEventFilters",
		"subpropertySyncConfigs", "userProvidedDataSettings",
	}
)

// analyticsAPIOf tells which API serves endpoint (as the step takes it:
// the version segment first, no leading slash, an optional query):
// analyticsAPIData or analyticsAPIAdmin, with why in a few words, or ""
// when the endpoint matches neither API's known methods and resources.
func analyticsAPIOf(endpoint string) (api, why string) {
	path, _, _ := strings.Cut(endpoint, "?")
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	version, rest, _ := strings.Cut(path, "/")
	if _, m, ok := strings.Cut(version, ":"); ok {
		if slices.Contains(analyticsDataMethods, m) {
			return analyticsAPIData, "the report method " + m
		}
		return "", ""
	}
	segs := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	top, topMethod, _ := strings.Cut(segs[0], ":")
	if !slices.Contains(analyticsAdminTop, top) {
		return "", ""
	}
	if top != "properties" || len(segs) == 1 {
		if topMethod != "" && top != "properties" && top != "accounts" {
			return "", ""
		}
		return analyticsAPIAdmin, "the " + top + " resource"
	}
	if topMethod != "" {
		return "", ""
	}
	// properties/{id}[:method][/collection...]
	id, method, hasMethod := strings.Cut(segs[1], ":")
	if id == "" {
		return "", ""
	}
	switch {
	case len(segs) == 2 && !hasMethod:
		return analyticsAPIAdmin, "a property itself"
	case len(segs) == 2 && slices.Contains(analyticsDataMethods, method):
		return analyticsAPIData, "the report method " + method
	case len(segs) == 2 && slices.Contains(analyticsAdminMethods, method):
		return analyticsAPIAdmin, "the property method " + method
	case len(segs) == 2 || hasMethod:
		return "", ""
	}
	coll, _, _ := strings.Cut(segs[2], ":")
	switch {
	case slices.Contains(analyticsDataCollections, coll):
		return analyticsAPIData, "the " + coll + " resource"
	case slices.Contains(analyticsAdminCollections, coll):
		return analyticsAPIAdmin, "the " + coll + " resource"
	}
	return "", ""
}

// analyticsAPIName names an API in messages.
func analyticsAPIName(api string) string {
	if api == analyticsAPIData {
		return "Data API"
	}
	return "Admin API"
}

// chooseAnalyticsAPI picks the API of an analytics API Call: the one the
// endpoint belongs to, which an explicit api must agree with; the
// explicit api for an endpoint neither API is known to serve.
func chooseAnalyticsAPI(api, endpoint string) (string, error) {
	if api != "" && api != analyticsAPIData && api != analyticsAPIAdmin {
		return "", invalid("api must be %q or %q, or left out to infer it from the endpoint", analyticsAPIData, analyticsAPIAdmin)
	}
	inferred, why := analyticsAPIOf(endpoint)
	switch {
	case inferred == "" && api == "":
		return "", invalid("cannot tell which analytics API serves %q: it is neither a Data API report method (such as v1beta/properties/123:runReport), metadata or audience export, nor an Admin API resource (accounts, accountSummaries, properties and their collections such as keyEvents or dataStreams); check the endpoint, or set api to %q or %q",
			clipEndpoint(endpoint), analyticsAPIData, analyticsAPIAdmin)
	case inferred == "":
		return api, nil
	case api != "" && api != inferred:
		return "", invalid("api %q contradicts the endpoint: %q is %s, served by the %s, not the %s; set api to %q or leave it out",
			api, clipEndpoint(endpoint), why, analyticsAPIName(inferred), analyticsAPIName(api), inferred)
	}
	return inferred, nil
}

// clipEndpoint shortens an endpoint for a message.
func clipEndpoint(e string) string {
	if r := []rune(e); len(r) > 120 {
		return string(r[:120]) + "…"
	}
	return e
}
