package analytics

import "github.com/triggerd/triggerd/connectors/schema"

// Reusable schema fragments.
var (
	propertySchema = schema.String("The GA4 property as properties/<numeric property id>, e.g. properties/123456789.").
			Pattern(`^properties/[0-9]+$`)

	filterSchema = schema.AnyObject(`A GA4 FilterExpression, passed through as it is: exactly one of andGroup, orGroup, notExpression or filter. Example: {"filter": {"fieldName": "country", "stringFilter": {"matchType": "EXACT", "value": "Germany"}}}.`).
			MinProperties(1).MaxProperties(1)

	orderBysSchema = schema.Array(schema.Object(schema.Props{
		"metric":     schema.Text(""),
		"dimension":  schema.Text(""),
		"desc":       schema.Boolean("").Default(false),
		"order_type": schema.Enum("How dimension values compare (dimensions only).", "ALPHANUMERIC", "CASE_INSENSITIVE_ALPHANUMERIC", "NUMERIC"),
	}).With("oneOf", []schema.Schema{
		{"required": []string{"metric"}, "not": schema.Schema{"required": []string{"dimension"}}},
		{"required": []string{"dimension"}, "not": schema.Schema{"required": []string{"metric"}}},
	}), "Row order: each entry names a requested metric or dimension, with desc for descending.").MaxItems(20)

	limitSchema = schema.Integer("Rows to return at most (GA4's default 10,000).").Min(1).Max(250000)

	listLimitSchema = schema.Integer("Items to return at most; pages are followed until this many are read.").
			Min(1).Max(1000).Default(200)

	pageTokenSchema = schema.Text("Continue a previous list: its next_page_token.")

	nextPageTokenSchema = schema.String("Pass as page_token to continue; null at the end.").Nullable()

	// listProps are a list input's paging properties.
	listProps = schema.Props{"limit": listLimitSchema, "page_token": pageTokenSchema}
)

// accountSchema is an analytics account, accounts/<id>.
func accountSchema(desc string) schema.Schema {
	return schema.String(desc).Pattern(`^accounts/[0-9]+$`)
}

// fieldNames lists metrics or dimensions by API name.
func fieldNames(desc string) schema.Schema {
	return schema.Array(schema.String("").Pattern(`^[A-Za-z][A-Za-z0-9_:]{0,99}$`), desc).Unique()
}

// reportDate is a report date: YYYY-MM-DD, NdaysAgo, yesterday or today.
func reportDate(desc string) schema.Schema {
	return schema.String(desc).Pattern(`^([0-9]{4}-[0-9]{2}-[0-9]{2}|today|yesterday|[0-9]{1,4}daysAgo)$`)
}

