package store

import (
	"context"
	"fmt"
	"time"
)

// The activity counters behind the console's Overview charts: per tenant,
// per minute and per hour, the deliveries recorded by answer and the runs
// created, succeeded and failed. The backends keep them as the records
// are written (PutDeliveries, CreateRun, UpdateRun), so that the charts
// read a few counters whatever the volume, and count the writes of every
// triggerd process sharing the store.
//
// Deliveries count in the bucket of their ReceivedAt. Runs count in the
// bucket of their CreatedAt: a run counts as created when CreateRun
// stores it and as succeeded or failed when an UpdateRun first gives it
// that status, so that the runs of a bucket still waiting are created
// minus succeeded minus failed.

// Activity granularities and how long each is kept.
const (
	ActivityMinute = time.Minute
	ActivityHour   = time.Hour
	// ActivityMinuteRetention and ActivityHourRetention are how long
	// counters are kept after their bucket starts.
	ActivityMinuteRetention = 3 * time.Hour
	ActivityHourRetention   = 50 * time.Hour
)

// Activity counter names: the delivery answers (AnswerAccepted and the
// others), and these for runs.
const (
	CountRunsCreated   = "runs_created"
	CountRunsSucceeded = "runs_succeeded"
	CountRunsFailed    = "runs_failed"
)

// ActivityRetention returns how long counters of step are kept, or an
// error for a step that is not kept.
func ActivityRetention(step time.Duration) (time.Duration, error) {
	switch step {
	case ActivityMinute:
		return ActivityMinuteRetention, nil
	case ActivityHour:
		return ActivityHourRetention, nil
	}
	return 0, fmt.Errorf("store: activity is counted per minute or per hour, not per %s", step)
}

// ActivitySpan is n buckets of Step (ActivityMinute or ActivityHour), the
// first the one that holds From.
type ActivitySpan struct {
	Step time.Duration
	From time.Time
	N    int
}

// Start returns the start of the span's i-th bucket.
func (s ActivitySpan) Start(i int) time.Time {
	return s.From.Truncate(s.Step).Add(time.Duration(i) * s.Step)
}

// ActivityCounts are one bucket's counters by name (absent: 0).
type ActivityCounts map[string]int64

// ActivityDelta is what one write adds to a tenant's counters: Counts in
// the buckets (minute and hour) that hold At.
type ActivityDelta struct {
	TenantID string
	At       time.Time
	Name     string
	N        int64
}

// DeliveryActivity returns what storing ds adds to the counters.
func DeliveryActivity(ds []DeliveryRecord) []ActivityDelta {
	out := make([]ActivityDelta, 0, len(ds))
	for _, d := range ds {
		out = append(out, ActivityDelta{TenantID: d.TenantID, At: d.ReceivedAt, Name: d.Answer, N: 1})
	}
	return out
}

// RunActivity returns what a write of a run adds to the counters: created
// for a new run (prev nil), and succeeded or failed for a run that gets
// that status (a new one created with it included).
func RunActivity(prev *Run, next Run) []ActivityDelta {
	var out []ActivityDelta
	add := func(name string) {
		out = append(out, ActivityDelta{TenantID: next.TenantID, At: next.CreatedAt, Name: name, N: 1})
	}
	if prev == nil {
		add(CountRunsCreated)
	}
	if prev == nil || prev.Status != next.Status {
		switch next.Status {
		case RunSucceeded:
			add(CountRunsSucceeded)
		case RunFailed:
			add(CountRunsFailed)
		}
	}
	return out
}

// Activity reads the activity counters.
type Activity interface {
	// ReadActivity returns the tenant's counters of each span, a bucket
	// per element; buckets no write reached (or older than their
	// retention) are empty.
	ReadActivity(ctx context.Context, tenantID string, spans []ActivitySpan) ([][]ActivityCounts, error)
}
