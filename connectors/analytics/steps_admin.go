package analytics

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/triggerd/triggerd/connectors"
)

// List bounds: the Admin API pages by at most 200.
const (
	defaultListLimit = 200
	maxListLimit     = 1000
	maxAdminPageSize = 200
	maxListPages     = 100
)

// industryCategories is the Admin API's IndustryCategory enum.
var industryCategories = []string{
	"INDUSTRY_CATEGORY_UNSPECIFIED", "AUTOMOTIVE", "BUSINESS_AND_INDUSTRIAL_MARKETS", "FINANCE", "HEALTHCARE",
	"TECHNOLOGY", "TRAVEL", "OTHER", "ARTS_AND_ENTERTAINMENT", "BEAUTY_AND_FITNESS", "BOOKS_AND_LITERATURE",
	"FOOD_AND_DRINK", "GAMES", "HOBBIES_AND_LEISURE", "HOME_AND_GARDEN", "INTERNET_AND_TELECOM",
	"LAW_AND_GOVERNMENT", "NEWS", "ONLINE_COMMUNITIES", "PEOPLE_AND_SOCIETY", "PETS_AND_ANIMALS",
	"REAL_ESTATE", "REFERENCE", "SCIENCE", "SPORTS", "JOBS_AND_EDUCATION", "SHOPPING",
}

var (
	currencyPattern   = regexp.MustCompile(`^[A-Z]{3}$`)
	dataStreamPattern = regexp.MustCompile(`^[0-9]+$`)
)

// splitName splits "properties/1/<collection>/2" into "properties/1" and
// "2".
func splitName(name, collection string) (string, string) {
	prop, id, ok := strings.Cut(name, "/"+collection+"/")
	if !ok {
		return "", ""
	}
	return prop, id
}

// listLimit validates an optional list limit.
func listLimit(limit *int) (int, error) {
	if limit == nil {
		return defaultListLimit, nil
	}
	if *limit < 1 || *limit > maxListLimit {
		return 0, connectors.Errorf(connectors.CodeValidation, "limit %d is outside 1..%d", *limit, maxListLimit)
	}
	return *limit, nil
}

// Property is a GA4 property.
type Property struct {
	// Property is properties/{id}.
	Property         string `json:"property"`
	PropertyID       string `json:"property_id"`
	DisplayName      string `json:"display_name"`
	TimeZone         string `json:"time_zone"`
	CurrencyCode     string `json:"currency_code,omitempty"`
	IndustryCategory string `json:"industry_category,omitempty"`
	// Parent is accounts/{id} (or a property, for subproperties).
	Parent       string `json:"parent"`
	Account      string `json:"account,omitempty"`
	PropertyType string `json:"property_type,omitempty"`
	ServiceLevel string `json:"service_level,omitempty"`
	CreateTime   string `json:"create_time,omitempty"`
	UpdateTime   string `json:"update_time,omitempty"`
	DeleteTime   string `json:"delete_time,omitempty"`
}

func (p gaProperty) out() Property {
	return Property{
		Property: p.Name, PropertyID: strings.TrimPrefix(p.Name, "properties/"), DisplayName: p.DisplayName,
		TimeZone: p.TimeZone, CurrencyCode: p.CurrencyCode, IndustryCategory: p.IndustryCategory,
		Parent: p.Parent, Account: p.Account, PropertyType: p.PropertyType, ServiceLevel: p.ServiceLevel,
		CreateTime: p.CreateTime, UpdateTime: p.UpdateTime, DeleteTime: p.DeleteTime,
	}
}

type createPropertyIn struct {
	DisplayName      string `json:"display_name"`
	TimeZone         string `json:"time_zone"`
	CurrencyCode     string `json:"currency_code"`
	IndustryCategory string `json:"industry_category"`
	Account          string `json:"account"`
}

