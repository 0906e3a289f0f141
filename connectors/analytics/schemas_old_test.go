package analytics

// The JSON documents the step schemas were written as before they moved to
// the schema package; TestSchemasMatchTheirOldDocuments proves the move
// changed nothing, and both go in the next commit.

// Reusable JSON Schema fragments (draft 2020-12).
const (
	oldSchemaHeader = `"$schema": "https://json-schema.org/draft/2020-12/schema",`

	oldPropertySchema = `{"type": "string", "pattern": "^properties/[0-9]+$",
      "description": "The GA4 property as properties/<numeric property id>, e.g. properties/123456789."}`

	oldFieldNamesSchema = `{"type": "array", "uniqueItems": true,
      "items": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_:]{0,99}$"}`

	oldFilterSchema = `{"type": "object", "minProperties": 1, "maxProperties": 1,
      "description": "A GA4 FilterExpression, passed through as it is: exactly one of andGroup, orGroup, notExpression or filter. Example: {\"filter\": {\"fieldName\": \"country\", \"stringFilter\": {\"matchType\": \"EXACT\", \"value\": \"Germany\"}}}."}`

	oldOrderBysSchema = `{"type": "array", "maxItems": 20,
      "description": "Row order: each entry names a requested metric or dimension, with desc for descending.",
      "items": {
        "type": "object", "additionalProperties": false,
        "properties": {
          "metric": {"type": "string", "minLength": 1},
          "dimension": {"type": "string", "minLength": 1},
          "desc": {"type": "boolean", "default": false},
          "order_type": {"type": "string", "enum": ["ALPHANUMERIC", "CASE_INSENSITIVE_ALPHANUMERIC", "NUMERIC"],
            "description": "How dimension values compare (dimensions only)."}
        },
        "oneOf": [
          {"required": ["metric"], "not": {"required": ["dimension"]}},
          {"required": ["dimension"], "not": {"required": ["metric"]}}
        ]
      }}`

	oldLimitSchema = `{"type": "integer", "minimum": 1, "maximum": 250000,
      "description": "Rows to return at most (GA4's default 10,000)."}`

	oldListLimitSchema = `{"type": "integer", "minimum": 1, "maximum": 1000, "default": 200,
      "description": "Items to return at most; pages are followed until this many are read."}`

	oldPageTokenSchema = `{"type": "string", "minLength": 1,
      "description": "Continue a previous list: its next_page_token."}`

	oldNextPageTokenSchema = `{"type": ["string", "null"], "description": "Pass as page_token to continue; null at the end."}`
)

