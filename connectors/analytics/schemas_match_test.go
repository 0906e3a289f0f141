package analytics

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/triggerd/triggerd/connectors/schema"
)

// TestSchemasMatchTheirOldDocuments compares every schema written with the
// schema package with the JSON document it replaces, both read as any.
func TestSchemasMatchTheirOldDocuments(t *testing.T) {
	for _, c := range []struct {
		name string
		dsl  schema.Schema
		old  string
	}{
		{"runReportsInput", runReportsInput, oldRunReportsInput},
		{"runRealtimeInput", runRealtimeInput, oldRunRealtimeInput},
		{"getMetadataInput", getMetadataInput, oldGetMetadataInput},
		{"createKeyEventInput", createKeyEventInput, oldCreateKeyEventInput},
		{"createPropertyInput", createPropertyInput, oldCreatePropertyInput},
		{"listPropertiesInput", listPropertiesInput, oldListPropertiesInput},
		{"getPropertyInput", getPropertyInput, oldGetPropertyInput},
		{"listKeyEventsInput", listKeyEventsInput, oldListKeyEventsInput},
		{"listDataStreamsInput", listDataStreamsInput, oldListDataStreamsInput},
		{"getDataStreamInput", getDataStreamInput, oldGetDataStreamInput},
		{"listAccountSummariesInput", listAccountSummariesInput, oldListAccountSummariesInput},
		{"reportOutput", reportOutput, oldReportOutput},
		{"metadataOutput", metadataOutput, oldMetadataOutput},
		{"keyEventOutput", keyEventOutput, oldKeyEventOutput},
		{"listKeyEventsOutput", listKeyEventsOutput, oldListKeyEventsOutput},
		{"propertyOutput", propertyOutput, oldPropertyOutput},
		{"listPropertiesOutput", listPropertiesOutput, oldListPropertiesOutput},
		{"dataStreamOutput", dataStreamOutput, oldDataStreamOutput},
		{"listDataStreamsOutput", listDataStreamsOutput, oldListDataStreamsOutput},
		{"listAccountSummariesOutput", listAccountSummariesOutput, oldListAccountSummariesOutput},
	} {
		var got, want any
		if err := json.Unmarshal(schema.Root(c.dsl), &got); err != nil {
			t.Fatal(c.name, err)
		}
		if err := json.Unmarshal([]byte(c.old), &want); err != nil {
			t.Fatal(c.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s differs:\n got %s\nwant %s", c.name, g, w)
		}
	}
}