// createProperty runs Create properties: POST v1beta/properties under the
// account (default: the first analytics account of the connected
// account). It needs the Administrator role on that account.
func (tk *toolkit) createProperty(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in createPropertyIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	name := strings.TrimSpace(in.DisplayName)
	if name == "" || len(utf16.Encode([]rune(name))) > 100 {
		return nil, connectors.Errorf(connectors.CodeValidation, "display_name: want 1 to 100 characters (UTF-16 code units)")
	}
	if in.TimeZone == "" || in.TimeZone == "Local" {
		return nil, connectors.Errorf(connectors.CodeValidation, "time_zone: want an IANA time zone such as America/Los_Angeles")
	}
	if _, err := time.LoadLocation(in.TimeZone); err != nil {
		return nil, connectors.Errorf(connectors.CodeValidation, "time_zone %q is not an IANA time zone (e.g. America/Los_Angeles, Europe/Berlin)", in.TimeZone)
	}
	if !currencyPattern.MatchString(in.CurrencyCode) {
		return nil, connectors.Errorf(connectors.CodeValidation, "currency_code %q: want an ISO 4217 code of three capital letters, e.g. USD", in.CurrencyCode)
	}
	if in.IndustryCategory != "" && !slices.Contains(industryCategories, in.IndustryCategory) {
		return nil, connectors.Errorf(connectors.CodeValidation, "industry_category %q is not one of %s", in.IndustryCategory, strings.Join(industryCategories, ", "))
	}
	account, err := accountOrDefault(in.Account, env.Account.Metadata)
	if err != nil {
		return nil, err
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	p, err := c.CreateProperty(ctx, propertyCreate{
		Account: account, DisplayName: name, TimeZone: in.TimeZone, CurrencyCode: in.CurrencyCode, IndustryCategory: in.IndustryCategory,
	})
	if err != nil {
		return nil, err
	}
	return p.out(), nil
}

type listPropertiesIn struct {
	Account     string `json:"account"`
	ShowDeleted bool   `json:"show_deleted"`
	Limit       *int   `json:"limit"`
	PageToken   string `json:"page_token"`
}

// PropertyList is the output of List Properties.
type PropertyList struct {
	Properties []Property `json:"properties"`
	// NextPageToken continues the list (pass it as page_token), nil at its
	// end.
	NextPageToken *string `json:"next_page_token"`
}

func nextToken(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// listProperties runs List Properties: GET
// v1beta/properties?filter=parent:accounts/{id}.
func (tk *toolkit) listProperties(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in listPropertiesIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	limit, err := listLimit(in.Limit)
	if err != nil {
		return nil, err
	}
	account, err := accountOrDefault(in.Account, env.Account.Metadata)
	if err != nil {
		return nil, err
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	items, next, err := c.ListProperties(ctx, account, in.ShowDeleted, limit, in.PageToken)
	if err != nil {
		return nil, err
	}
	out := PropertyList{Properties: make([]Property, 0, len(items)), NextPageToken: nextToken(next)}
	for _, p := range items {
		out.Properties = append(out.Properties, p.out())
	}
	return out, nil
}

type propertyIn struct {
	Property string `json:"property"`
}

// getProperty runs Get Property: GET v1beta/properties/{id}.
func (tk *toolkit) getProperty(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in propertyIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	id, err := propertyID("property", in.Property)
	if err != nil {
		return nil, err
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	p, err := c.GetProperty(ctx, id)
	if err != nil {
		return nil, err
	}
	return p.out(), nil
}

type listInPropertyIn struct {
	Property  string `json:"property"`
	Limit     *int   `json:"limit"`
	PageToken string `json:"page_token"`
}

// KeyEventList is the output of List Key Events.
type KeyEventList struct {
	KeyEvents     []KeyEvent `json:"key_events"`
	NextPageToken *string    `json:"next_page_token"`
}

// listKeyEvents runs List Key Events: GET v1beta/properties/{id}/keyEvents.
func (tk *toolkit) listKeyEvents(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	items, next, err := listInProperty(ctx, tk, env, input, (*client).ListKeyEvents, gaKeyEvent.out)
	if err != nil {
		return nil, err
	}
	return KeyEventList{KeyEvents: items, NextPageToken: next}, nil
}

// DataStream is a GA4 data stream.
type DataStream struct {
	// DataStream is properties/{id}/dataStreams/{id}.
	DataStream   string `json:"data_stream"`
	DataStreamID string `json:"data_stream_id"`
	Property     string `json:"property"`
	// Type is WEB_DATA_STREAM, ANDROID_APP_DATA_STREAM or
	// IOS_APP_DATA_STREAM.
	Type          string `json:"type"`
	DisplayName   string `json:"display_name,omitempty"`
	MeasurementID string `json:"measurement_id,omitempty"`
	DefaultURI    string `json:"default_uri,omitempty"`
	PackageName   string `json:"package_name,omitempty"`
	BundleID      string `json:"bundle_id,omitempty"`
	FirebaseAppID string `json:"firebase_app_id,omitempty"`
	CreateTime    string `json:"create_time,omitempty"`
	UpdateTime    string `json:"update_time,omitempty"`
}

func (d gaDataStream) out() DataStream {
	prop, id := splitName(d.Name, "dataStreams")
	out := DataStream{DataStream: d.Name, DataStreamID: id, Property: prop, Type: d.Type,
		DisplayName: d.DisplayName, CreateTime: d.CreateTime, UpdateTime: d.UpdateTime}
	if w := d.WebStreamData; w != nil {
		out.MeasurementID, out.DefaultURI, out.FirebaseAppID = w.MeasurementID, w.DefaultURI, w.FirebaseAppID
	}
	if a := d.AndroidAppStreamData; a != nil {
		out.PackageName, out.FirebaseAppID = a.PackageName, a.FirebaseAppID
	}
	if i := d.IOSAppStreamData; i != nil {
		out.BundleID, out.FirebaseAppID = i.BundleID, i.FirebaseAppID
	}
	return out
}

// DataStreamList is the output of List Data Streams.
type DataStreamList struct {
	DataStreams   []DataStream `json:"data_streams"`
	NextPageToken *string      `json:"next_page_token"`
}

// listDataStreams runs List Data Streams: GET
// v1beta/properties/{id}/dataStreams.
func (tk *toolkit) listDataStreams(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	items, next, err := listInProperty(ctx, tk, env, input, (*client).ListDataStreams, gaDataStream.out)
	if err != nil {
		return nil, err
	}
	return DataStreamList{DataStreams: items, NextPageToken: next}, nil
}

// listInProperty runs a list step over one property's children: it reads
// the property, limit and page token from input, lists the children with
// list up to the limit, and converts each item.
func listInProperty[T, O any](ctx context.Context, tk *toolkit, env connectors.Env, input json.RawMessage,
	list func(c *client, ctx context.Context, id string, limit int, pageToken string) ([]T, string, error), conv func(T) O) ([]O, *string, error) {
	var in listInPropertyIn
	if err := decodeInput(input, &in); err != nil {
		return nil, nil, err
	}
	id, err := propertyID("property", in.Property)
	if err != nil {
		return nil, nil, err
	}
	limit, err := listLimit(in.Limit)
	if err != nil {
		return nil, nil, err
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, nil, err
	}
	items, next, err := list(c, ctx, id, limit, in.PageToken)
	if err != nil {
		return nil, nil, err
	}
	out := make([]O, 0, len(items))
	for _, it := range items {
		out = append(out, conv(it))
	}
	return out, nextToken(next), nil
}

type getDataStreamIn struct {
	Property     string `json:"property"`
	DataStreamID string `json:"data_stream_id"`
}

// getDataStream runs Get Data Stream: GET
// v1beta/properties/{id}/dataStreams/{id}.
func (tk *toolkit) getDataStream(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in getDataStreamIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	id, err := propertyID("property", in.Property)
	if err != nil {
		return nil, err
	}
	if !dataStreamPattern.MatchString(in.DataStreamID) {
		return nil, connectors.Errorf(connectors.CodeValidation, "data_stream_id %q: want the numeric id", in.DataStreamID)
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	d, err := c.GetDataStream(ctx, id, in.DataStreamID)
	if err != nil {
		return nil, err
	}
	return d.out(), nil
}

type listSummariesIn struct {
	Limit     *int   `json:"limit"`
	PageToken string `json:"page_token"`
}

// AccountSummary is an analytics account and the properties the
// connected account can see in it.
type AccountSummary struct {
	Account     string            `json:"account"`
	DisplayName string            `json:"display_name"`
	Properties  []PropertySummary `json:"properties"`
}

// PropertySummary names a property of an AccountSummary.
type PropertySummary struct {
	Property     string `json:"property"`
	DisplayName  string `json:"display_name"`
	PropertyType string `json:"property_type,omitempty"`
	Parent       string `json:"parent,omitempty"`
}

// AccountSummaryList is the output of List Account Summaries.
type AccountSummaryList struct {
	AccountSummaries []AccountSummary `json:"account_summaries"`
	NextPageToken    *string          `json:"next_page_token"`
}

// listAccountSummaries runs List Account Summaries: GET
// v1beta/accountSummaries.
func (tk *toolkit) listAccountSummaries(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in listSummariesIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	limit, err := listLimit(in.Limit)
	if err != nil {
		return nil, err
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	items, next, err := c.ListAccountSummaries(ctx, limit, in.PageToken)
	if err != nil {
		return nil, err
	}
	out := AccountSummaryList{AccountSummaries: make([]AccountSummary, 0, len(items)), NextPageToken: nextToken(next)}
	for _, s := range items {
		a := AccountSummary{Account: s.Account, DisplayName: s.DisplayName, Properties: []PropertySummary{}}
		for _, p := range s.PropertySummaries {
			a.Properties = append(a.Properties, PropertySummary{p.Property, p.DisplayName, p.PropertyType, p.Parent})
		}
		out.AccountSummaries = append(out.AccountSummaries, a)
	}
	return out, nil
}
