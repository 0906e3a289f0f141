package analytics

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// The Google Analytics Data and Admin API methods the analytics steps
// call: one client method per upstream request, each linking Google's
// reference for it. A property is named by its numeric id.

// RunReport runs a report on property id: method is "runReport" (core
// data) or "runRealtimeReport" (the last 30 minutes). A 429 is charged to
// the property's quota category of method.
//
// Google API docs: https://developers.google.com/analytics/devguides/reporting/data/v1/rest/v1beta/properties/runReport
// and https://developers.google.com/analytics/devguides/reporting/data/v1/rest/v1beta/properties/runRealtimeReport
func (c *client) RunReport(ctx context.Context, id, method string, req *gaReportRequest) (*gaReportResponse, error) {
	cat := categoryOf(method)
	var resp gaReportResponse
	err := c.do(ctx, call{
		op:       fmt.Sprintf("run %s report on properties/%s", cat, id),
		denied:   fmt.Sprintf("reading reports needs at least the Viewer role on properties/%s", id),
		method:   http.MethodPost,
		url:      fmt.Sprintf("%s/v1beta/properties/%s:%s", c.data, id, method),
		body:     req,
		property: id,
		category: cat,
	}, &resp)
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// gaMetadata is the dimensions and metrics a property's reports can use.
type gaMetadata struct {
	Dimensions []struct {
		APIName            string   `json:"apiName"`
		UIName             string   `json:"uiName"`
		Description        string   `json:"description"`
		Category           string   `json:"category"`
		CustomDefinition   bool     `json:"customDefinition"`
		DeprecatedAPINames []string `json:"deprecatedApiNames"`
	} `json:"dimensions"`
	Metrics []struct {
		APIName          string   `json:"apiName"`
		UIName           string   `json:"uiName"`
		Description      string   `json:"description"`
		Type             string   `json:"type"`
		Expression       string   `json:"expression"`
		Category         string   `json:"category"`
		CustomDefinition bool     `json:"customDefinition"`
		BlockedReasons   []string `json:"blockedReasons"`
	} `json:"metrics"`
}

// GetMetadata reads the dimensions and metrics of property id
// (properties/0: the ones common to all properties).
//
// Google API docs: https://developers.google.com/analytics/devguides/reporting/data/v1/rest/v1beta/properties/getMetadata
func (c *client) GetMetadata(ctx context.Context, id string) (*gaMetadata, error) {
	var m gaMetadata
	err := c.do(ctx, call{
		op:       "read metadata of properties/" + id,
		denied:   "reading metadata needs at least the Viewer role on properties/" + id,
		method:   http.MethodGet,
		url:      fmt.Sprintf("%s/v1beta/properties/%s/metadata", c.data, id),
		property: id,
	}, &m)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// CreateKeyEvent marks event as a key event of property id, counted by
// countingMethod (ONCE_PER_EVENT or ONCE_PER_SESSION).
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/properties.keyEvents/create
func (c *client) CreateKeyEvent(ctx context.Context, id, event, countingMethod string) (*gaKeyEvent, error) {
	var ke gaKeyEvent
	err := c.do(ctx, call{
		op:     fmt.Sprintf("create key event %s in properties/%s", event, id),
		denied: fmt.Sprintf("creating a key event needs the Editor role on properties/%s", id),
		method: http.MethodPost,
		url:    fmt.Sprintf("%s/v1beta/properties/%s/keyEvents", c.admin, id),
		body:   map[string]string{"eventName": event, "countingMethod": countingMethod},
	}, &ke)
	if err != nil {
		return nil, err
	}
	return &ke, nil
}

// ListKeyEvents lists the key events of property id from pageToken (""
// for the start), reading at most limit; next continues the list ("" at
// its end).
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/properties.keyEvents/list
func (c *client) ListKeyEvents(ctx context.Context, id string, limit int, pageToken string) (events []gaKeyEvent, next string, err error) {
	return listPropertyChildren[gaKeyEvent](ctx, c, id, "key events", "keyEvents", limit, pageToken)
}

// ListDataStreams lists the data streams of property id as ListKeyEvents
// lists key events.
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/properties.dataStreams/list
func (c *client) ListDataStreams(ctx context.Context, id string, limit int, pageToken string) (streams []gaDataStream, next string, err error) {
	return listPropertyChildren[gaDataStream](ctx, c, id, "data streams", "dataStreams", limit, pageToken)
}

// listPropertyChildren reads the children key of property id (what names
// them in messages).
func listPropertyChildren[T any](ctx context.Context, c *client, id, what, key string, limit int, pageToken string) ([]T, string, error) {
	return listPages[T](ctx, c, call{
		op:     "list " + what + " of properties/" + id,
		denied: "listing " + what + " needs at least the Viewer role on properties/" + id,
		method: http.MethodGet,
		url:    fmt.Sprintf("%s/v1beta/properties/%s/%s", c.admin, id, key),
	}, key, limit, pageToken)
}

// GetDataStream reads data stream streamID of property id.
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/properties.dataStreams/get
func (c *client) GetDataStream(ctx context.Context, id, streamID string) (*gaDataStream, error) {
	var d gaDataStream
	err := c.do(ctx, call{
		op:     fmt.Sprintf("read data stream %s of properties/%s", streamID, id),
		denied: "reading a data stream needs at least the Viewer role on properties/" + id,
		method: http.MethodGet,
		url:    fmt.Sprintf("%s/v1beta/properties/%s/dataStreams/%s", c.admin, id, streamID),
	}, &d)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// propertyCreate is the body of CreateProperty.
type propertyCreate struct {
	Account, DisplayName, TimeZone, CurrencyCode string
	// IndustryCategory is sent when not empty.
	IndustryCategory string
}

// CreateProperty creates a property under in.Account (accounts/{id}).
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/properties/create
func (c *client) CreateProperty(ctx context.Context, in propertyCreate) (*gaProperty, error) {
	body := map[string]string{"parent": in.Account, "displayName": in.DisplayName, "timeZone": in.TimeZone, "currencyCode": in.CurrencyCode}
	if in.IndustryCategory != "" {
		body["industryCategory"] = in.IndustryCategory
	}
	var p gaProperty
	err := c.do(ctx, call{
		op:     "create property in " + in.Account,
		denied: "creating a property needs the Administrator role on " + in.Account,
		method: http.MethodPost,
		url:    c.admin + "/v1beta/properties",
		body:   body,
	}, &p)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// ListProperties lists the properties of account (accounts/{id}), those
// in the trash too when showDeleted, as ListKeyEvents lists key events.
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/properties/list
func (c *client) ListProperties(ctx context.Context, account string, showDeleted bool, limit int, pageToken string) (properties []gaProperty, next string, err error) {
	q := url.Values{"filter": {"parent:" + account}}
	if showDeleted {
		q.Set("showDeleted", "true")
	}
	return listPages[gaProperty](ctx, c, call{
		op:     "list properties of " + account,
		denied: "listing properties needs access to " + account,
		method: http.MethodGet,
		url:    c.admin + "/v1beta/properties?" + q.Encode(),
	}, "properties", limit, pageToken)
}

// GetProperty reads property id.
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/properties/get
func (c *client) GetProperty(ctx context.Context, id string) (*gaProperty, error) {
	var p gaProperty
	err := c.do(ctx, call{
		op:     "read properties/" + id,
		denied: "reading a property needs at least the Viewer role on properties/" + id,
		method: http.MethodGet,
		url:    fmt.Sprintf("%s/v1beta/properties/%s", c.admin, id),
	}, &p)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// gaAccountSummary is an account and the properties visible in it.
type gaAccountSummary struct {
	Account           string `json:"account"`
	DisplayName       string `json:"displayName"`
	PropertySummaries []struct {
		Property     string `json:"property"`
		DisplayName  string `json:"displayName"`
		PropertyType string `json:"propertyType"`
		Parent       string `json:"parent"`
	} `json:"propertySummaries"`
}

// ListAccountSummaries lists the accounts the connected account can see,
// with their properties, as ListKeyEvents lists key events.
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/accountSummaries/list
func (c *client) ListAccountSummaries(ctx context.Context, limit int, pageToken string) (summaries []gaAccountSummary, next string, err error) {
	return listPages[gaAccountSummary](ctx, c, call{
		op:     "list account summaries",
		method: http.MethodGet,
		url:    c.admin + "/v1beta/accountSummaries",
	}, "accountSummaries", limit, pageToken)
}

// Google's answers, as far as the steps read them.

type gaProperty struct {
	Name             string `json:"name"`
	PropertyType     string `json:"propertyType"`
	CreateTime       string `json:"createTime"`
	UpdateTime       string `json:"updateTime"`
	Parent           string `json:"parent"`
	DisplayName      string `json:"displayName"`
	IndustryCategory string `json:"industryCategory"`
	TimeZone         string `json:"timeZone"`
	CurrencyCode     string `json:"currencyCode"`
	ServiceLevel     string `json:"serviceLevel"`
	DeleteTime       string `json:"deleteTime"`
	Account          string `json:"account"`
}

type gaDataStream struct {
	Name          string `json:"name"`
	Type          string `json:"type"`
	DisplayName   string `json:"displayName"`
	CreateTime    string `json:"createTime"`
	UpdateTime    string `json:"updateTime"`
	WebStreamData *struct {
		MeasurementID string `json:"measurementId"`
		FirebaseAppID string `json:"firebaseAppId"`
		DefaultURI    string `json:"defaultUri"`
	} `json:"webStreamData"`
	AndroidAppStreamData *struct {
		FirebaseAppID string `json:"firebaseAppId"`
		PackageName   string `json:"packageName"`
	} `json:"androidAppStreamData"`
	IOSAppStreamData *struct {
		FirebaseAppID string `json:"firebaseAppId"`
		BundleID      string `json:"bundleId"`
	} `json:"iosAppStreamData"`
}

type gaKeyEvent struct {
	Name           string `json:"name"`
	EventName      string `json:"eventName"`
	CountingMethod string `json:"countingMethod"`
	CreateTime     string `json:"createTime"`
	Deletable      bool   `json:"deletable"`
	Custom         bool   `json:"custom"`
}
