package fakeanalytics

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
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
	accountName  = regexp.MustCompile(`^accounts/([0-9]+)$`)
	currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)
	eventName    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,39}$`)
)

const noPermission = "The caller does not have permission"

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

type propertyJSON struct {
	Name             string `json:"name"`
	PropertyType     string `json:"propertyType"`
	CreateTime       string `json:"createTime"`
	UpdateTime       string `json:"updateTime"`
	Parent           string `json:"parent"`
	DisplayName      string `json:"displayName"`
	IndustryCategory string `json:"industryCategory,omitempty"`
	TimeZone         string `json:"timeZone"`
	CurrencyCode     string `json:"currencyCode,omitempty"`
	ServiceLevel     string `json:"serviceLevel"`
	DeleteTime       string `json:"deleteTime,omitempty"`
	ExpireTime       string `json:"expireTime,omitempty"`
	Account          string `json:"account"`
}

func (p Property) toJSON() propertyJSON {
	return propertyJSON{
		Name:             "properties/" + p.ID,
		PropertyType:     p.PropertyType,
		CreateTime:       stamp(p.CreateTime),
		UpdateTime:       stamp(p.UpdateTime),
		Parent:           "accounts/" + p.Account,
		DisplayName:      p.DisplayName,
		IndustryCategory: p.IndustryCategory,
		TimeZone:         p.TimeZone,
		CurrencyCode:     p.CurrencyCode,
		ServiceLevel:     p.ServiceLevel,
		DeleteTime:       stampIf(p.DeleteTime),
		ExpireTime:       stampIf(p.ExpireTime),
		Account:          "accounts/" + p.Account,
	}
}

// stampIf stamps t, or gives "" for the zero time.
func stampIf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return stamp(t)
}

func keyEventJSON(property string, k *KeyEvent) map[string]any {
	return map[string]any{
		"name":           "properties/" + property + "/keyEvents/" + k.ID,
		"eventName":      k.EventName,
		"createTime":     stamp(k.CreateTime),
		"deletable":      k.Deletable,
		"custom":         k.Custom,
		"countingMethod": k.CountingMethod,
	}
}

func dataStreamJSON(property string, d *DataStream) map[string]any {
	out := map[string]any{
		"name":        "properties/" + property + "/dataStreams/" + d.ID,
		"type":        d.Type,
		"displayName": d.DisplayName,
		"createTime":  stamp(d.CreateTime),
		"updateTime":  stamp(d.UpdateTime),
	}
	switch d.Type {
	case "WEB_DATA_STREAM":
		out["webStreamData"] = nonEmpty(map[string]string{"measurementId": d.MeasurementID, "defaultUri": d.DefaultURI})
	case "ANDROID_APP_DATA_STREAM":
		out["androidAppStreamData"] = nonEmpty(map[string]string{"packageName": d.PackageName})
	case "IOS_APP_DATA_STREAM":
		out["iosAppStreamData"] = nonEmpty(map[string]string{"bundleId": d.BundleID})
	}
	if d.DisplayName == "" {
		delete(out, "displayName")
	}
	return out
}

// nonEmpty drops m's empty values, as proto3 JSON leaves them out.
func nonEmpty(m map[string]string) map[string]string {
	maps.DeleteFunc(m, func(_, v string) bool { return v == "" })
	return m
}

// page cuts a list by pageSize (default 50, at most 200) and pageToken,
// and returns the next page token ("" on the last page).
func page[T any](c *call, items []T) ([]T, string, bool) {
	q := c.r.URL.Query()
	size := 50
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			c.fail(http.StatusBadRequest, "pageSize must be a non-negative integer.")
			return nil, "", false
		}
		if n > 0 {
			size = min(n, 200)
		}
	}
	start := 0
	if tok := q.Get("pageToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(b), "offset:") || n < 0 || n > len(items) {
			c.fail(http.StatusBadRequest, "Invalid page token.")
			return nil, "", false
		}
		start = n
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end)))
	}
	return items[start:end], next, true
}

// listAnswer pages all (see page) and writes {key: items, nextPageToken}
// leaving out what is empty, as proto3 JSON does.
func listAnswer[T any](c *call, key string, all []T) {
	items, next, ok := page(c, all)
	if !ok {
		return
	}
	out := map[string]any{}
	if len(items) > 0 {
		out[key] = items
	}
	if next != "" {
		out["nextPageToken"] = next
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (s *Server) accountSummaries(c *call) {
	type propSummary struct {
		Property     string `json:"property"`
		DisplayName  string `json:"displayName"`
		PropertyType string `json:"propertyType"`
		Parent       string `json:"parent"`
	}
	type summary struct {
		Name              string        `json:"name"`
		Account           string        `json:"account"`
		DisplayName       string        `json:"displayName"`
		PropertySummaries []propSummary `json:"propertySummaries,omitempty"`
	}
	s.mu.Lock()
	ids := slices.Collect(maps.Keys(s.accounts))
	slices.SortFunc(ids, compareNumeric)
	var all []summary
	g := s.grants[c.email]
	for _, aid := range ids {
		sum := summary{Name: "accountSummaries/" + aid, Account: "accounts/" + aid, DisplayName: s.accounts[aid].DisplayName}
		for _, pid := range s.propertyIDs() {
			p := s.props[pid].p
			if p.Account == aid && s.propertyRole(c.email, pid) >= RoleViewer {
				sum.PropertySummaries = append(sum.PropertySummaries, propSummary{
					Property: "properties/" + pid, DisplayName: p.DisplayName, PropertyType: p.PropertyType, Parent: "accounts/" + aid,
				})
			}
		}
		if g["accounts/"+aid] >= RoleViewer || len(sum.PropertySummaries) > 0 {
			all = append(all, sum)
		}
	}
	s.mu.Unlock()
	listAnswer(c, "accountSummaries", all)
}

func (s *Server) listProperties(c *call) {
	filter := c.r.URL.Query().Get("filter")
	if filter == "" {
		c.fail(http.StatusBadRequest, "filter is required. For example: parent:accounts/123.")
		return
	}
	kind, value, _ := strings.Cut(filter, ":")
	m := accountName.FindStringSubmatch(value)
	if (kind != "parent" && kind != "ancestor") || m == nil {
		c.fail(http.StatusBadRequest, fmt.Sprintf("Unsupported filter %q; use parent:accounts/{id} or ancestor:accounts/{id}.", filter))
		return
	}
	showDeleted := c.r.URL.Query().Get("showDeleted") == "true"
	s.mu.Lock()
	var all []propertyJSON
	for _, pid := range s.propertyIDs() {
		p := s.props[pid].p
		if p.Account == m[1] && s.propertyRole(c.email, pid) >= RoleViewer && (showDeleted || p.DeleteTime.IsZero()) {
			all = append(all, p.toJSON())
		}
	}
	s.mu.Unlock()
	listAnswer(c, "properties", all)
}

// adminProperty finds property id with at least role for the caller,
// answering 404 or 403 otherwise. Callers hold mu.
func (s *Server) adminProperty(c *call, role Role) (*propState, bool) {
	st, ok := s.props[c.vars["id"]]
	if !ok {
		c.fail(http.StatusNotFound, "Requested entity was not found.")
		return nil, false
	}
	if s.propertyRole(c.email, st.p.ID) < role {
		c.fail(http.StatusForbidden, noPermission)
		return nil, false
	}
	return st, true
}

func (s *Server) getProperty(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.adminProperty(c, RoleViewer); ok {
		writeJSON(c.w, http.StatusOK, st.p.toJSON())
	}
}

func (s *Server) createProperty(c *call) {
	var in struct {
		Name             string `json:"name"`
		Parent           string `json:"parent"`
		DisplayName      string `json:"displayName"`
		TimeZone         string `json:"timeZone"`
		CurrencyCode     string `json:"currencyCode"`
		IndustryCategory string `json:"industryCategory"`
		PropertyType     string `json:"propertyType"`
		ServiceLevel     string `json:"serviceLevel"`
		CreateTime       string `json:"createTime"`
		UpdateTime       string `json:"updateTime"`
		Account          string `json:"account"`
	}
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		c.fail(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	m := accountName.FindStringSubmatch(in.Parent)
	switch {
	case m == nil:
		c.fail(http.StatusBadRequest, "parent is required and must be accounts/{id}.")
		return
	case in.DisplayName == "" || len(utf16.Encode([]rune(in.DisplayName))) > 100:
		c.fail(http.StatusBadRequest, "displayName is required and must be at most 100 UTF-16 code units.")
		return
	case in.TimeZone == "" || in.TimeZone == "Local" || !validZone(in.TimeZone):
		c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid timeZone %q.", in.TimeZone))
		return
	case in.CurrencyCode != "" && !currencyCode.MatchString(in.CurrencyCode):
		c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid currencyCode %q.", in.CurrencyCode))
		return
	case in.IndustryCategory != "" && !slices.Contains(industryCategories, in.IndustryCategory):
		c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid value at 'property.industry_category' (type.googleapis.com/google.analytics.admin.v1beta.IndustryCategory), %q", in.IndustryCategory))
		return
	case in.PropertyType != "" && !slices.Contains([]string{"PROPERTY_TYPE_ORDINARY", "PROPERTY_TYPE_SUBPROPERTY", "PROPERTY_TYPE_ROLLUP"}, in.PropertyType):
		c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid propertyType %q.", in.PropertyType))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, known := s.accounts[m[1]]
	if !known || s.grants[c.email][in.Parent] < RoleAdministrator {
		c.fail(http.StatusForbidden, noPermission)
		return
	}
	p := s.addProperty(Property{
		Account:          m[1],
		DisplayName:      in.DisplayName,
		TimeZone:         in.TimeZone,
		CurrencyCode:     in.CurrencyCode,
		IndustryCategory: in.IndustryCategory,
		PropertyType:     in.PropertyType,
	})
	writeJSON(c.w, http.StatusOK, p.toJSON())
}

func validZone(name string) bool {
	_, err := time.LoadLocation(name)
	return err == nil
}

func (s *Server) listKeyEvents(c *call) {
	s.mu.Lock()
	st, ok := s.adminProperty(c, RoleViewer)
	var all []map[string]any
	if ok {
		for _, k := range st.keyEvents {
			all = append(all, keyEventJSON(st.p.ID, k))
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	listAnswer(c, "keyEvents", all)
}

func (s *Server) createKeyEvent(c *call) {
	var in struct {
		Name           string `json:"name"`
		EventName      string `json:"eventName"`
		CountingMethod string `json:"countingMethod"`
		DefaultValue   *struct {
			NumericValue *float64 `json:"numericValue"`
			CurrencyCode string   `json:"currencyCode"`
		} `json:"defaultValue"`
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.adminProperty(c, RoleEditor)
	if !ok {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		c.fail(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	switch {
	case !eventName.MatchString(in.EventName):
		c.fail(http.StatusBadRequest, "eventName is required: up to 40 letters, digits and underscores, starting with a letter.")
		return
	case in.CountingMethod != "ONCE_PER_EVENT" && in.CountingMethod != "ONCE_PER_SESSION":
		c.fail(http.StatusBadRequest, "countingMethod is required: ONCE_PER_EVENT or ONCE_PER_SESSION.")
		return
	case in.DefaultValue != nil && (in.DefaultValue.NumericValue == nil || !currencyCode.MatchString(in.DefaultValue.CurrencyCode)):
		c.fail(http.StatusBadRequest, "defaultValue needs numericValue and currencyCode.")
		return
	}
	if slices.ContainsFunc(st.keyEvents, func(k *KeyEvent) bool { return k.EventName == in.EventName }) {
		c.fail(http.StatusConflict, fmt.Sprintf("A key event with eventName %s already exists.", in.EventName))
		return
	}
	k := &KeyEvent{ID: s.nextID(), EventName: in.EventName, CountingMethod: in.CountingMethod,
		CreateTime: s.now().UTC(), Custom: true, Deletable: true}
	st.keyEvents = append(st.keyEvents, k)
	writeJSON(c.w, http.StatusOK, keyEventJSON(st.p.ID, k))
}

func (s *Server) keyEvent(c *call, del bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	role := RoleViewer
	if del {
		role = RoleEditor
	}
	st, ok := s.adminProperty(c, role)
	if !ok {
		return
	}
	i := slices.IndexFunc(st.keyEvents, func(k *KeyEvent) bool { return k.ID == c.vars["keyEventId"] })
	if i < 0 {
		c.fail(http.StatusNotFound, "Requested entity was not found.")
		return
	}
	if !del {
		writeJSON(c.w, http.StatusOK, keyEventJSON(st.p.ID, st.keyEvents[i]))
		return
	}
	if !st.keyEvents[i].Deletable {
		c.fail(http.StatusBadRequest, "This key event cannot be deleted.")
		return
	}
	st.keyEvents = slices.Delete(st.keyEvents, i, i+1)
	writeJSON(c.w, http.StatusOK, map[string]any{})
}

func (s *Server) listDataStreams(c *call) {
	s.mu.Lock()
	st, ok := s.adminProperty(c, RoleViewer)
	var all []map[string]any
	if ok {
		for _, d := range st.streams {
			all = append(all, dataStreamJSON(st.p.ID, d))
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	listAnswer(c, "dataStreams", all)
}

func (s *Server) getDataStream(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.adminProperty(c, RoleViewer)
	if !ok {
		return
	}
	i := slices.IndexFunc(st.streams, func(d *DataStream) bool { return d.ID == c.vars["dataStreamId"] })
	if i < 0 {
		c.fail(http.StatusNotFound, "Requested entity was not found.")
		return
	}
	writeJSON(c.w, http.StatusOK, dataStreamJSON(st.p.ID, st.streams[i]))
}

// updatable lists a resource's fields an update may change, by their
// snake_case mask path and JSON name; "*" selects them all.
type updatable map[string]string

// paths parses an update's updateMask query parameter: required,
// comma-separated, snake_case (camelCase read too, as Google does), each
// an updatable field or "*". It returns the JSON names to copy.
func (u updatable) paths(c *call, resource string) ([]string, bool) {
	mask := c.r.URL.Query().Get("updateMask")
	if mask == "" {
		c.fail(http.StatusBadRequest, "update_mask is required: name the fields to update, e.g. updateMask=display_name, or * for all of them.")
		return nil, false
	}
	var out []string
	for _, p := range strings.Split(mask, ",") {
		p = strings.TrimSpace(p)
		if p == "*" {
			return slices.Sorted(maps.Values(u)), true
		}
		name, ok := u[snake(p)]
		if !ok {
			c.fail(http.StatusBadRequest, fmt.Sprintf("Field %q in update_mask is not an updatable field of %s; the updatable ones are %s.", p, resource, strings.Join(slices.Sorted(maps.Keys(u)), ", ")))
			return nil, false
		}
		out = append(out, name)
	}
	return out, true
}

// snake turns a camelCase field path into snake_case.
func snake(p string) string {
	var b strings.Builder
	for _, r := range p {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// propertyFields are a Property's updatable fields.
var propertyFields = updatable{
	"display_name": "displayName", "time_zone": "timeZone",
	"currency_code": "currencyCode", "industry_category": "industryCategory",
}

// decodeBody decodes an update's body strictly into v.
func decodeBody(c *call, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		c.fail(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return false
	}
	return true
}

// liveProperty is adminProperty for a property not in the trash: a
// trashed one answers 404. Callers hold mu.
func (s *Server) liveProperty(c *call, role Role) (*propState, bool) {
	st, ok := s.adminProperty(c, role)
	if ok && !st.p.DeleteTime.IsZero() {
		c.fail(http.StatusNotFound, "Requested entity was not found.")
		return nil, false
	}
	return st, ok
}

// updateProperty answers PATCH properties/{id}?updateMask=…: the
// fields the mask names take the body's values, validated as on create;
// it needs the Editor role.
func (s *Server) updateProperty(c *call) {
	var in propertyJSON
	if !decodeBody(c, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.liveProperty(c, RoleEditor)
	if !ok {
		return
	}
	fields, ok := propertyFields.paths(c, "Property")
	if !ok {
		return
	}
	if in.Name != "" && in.Name != "properties/"+st.p.ID {
		c.fail(http.StatusBadRequest, fmt.Sprintf("The body's name %s is not the property of the URL, properties/%s.", in.Name, st.p.ID))
		return
	}
	p := st.p
	for _, f := range fields {
		switch f {
		case "displayName":
			if in.DisplayName == "" || len(utf16.Encode([]rune(in.DisplayName))) > 100 {
				c.fail(http.StatusBadRequest, "displayName is required and must be at most 100 UTF-16 code units.")
				return
			}
			p.DisplayName = in.DisplayName
		case "timeZone":
			if in.TimeZone == "" || in.TimeZone == "Local" || !validZone(in.TimeZone) {
				c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid timeZone %q.", in.TimeZone))
				return
			}
			p.TimeZone = in.TimeZone
		case "currencyCode":
			if in.CurrencyCode != "" && !currencyCode.MatchString(in.CurrencyCode) {
				c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid currencyCode %q.", in.CurrencyCode))
				return
			}
			p.CurrencyCode = in.CurrencyCode
		case "industryCategory":
			if in.IndustryCategory != "" && !slices.Contains(industryCategories, in.IndustryCategory) {
				c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid value at 'property.industry_category' (type.googleapis.com/google.analytics.admin.v1beta.IndustryCategory), %q", in.IndustryCategory))
				return
			}
			p.IndustryCategory = in.IndustryCategory
		}
	}
	p.UpdateTime = s.now().UTC()
	st.p = p
	writeJSON(c.w, http.StatusOK, p.toJSON())
}

// deleteProperty answers DELETE properties/{id}: the property moves to
// the trash (deleteTime now, expireTime 35 days on) and is returned, as
// Google does; it needs the Administrator role. A trashed property
// answers 404.
func (s *Server) deleteProperty(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.liveProperty(c, RoleAdministrator)
	if !ok {
		return
	}
	now := s.now().UTC()
	st.p.DeleteTime, st.p.ExpireTime = now, now.Add(trashRetention)
	writeJSON(c.w, http.StatusOK, st.p.toJSON())
}

// streamTypes are the DataStream types and the member each one needs.
var streamTypes = map[string]string{
	"WEB_DATA_STREAM":         "webStreamData",
	"ANDROID_APP_DATA_STREAM": "androidAppStreamData",
	"IOS_APP_DATA_STREAM":     "iosAppStreamData",
}

// dataStreamIn is a DataStream as a request carries it; output-only
// fields are accepted and ignored, as Google does.
type dataStreamIn struct {
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

// maxStreamName is the longest display name of a data stream.
const maxStreamName = 255

// createDataStream answers POST properties/{id}/dataStreams: type is
// required and its *StreamData must be there (and no other's); a web
// stream needs a displayName, an Android one a packageName, an iOS one a
// bundleId. A web stream gets a measurement id. It needs the Editor role.
func (s *Server) createDataStream(c *call) {
	var in dataStreamIn
	if !decodeBody(c, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.liveProperty(c, RoleEditor)
	if !ok {
		return
	}
	member, known := streamTypes[in.Type]
	present := map[string]bool{"webStreamData": in.WebStreamData != nil, "androidAppStreamData": in.AndroidAppStreamData != nil, "iosAppStreamData": in.IOSAppStreamData != nil}
	d := DataStream{Type: in.Type, DisplayName: in.DisplayName}
	switch {
	case !known:
		c.fail(http.StatusBadRequest, fmt.Sprintf("type is required: one of WEB_DATA_STREAM, ANDROID_APP_DATA_STREAM, IOS_APP_DATA_STREAM (got %q).", in.Type))
		return
	case !present[member]:
		c.fail(http.StatusBadRequest, fmt.Sprintf("%s must be populated for a %s.", member, in.Type))
		return
	case len(utf16.Encode([]rune(in.DisplayName))) > maxStreamName:
		c.fail(http.StatusBadRequest, fmt.Sprintf("displayName must be at most %d UTF-16 code units.", maxStreamName))
		return
	}
	for m, set := range present {
		if set && m != member {
			c.fail(http.StatusBadRequest, fmt.Sprintf("%s does not apply to a %s; send only %s.", m, in.Type, member))
			return
		}
	}
	switch in.Type {
	case "WEB_DATA_STREAM":
		if in.DisplayName == "" {
			c.fail(http.StatusBadRequest, "displayName is required for web data streams.")
			return
		}
		if u := in.WebStreamData.DefaultURI; u != "" && !validURI(u) {
			c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid defaultUri %q: give the web app's address, such as https://www.example.com.", u))
			return
		}
		d.DefaultURI = in.WebStreamData.DefaultURI
	case "ANDROID_APP_DATA_STREAM":
		if in.AndroidAppStreamData.PackageName == "" {
			c.fail(http.StatusBadRequest, "androidAppStreamData.packageName is required.")
			return
		}
		d.PackageName = in.AndroidAppStreamData.PackageName
	case "IOS_APP_DATA_STREAM":
		if in.IOSAppStreamData.BundleID == "" {
			c.fail(http.StatusBadRequest, "iosAppStreamData.bundleId is required.")
			return
		}
		d.BundleID = in.IOSAppStreamData.BundleID
	}
	d = s.addDataStream(st, d)
	writeJSON(c.w, http.StatusOK, dataStreamJSON(st.p.ID, &d))
}

// validURI reports whether u is an http(s) address with a host.
func validURI(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// streamFields are a DataStream's updatable fields: type is immutable,
// the measurement id output only, an app's package name or bundle id
// immutable.
var streamFields = updatable{"display_name": "displayName", "web_stream_data.default_uri": "webStreamData.defaultUri"}

// stream finds the data stream of the URL in st, answering 404 when
// there is none. Callers hold mu.
func stream(c *call, st *propState) (int, bool) {
	i := slices.IndexFunc(st.streams, func(d *DataStream) bool { return d.ID == c.vars["dataStreamId"] })
	if i < 0 {
		c.fail(http.StatusNotFound, "Requested entity was not found.")
		return 0, false
	}
	return i, true
}

// updateDataStream answers PATCH properties/{id}/dataStreams/{id}
// ?updateMask=…; it needs the Editor role.
func (s *Server) updateDataStream(c *call) {
	var in dataStreamIn
	if !decodeBody(c, &in) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.liveProperty(c, RoleEditor)
	if !ok {
		return
	}
	i, ok := stream(c, st)
	if !ok {
		return
	}
	fields, ok := streamFields.paths(c, "DataStream")
	if !ok {
		return
	}
	d := *st.streams[i]
	for _, f := range fields {
		switch f {
		case "displayName":
			if d.Type == "WEB_DATA_STREAM" && in.DisplayName == "" {
				c.fail(http.StatusBadRequest, "displayName is required for web data streams.")
				return
			}
			if len(utf16.Encode([]rune(in.DisplayName))) > maxStreamName {
				c.fail(http.StatusBadRequest, fmt.Sprintf("displayName must be at most %d UTF-16 code units.", maxStreamName))
				return
			}
			d.DisplayName = in.DisplayName
		case "webStreamData.defaultUri":
			if d.Type != "WEB_DATA_STREAM" {
				c.fail(http.StatusBadRequest, "webStreamData.defaultUri applies to web data streams only.")
				return
			}
			u := ""
			if in.WebStreamData != nil {
				u = in.WebStreamData.DefaultURI
			}
			if u != "" && !validURI(u) {
				c.fail(http.StatusBadRequest, fmt.Sprintf("Invalid defaultUri %q: give the web app's address, such as https://www.example.com.", u))
				return
			}
			d.DefaultURI = u
		}
	}
	d.UpdateTime = s.now().UTC()
	*st.streams[i] = d
	writeJSON(c.w, http.StatusOK, dataStreamJSON(st.p.ID, &d))
}

// deleteDataStream answers DELETE properties/{id}/dataStreams/{id} with
// {}; it needs the Editor role.
func (s *Server) deleteDataStream(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.liveProperty(c, RoleEditor)
	if !ok {
		return
	}
	i, ok := stream(c, st)
	if !ok {
		return
	}
	st.streams = slices.Delete(st.streams, i, i+1)
	writeJSON(c.w, http.StatusOK, map[string]any{})
}