// Input schemas.
const (
	oldRunReportsInput = `{
  ` + oldSchemaHeader + `
  "title": "Run Reports input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property", "metrics"],
  "properties": {
    "property": ` + oldPropertySchema + `,
    "metrics": ` + oldFieldNamesSchema + `, "minItems": 1, "maxItems": 10,
      "description": "Metrics (at most 10), e.g. activeUsers, sessions, screenPageViews, eventCount, keyEvents."},
    "dimensions": ` + oldFieldNamesSchema + `, "maxItems": 9,
      "description": "Dimensions (at most 9), e.g. date, country, sessionSource, pagePath, eventName."},
    "date_ranges": {
      "type": "array", "minItems": 1, "maxItems": 4,
      "description": "Date ranges (at most 4), in the property's time zone; default 28daysAgo to yesterday. Several ranges add a dateRange dimension.",
      "items": {
        "type": "object", "additionalProperties": false, "required": ["start_date", "end_date"],
        "properties": {
          "start_date": {"type": "string", "pattern": "^([0-9]{4}-[0-9]{2}-[0-9]{2}|today|yesterday|[0-9]{1,4}daysAgo)$",
            "description": "YYYY-MM-DD, NdaysAgo, yesterday or today."},
          "end_date": {"type": "string", "pattern": "^([0-9]{4}-[0-9]{2}-[0-9]{2}|today|yesterday|[0-9]{1,4}daysAgo)$",
            "description": "YYYY-MM-DD, NdaysAgo, yesterday or today; not before start_date."},
          "name": {"type": "string", "maxLength": 100, "description": "The range's value of the dateRange dimension."}
        }
      }
    },
    "dimension_filter": ` + oldFilterSchema + `,
    "metric_filter": ` + oldFilterSchema + `,
    "order_bys": ` + oldOrderBysSchema + `,
    "limit": ` + oldLimitSchema + `,
    "offset": {"type": "integer", "minimum": 0, "description": "Rows to skip (paging with limit)."},
    "keep_empty_rows": {"type": "boolean", "default": false, "description": "Keep rows whose metrics are all zero."}
  }
}`

	oldRunRealtimeInput = `{
  ` + oldSchemaHeader + `
  "title": "Run Realtime Report input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property", "metrics"],
  "properties": {
    "property": ` + oldPropertySchema + `,
    "metrics": ` + oldFieldNamesSchema + `, "minItems": 1, "maxItems": 10,
      "description": "Realtime metrics, e.g. activeUsers, eventCount, screenPageViews, keyEvents."},
    "dimensions": ` + oldFieldNamesSchema + `, "maxItems": 9,
      "description": "Realtime dimensions, e.g. country, eventName, unifiedScreenName, minutesAgo."},
    "minute_ranges": {
      "type": "array", "minItems": 1, "maxItems": 2,
      "description": "Minute ranges (at most 2); default the last 30 minutes.",
      "items": {
        "type": "object", "additionalProperties": false,
        "properties": {
          "start_minutes_ago": {"type": "integer", "minimum": 0, "maximum": 59, "default": 29},
          "end_minutes_ago": {"type": "integer", "minimum": 0, "maximum": 59, "default": 0},
          "name": {"type": "string", "maxLength": 100}
        }
      }
    },
    "dimension_filter": ` + oldFilterSchema + `,
    "metric_filter": ` + oldFilterSchema + `,
    "order_bys": ` + oldOrderBysSchema + `,
    "limit": ` + oldLimitSchema + `
  }
}`

	oldGetMetadataInput = `{
  ` + oldSchemaHeader + `
  "title": "Get Metadata input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property"],
  "properties": {
    "property": {"type": "string", "pattern": "^properties/[0-9]+$",
      "description": "The GA4 property as properties/<id>; properties/0 lists the fields common to all properties."}
  }
}`

	oldCreateKeyEventInput = `{
  ` + oldSchemaHeader + `
  "title": "Create Key Events input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property", "event_name"],
  "properties": {
    "property": ` + oldPropertySchema + `,
    "event_name": {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_]{0,39}$",
      "description": "An event already collected in the property (in the last 30 days), e.g. purchase, sign_up, generate_lead."},
    "counting_method": {"type": "string", "enum": ["ONCE_PER_EVENT", "ONCE_PER_SESSION"], "default": "ONCE_PER_EVENT",
      "description": "Count every occurrence, or once per session."}
  }
}`

	oldCreatePropertyInput = `{
  ` + oldSchemaHeader + `
  "title": "Create properties input",
  "type": "object",
  "additionalProperties": false,
  "required": ["display_name", "time_zone", "currency_code"],
  "properties": {
    "display_name": {"type": "string", "minLength": 1, "maxLength": 100, "description": "The property's name."},
    "time_zone": {"type": "string", "minLength": 1, "maxLength": 64,
      "description": "The reporting time zone, an IANA name such as America/Los_Angeles or Europe/Berlin."},
    "currency_code": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 currency, e.g. USD, EUR."},
    "industry_category": {"type": "string", "description": "Optional, used for benchmarking.",
      "enum": ["INDUSTRY_CATEGORY_UNSPECIFIED", "AUTOMOTIVE", "BUSINESS_AND_INDUSTRIAL_MARKETS", "FINANCE", "HEALTHCARE",
        "TECHNOLOGY", "TRAVEL", "OTHER", "ARTS_AND_ENTERTAINMENT", "BEAUTY_AND_FITNESS", "BOOKS_AND_LITERATURE",
        "FOOD_AND_DRINK", "GAMES", "HOBBIES_AND_LEISURE", "HOME_AND_GARDEN", "INTERNET_AND_TELECOM",
        "LAW_AND_GOVERNMENT", "NEWS", "ONLINE_COMMUNITIES", "PEOPLE_AND_SOCIETY", "PETS_AND_ANIMALS",
        "REAL_ESTATE", "REFERENCE", "SCIENCE", "SPORTS", "JOBS_AND_EDUCATION", "SHOPPING"]},
    "account": {"type": "string", "pattern": "^accounts/[0-9]+$",
      "description": "The analytics account as accounts/<id>; default: the connected account's first. Needs the Administrator role on it."}
  }
}`

	oldListPropertiesInput = `{
  ` + oldSchemaHeader + `
  "title": "List Properties input",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "account": {"type": "string", "pattern": "^accounts/[0-9]+$",
      "description": "The analytics account as accounts/<id>; default: the connected account's first."},
    "show_deleted": {"type": "boolean", "default": false, "description": "Include properties in the trash."},
    "limit": ` + oldListLimitSchema + `,
    "page_token": ` + oldPageTokenSchema + `
  }
}`

	oldGetPropertyInput = `{
  ` + oldSchemaHeader + `
  "title": "Get Property input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property"],
  "properties": {"property": ` + oldPropertySchema + `}
}`

	oldListKeyEventsInput = `{
  ` + oldSchemaHeader + `
  "title": "List Key Events input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property"],
  "properties": {
    "property": ` + oldPropertySchema + `,
    "limit": ` + oldListLimitSchema + `,
    "page_token": ` + oldPageTokenSchema + `
  }
}`

	oldListDataStreamsInput = `{
  ` + oldSchemaHeader + `
  "title": "List Data Streams input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property"],
  "properties": {
    "property": ` + oldPropertySchema + `,
    "limit": ` + oldListLimitSchema + `,
    "page_token": ` + oldPageTokenSchema + `
  }
}`

	oldGetDataStreamInput = `{
  ` + oldSchemaHeader + `
  "title": "Get Data Stream input",
  "type": "object",
  "additionalProperties": false,
  "required": ["property", "data_stream_id"],
  "properties": {
    "property": ` + oldPropertySchema + `,
    "data_stream_id": {"type": "string", "pattern": "^[0-9]+$", "description": "The data stream's numeric id."}
  }
}`

	oldListAccountSummariesInput = `{
  ` + oldSchemaHeader + `
  "title": "List Account Summaries input",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "limit": ` + oldListLimitSchema + `,
    "page_token": ` + oldPageTokenSchema + `
  }
}`
)