// Input schemas.
var (
	runReportsInput = schema.Object(schema.Props{
		"property":   propertySchema,
		"metrics":    fieldNames("Metrics (at most 10), e.g. activeUsers, sessions, screenPageViews, eventCount, keyEvents (GA4's name for conversions since 2024; conversions is refused).").MinItems(1).MaxItems(10),
		"dimensions": fieldNames("Dimensions (at most 9), e.g. date, country, sessionSource, pagePath, eventName.").MaxItems(9),
		"date_ranges": schema.Array(schema.Object(schema.Props{
			"start_date": reportDate("YYYY-MM-DD, NdaysAgo, yesterday or today."),
			"end_date":   reportDate("YYYY-MM-DD, NdaysAgo, yesterday or today; not before start_date."),
			"name":       schema.String("The range's value of the dateRange dimension.").MaxLength(100),
		}, "start_date", "end_date"),
			"Date ranges (at most 4), in the property's time zone; default 28daysAgo to yesterday. Several ranges add a dateRange dimension.").
			MinItems(1).MaxItems(4),
		"dimension_filter": filterSchema,
		"metric_filter":    filterSchema,
		"order_bys":        orderBysSchema,
		"limit":            limitSchema,
		"offset":           schema.Integer("Rows to skip (paging with limit).").Min(0),
		"keep_empty_rows":  schema.Boolean("Keep rows whose metrics are all zero.").Default(false),
	}, "property", "metrics").Title("Run Reports input")

	runRealtimeInput = schema.Object(schema.Props{
		"property":   propertySchema,
		"metrics":    fieldNames("Realtime metrics, e.g. activeUsers, eventCount, screenPageViews, keyEvents.").MinItems(1).MaxItems(10),
		"dimensions": fieldNames("Realtime dimensions, e.g. country, eventName, unifiedScreenName, minutesAgo.").MaxItems(9),
		"minute_ranges": schema.Array(schema.Object(schema.Props{
			"start_minutes_ago": schema.Integer("").Min(0).Max(59).Default(29),
			"end_minutes_ago":   schema.Integer("").Min(0).Max(59).Default(0),
			"name":              schema.String("").MaxLength(100),
		}), "Minute ranges (at most 2); default the last 30 minutes.").MinItems(1).MaxItems(2),
		"dimension_filter": filterSchema,
		"metric_filter":    filterSchema,
		"order_bys":        orderBysSchema,
		"limit":            limitSchema,
	}, "property", "metrics").Title("Run Realtime Report input")

	getMetadataInput = schema.Object(schema.Props{
		"property": schema.String("The GA4 property as properties/<id>; properties/0 lists the fields common to all properties.").
			Pattern(`^properties/[0-9]+$`),
	}, "property").Title("Get Metadata input")

	createKeyEventInput = schema.Object(schema.Props{
		"property": propertySchema,
		"event_name": schema.String("An event already collected in the property (in the last 30 days), e.g. purchase, sign_up, generate_lead.").
			Pattern(`^[A-Za-z][A-Za-z0-9_]{0,39}$`),
		"counting_method": schema.Enum("Count every occurrence, or once per session.", "ONCE_PER_EVENT", "ONCE_PER_SESSION").
			Default("ONCE_PER_EVENT"),
	}, "property", "event_name").Title("Create Key Events input")

	createPropertyInput = schema.Object(schema.Props{
		"display_name":  schema.Text("The property's name.").MaxLength(100),
		"time_zone":     schema.Text("The reporting time zone, an IANA name such as America/Los_Angeles or Europe/Berlin.").MaxLength(64),
		"currency_code": schema.String("ISO 4217 currency, e.g. USD, EUR.").Pattern(`^[A-Z]{3}$`),
		"industry_category": schema.Enum("Optional, used for benchmarking.",
			"INDUSTRY_CATEGORY_UNSPECIFIED", "AUTOMOTIVE", "BUSINESS_AND_INDUSTRIAL_MARKETS", "FINANCE", "HEALTHCARE",
			"TECHNOLOGY", "TRAVEL", "OTHER", "ARTS_AND_ENTERTAINMENT", "BEAUTY_AND_FITNESS", "BOOKS_AND_LITERATURE",
			"FOOD_AND_DRINK", "GAMES", "HOBBIES_AND_LEISURE", "HOME_AND_GARDEN", "INTERNET_AND_TELECOM",
			"LAW_AND_GOVERNMENT", "NEWS", "ONLINE_COMMUNITIES", "PEOPLE_AND_SOCIETY", "PETS_AND_ANIMALS",
			"REAL_ESTATE", "REFERENCE", "SCIENCE", "SPORTS", "JOBS_AND_EDUCATION", "SHOPPING"),
		"account": accountSchema("The analytics account as accounts/<id>; default: the connected account's first. Needs the Administrator role on it."),
	}, "display_name", "time_zone", "currency_code").Title("Create properties input")

	listPropertiesInput = schema.Object(schema.Merge(schema.Props{
		"account":      accountSchema("The analytics account as accounts/<id>; default: the connected account's first."),
		"show_deleted": schema.Boolean("Include properties in the trash.").Default(false),
	}, listProps)).Title("List Properties input")

	getPropertyInput = schema.Object(schema.Props{"property": propertySchema}, "property").Title("Get Property input")

	listKeyEventsInput = schema.Object(schema.Merge(schema.Props{"property": propertySchema}, listProps), "property").
				Title("List Key Events input")

	listDataStreamsInput = schema.Object(schema.Merge(schema.Props{"property": propertySchema}, listProps), "property").
				Title("List Data Streams input")

	getDataStreamInput = schema.Object(schema.Props{
		"property":       propertySchema,
		"data_stream_id": schema.String("The data stream's numeric id.").Pattern(`^[0-9]+$`),
	}, "property", "data_stream_id").Title("Get Data Stream input")

	listAccountSummariesInput = schema.Object(listProps).Title("List Account Summaries input")
)

