package triggers

import (
	"testing"
	"time"
)

// A deployment delivery's createdAt (ms since the epoch) comes back as
// Result.CreatedAt; a missing, non-positive or mistyped one as zero,
// without failing the mapping.
func TestDeployCreatedAt(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  time.Time
	}{
		{`"createdAt":1592335604941,`, time.Date(2020, 6, 16, 19, 26, 44, 941e6, time.UTC)},
		{``, time.Time{}},
		{`"createdAt":0,`, time.Time{}},
		{`"createdAt":"yesterday",`, time.Time{}},
	} {
		body := `{"id":"uev_1","type":"deployment.created",` + tc.field + `"payload":{"project":{"id":"prj_1"},"deployment":{"id":"dpl_1"}}}`
		res, err := Map(Delivery{Connector: Deploy, Payload: []byte(body)})
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("%s: %v, %d events", body, err, len(res.Events))
		}
		if !res.CreatedAt.Equal(tc.want) {
			t.Errorf("%s: CreatedAt %v, want %v", tc.field, res.CreatedAt, tc.want)
		}
	}
}