// Output schemas.
const (
	oldQuotaDefs = `"quotaStatus": {
      "type": "object", "additionalProperties": false, "required": ["consumed", "remaining"],
      "properties": {"consumed": {"type": "integer"}, "remaining": {"type": "integer"}}
    },
    "propertyQuota": {
      "type": "object", "additionalProperties": false,
      "properties": {
        "tokens_per_day": {"$ref": "#/$defs/quotaStatus"},
        "tokens_per_hour": {"$ref": "#/$defs/quotaStatus"},
        "concurrent_requests": {"$ref": "#/$defs/quotaStatus"},
        "server_errors_per_project_per_hour": {"$ref": "#/$defs/quotaStatus"},
        "potentially_thresholded_requests_per_hour": {"$ref": "#/$defs/quotaStatus"},
        "tokens_per_project_per_hour": {"$ref": "#/$defs/quotaStatus"}
      }
    }`

	oldReportOutput = `{
  ` + oldSchemaHeader + `
  "title": "Report",
  "type": "object",
  "additionalProperties": false,
  "required": ["dimension_headers", "metric_headers", "rows", "row_count", "property_quota"],
  "properties": {
    "dimension_headers": {"type": "array", "items": {"type": "string"}},
    "metric_headers": {"type": "array", "items": {
      "type": "object", "additionalProperties": false, "required": ["name", "type"],
      "properties": {"name": {"type": "string"}, "type": {"type": "string"}}
    }},
    "rows": {"type": "array", "description": "Empty when the report has no data.", "items": {
      "type": "object", "additionalProperties": false, "required": ["dimensions", "metrics"],
      "properties": {
        "dimensions": {"type": "array", "items": {"type": "string"}},
        "metrics": {"type": "array", "items": {"type": "number"}}
      }
    }},
    "row_count": {"type": "integer", "minimum": 0, "description": "Rows in the whole report, regardless of limit and offset."},
    "property_quota": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/propertyQuota"}]},
    "time_zone": {"type": "string"},
    "currency_code": {"type": "string"},
    "subject_to_thresholding": {"type": "boolean"},
    "data_loss_from_other_row": {"type": "boolean"}
  },
  "$defs": {` + oldQuotaDefs + `}
}`

	oldMetadataOutput = `{
  ` + oldSchemaHeader + `
  "title": "Metadata",
  "type": "object",
  "additionalProperties": false,
  "required": ["dimensions", "metrics"],
  "properties": {
    "dimensions": {"type": "array", "items": {
      "type": "object", "additionalProperties": false, "required": ["api_name", "ui_name", "description", "custom_definition"],
      "properties": {
        "api_name": {"type": "string"}, "ui_name": {"type": "string"}, "description": {"type": "string"},
        "category": {"type": "string"}, "custom_definition": {"type": "boolean"},
        "deprecated_api_names": {"type": "array", "items": {"type": "string"}}
      }
    }},
    "metrics": {"type": "array", "items": {
      "type": "object", "additionalProperties": false, "required": ["api_name", "ui_name", "description", "type", "custom_definition"],
      "properties": {
        "api_name": {"type": "string"}, "ui_name": {"type": "string"}, "description": {"type": "string"},
        "type": {"type": "string"}, "expression": {"type": "string"}, "category": {"type": "string"},
        "custom_definition": {"type": "boolean"},
        "blocked_reasons": {"type": "array", "items": {"type": "string"}}
      }
    }}
  }
}`

	oldKeyEventDef = `{
      "type": "object", "additionalProperties": false,
      "required": ["name", "key_event_id", "property", "event_name", "counting_method", "deletable", "custom"],
      "properties": {
        "name": {"type": "string", "description": "properties/<id>/keyEvents/<id>."},
        "key_event_id": {"type": "string"},
        "property": {"type": "string"},
        "event_name": {"type": "string"},
        "counting_method": {"type": "string"},
        "create_time": {"type": "string", "format": "date-time"},
        "deletable": {"type": "boolean"},
        "custom": {"type": "boolean"},
        "event_count_30d": {"type": "integer", "minimum": 0, "description": "Occurrences in the last 30 days (Create Key Events)."},
        "already_existed": {"type": "boolean", "description": "The event was a key event before the step ran."}
      }
    }`

	oldKeyEventOutput = `{
  ` + oldSchemaHeader + `
  "title": "Key event",
  "$ref": "#/$defs/keyEvent",
  "$defs": {"keyEvent": ` + oldKeyEventDef + `}
}`

	oldListKeyEventsOutput = `{
  ` + oldSchemaHeader + `
  "title": "Key events",
  "type": "object", "additionalProperties": false,
  "required": ["key_events", "next_page_token"],
  "properties": {
    "key_events": {"type": "array", "items": {"$ref": "#/$defs/keyEvent"}},
    "next_page_token": ` + oldNextPageTokenSchema + `
  },
  "$defs": {"keyEvent": ` + oldKeyEventDef + `}
}`

	oldPropertyDef = `{
      "type": "object", "additionalProperties": false,
      "required": ["property", "property_id", "display_name", "time_zone", "parent"],
      "properties": {
        "property": {"type": "string", "description": "properties/<id>."},
        "property_id": {"type": "string"},
        "display_name": {"type": "string"},
        "time_zone": {"type": "string"},
        "currency_code": {"type": "string"},
        "industry_category": {"type": "string"},
        "parent": {"type": "string"},
        "account": {"type": "string"},
        "property_type": {"type": "string"},
        "service_level": {"type": "string"},
        "create_time": {"type": "string", "format": "date-time"},
        "update_time": {"type": "string", "format": "date-time"},
        "delete_time": {"type": "string", "format": "date-time"}
      }
    }`

	oldPropertyOutput = `{
  ` + oldSchemaHeader + `
  "title": "Property",
  "$ref": "#/$defs/property",
  "$defs": {"property": ` + oldPropertyDef + `}
}`

	oldListPropertiesOutput = `{
  ` + oldSchemaHeader + `
  "title": "Properties",
  "type": "object", "additionalProperties": false,
  "required": ["properties", "next_page_token"],
  "properties": {
    "properties": {"type": "array", "items": {"$ref": "#/$defs/property"}},
    "next_page_token": ` + oldNextPageTokenSchema + `
  },
  "$defs": {"property": ` + oldPropertyDef + `}
}`

	oldDataStreamDef = `{
      "type": "object", "additionalProperties": false,
      "required": ["data_stream", "data_stream_id", "property", "type"],
      "properties": {
        "data_stream": {"type": "string", "description": "properties/<id>/dataStreams/<id>."},
        "data_stream_id": {"type": "string"},
        "property": {"type": "string"},
        "type": {"type": "string"},
        "display_name": {"type": "string"},
        "measurement_id": {"type": "string", "description": "G-… (web streams)."},
        "default_uri": {"type": "string"},
        "package_name": {"type": "string"},
        "bundle_id": {"type": "string"},
        "firebase_app_id": {"type": "string"},
        "create_time": {"type": "string", "format": "date-time"},
        "update_time": {"type": "string", "format": "date-time"}
      }
    }`

	oldDataStreamOutput = `{
  ` + oldSchemaHeader + `
  "title": "Data stream",
  "$ref": "#/$defs/dataStream",
  "$defs": {"dataStream": ` + oldDataStreamDef + `}
}`

	oldListDataStreamsOutput = `{
  ` + oldSchemaHeader + `
  "title": "Data streams",
  "type": "object", "additionalProperties": false,
  "required": ["data_streams", "next_page_token"],
  "properties": {
    "data_streams": {"type": "array", "items": {"$ref": "#/$defs/dataStream"}},
    "next_page_token": ` + oldNextPageTokenSchema + `
  },
  "$defs": {"dataStream": ` + oldDataStreamDef + `}
}`

	oldListAccountSummariesOutput = `{
  ` + oldSchemaHeader + `
  "title": "Account summaries",
  "type": "object", "additionalProperties": false,
  "required": ["account_summaries", "next_page_token"],
  "properties": {
    "account_summaries": {"type": "array", "items": {
      "type": "object", "additionalProperties": false, "required": ["account", "display_name", "properties"],
      "properties": {
        "account": {"type": "string"},
        "display_name": {"type": "string"},
        "properties": {"type": "array", "items": {
          "type": "object", "additionalProperties": false, "required": ["property", "display_name"],
          "properties": {
            "property": {"type": "string"}, "display_name": {"type": "string"},
            "property_type": {"type": "string"}, "parent": {"type": "string"}
          }
        }}
      }
    }},
    "next_page_token": ` + oldNextPageTokenSchema + `
  }
}`
)