// Output schemas.
var (
	quotaDefs = schema.Props{
		"quotaStatus": schema.Object(schema.Props{"consumed": schema.Integer(""), "remaining": schema.Integer("")}, "consumed", "remaining"),
		"propertyQuota": schema.Object(schema.Props{
			"tokens_per_day":                            schema.Ref("quotaStatus"),
			"tokens_per_hour":                           schema.Ref("quotaStatus"),
			"concurrent_requests":                       schema.Ref("quotaStatus"),
			"server_errors_per_project_per_hour":        schema.Ref("quotaStatus"),
			"potentially_thresholded_requests_per_hour": schema.Ref("quotaStatus"),
			"tokens_per_project_per_hour":               schema.Ref("quotaStatus"),
		}),
	}

	// stringList is a list of strings.
	stringList = schema.Array(schema.String(""), "")

	reportOutput = schema.Object(schema.Props{
		"dimension_headers": stringList,
		"metric_headers":    schema.Array(schema.Object(schema.Props{"name": schema.String(""), "type": schema.String("")}, "name", "type"), ""),
		"rows": schema.Array(schema.Object(schema.Props{
			"dimensions": stringList,
			"metrics":    schema.Array(schema.Number(""), ""),
		}, "dimensions", "metrics"), "Empty when the report has no data."),
		"row_count":                schema.Integer("Rows in the whole report, regardless of limit and offset.").Min(0),
		"property_quota":           schema.OneOf(schema.Schema{"type": "null"}, schema.Ref("propertyQuota")),
		"time_zone":                schema.String(""),
		"currency_code":            schema.String(""),
		"subject_to_thresholding":  schema.Boolean(""),
		"data_loss_from_other_row": schema.Boolean(""),
		"data_may_change_from": schema.String("Run Reports: the first date (YYYY-MM-DD, the property's time zone) whose figures may still change. GA4 processes most data within 24 hours and all of it (attribution, session stitching, key events) within 48 hours, so a date is final only 48 hours after it ends.").
			Pattern(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`),
		"may_change":     schema.Boolean("The report covers figures that may still change: a date range reaching data_may_change_from, or any realtime report (its data is not processed)."),
		"covers_minutes": schema.Integer("Run Realtime Report: how many of the last minutes the report covers (30 by default).").Min(1).Max(60),
		"freshness":      schema.String("The above in one sentence, for people and agents."),
	}, "dimension_headers", "metric_headers", "rows", "row_count", "property_quota", "may_change", "freshness").Title("Report").Defs(quotaDefs)

	metadataOutput = schema.Object(schema.Props{
		"dimensions": schema.Array(schema.Object(schema.Props{
			"api_name": schema.String(""), "ui_name": schema.String(""), "description": schema.String(""),
			"category": schema.String(""), "custom_definition": schema.Boolean(""),
			"deprecated_api_names": stringList,
		}, "api_name", "ui_name", "description", "custom_definition"), ""),
		"metrics": schema.Array(schema.Object(schema.Props{
			"api_name": schema.String(""), "ui_name": schema.String(""), "description": schema.String(""),
			"type": schema.String(""), "expression": schema.String(""), "category": schema.String(""),
			"custom_definition": schema.Boolean(""),
			"blocked_reasons":   stringList,
		}, "api_name", "ui_name", "description", "type", "custom_definition"), ""),
	}, "dimensions", "metrics").Title("Metadata")

	keyEventDefs = schema.Props{"keyEvent": schema.Object(schema.Props{
		"name":            schema.String("properties/<id>/keyEvents/<id>."),
		"key_event_id":    schema.String(""),
		"property":        schema.String(""),
		"event_name":      schema.String(""),
		"counting_method": schema.String(""),
		"create_time":     schema.DateTime(""),
		"deletable":       schema.Boolean(""),
		"custom":          schema.Boolean(""),
		"event_count_30d": schema.Integer("Occurrences in the last 30 days (Create Key Events).").Min(0),
		"already_existed": schema.Boolean("The event was a key event before the step ran."),
	}, "name", "key_event_id", "property", "event_name", "counting_method", "deletable", "custom")}

	keyEventOutput = schema.Ref("keyEvent").Title("Key event").Defs(keyEventDefs)

	listKeyEventsOutput = schema.Object(schema.Props{
		"key_events":      schema.Array(schema.Ref("keyEvent"), ""),
		"next_page_token": nextPageTokenSchema,
	}, "key_events", "next_page_token").Title("Key events").Defs(keyEventDefs)

	propertyDefs = schema.Props{"property": schema.Object(schema.Props{
		"property":          schema.String("properties/<id>."),
		"property_id":       schema.String(""),
		"display_name":      schema.String(""),
		"time_zone":         schema.String(""),
		"currency_code":     schema.String(""),
		"industry_category": schema.String(""),
		"parent":            schema.String(""),
		"account":           schema.String(""),
		"property_type":     schema.String(""),
		"service_level":     schema.String(""),
		"create_time":       schema.DateTime(""),
		"update_time":       schema.DateTime(""),
		"delete_time":       schema.DateTime(""),
	}, "property", "property_id", "display_name", "time_zone", "parent")}

	propertyOutput = schema.Ref("property").Title("Property").Defs(propertyDefs)

	listPropertiesOutput = schema.Object(schema.Props{
		"properties":      schema.Array(schema.Ref("property"), ""),
		"next_page_token": nextPageTokenSchema,
	}, "properties", "next_page_token").Title("Properties").Defs(propertyDefs)

	dataStreamDefs = schema.Props{"dataStream": schema.Object(schema.Props{
		"data_stream":     schema.String("properties/<id>/dataStreams/<id>."),
		"data_stream_id":  schema.String(""),
		"property":        schema.String(""),
		"type":            schema.String(""),
		"display_name":    schema.String(""),
		"measurement_id":  schema.String("G-… (web streams)."),
		"default_uri":     schema.String(""),
		"package_name":    schema.String(""),
		"bundle_id":       schema.String(""),
		"firebase_app_id": schema.String(""),
		"create_time":     schema.DateTime(""),
		"update_time":     schema.DateTime(""),
	}, "data_stream", "data_stream_id", "property", "type")}

	dataStreamOutput = schema.Ref("dataStream").Title("Data stream").Defs(dataStreamDefs)

	listDataStreamsOutput = schema.Object(schema.Props{
		"data_streams":    schema.Array(schema.Ref("dataStream"), ""),
		"next_page_token": nextPageTokenSchema,
	}, "data_streams", "next_page_token").Title("Data streams").Defs(dataStreamDefs)

	listAccountSummariesOutput = schema.Object(schema.Props{
		"account_summaries": schema.Array(schema.Object(schema.Props{
			"account":      schema.String(""),
			"display_name": schema.String(""),
			"properties": schema.Array(schema.Object(schema.Props{
				"property": schema.String(""), "display_name": schema.String(""),
				"property_type": schema.String(""), "parent": schema.String(""),
			}, "property", "display_name"), ""),
		}, "account", "display_name", "properties"), ""),
		"next_page_token": nextPageTokenSchema,
	}, "account_summaries", "next_page_token").Title("Account summaries")
)
