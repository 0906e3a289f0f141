package console

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/triggerd/triggerd/store"
)

// chart is a stacked bar chart drawn as inline SVG.
type chart struct {
	Title  string
	Width  int
	Height int
	Bars   []bar
	Series []series
	Max    int64
	// Labels are the axis's time labels.
	Labels []axisLabel
	Total  int64
	// AxisY and LabelY place the time axis and its labels.
	AxisY, LabelY int
}

// series is one stacked part of a chart's bars: its name in the legend,
// its CSS class, and its count in one bucket.
type series struct {
	Name, Class string
	count       func(store.ActivityCounts) int64
}

type bar struct {
	Rects []rect
	Title string
}

type rect struct {
	X, Y, W, H float64
	Class      string
}

type axisLabel struct {
	X    float64
	Text string
}

// buildChart stacks the series' counts of each bucket of span; labels
// says how to write a bucket's start.
func buildChart(title string, span store.ActivitySpan, layout string, ss []series, buckets []store.ActivityCounts) chart {
	c := chart{Title: title, Width: 720, Height: 140, Series: ss, AxisY: 120, LabelY: 136}
	counts := make([][]int64, len(buckets))
	for i, b := range buckets {
		counts[i] = make([]int64, len(ss))
		var sum int64
		for j, s := range ss {
			counts[i][j] = max(s.count(b), 0)
			sum += counts[i][j]
		}
		c.Max = max(c.Max, sum)
		c.Total += sum
	}
	scale := 1.0
	if c.Max > 0 {
		scale = float64(c.Height-20) / float64(c.Max)
	}
	n := len(buckets)
	w := float64(c.Width) / float64(n)
	for i := range buckets {
		x := float64(i) * w
		y := float64(c.Height - 20)
		at := span.Start(i).UTC().Format(layout)
		b := bar{Title: at}
		for j, s := range ss {
			if v := counts[i][j]; v > 0 {
				h := float64(v) * scale
				y -= h
				b.Rects = append(b.Rects, rect{X: x + 1, Y: y, W: max(w-2, 1), H: h, Class: s.Class})
				b.Title += fmt.Sprintf(" · %s %d", s.Name, v)
			}
		}
		c.Bars = append(c.Bars, b)
		if i%max(n/6, 1) == 0 {
			c.Labels = append(c.Labels, axisLabel{X: x, Text: at})
		}
	}
	return c
}

// counter returns a series' count: the counter name.
func counter(name string) func(store.ActivityCounts) int64 {
	return func(c store.ActivityCounts) int64 { return c[name] }
}

var (
	deliverySeries = []series{
		{"accepted", "s-accepted", counter(store.AnswerAccepted)},
		{"duplicate", "s-duplicate", counter(store.AnswerDuplicate)},
		{"ignored", "s-ignored", counter(store.AnswerIgnored)},
		{"refused", "s-refused", counter(store.AnswerRefused)},
	}
	// Runs count in the bucket of their creation; those neither succeeded
	// nor failed yet are waiting (claimed, started, or a step waiting on
	// a rate limit).
	runSeries = []series{
		{"succeeded", "s-succeeded", counter(store.CountRunsSucceeded)},
		{"failed", "s-failed", counter(store.CountRunsFailed)},
		{"waiting", "s-waiting", func(c store.ActivityCounts) int64 {
			return c[store.CountRunsCreated] - c[store.CountRunsSucceeded] - c[store.CountRunsFailed]
		}},
	}
)

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) error {
	if s.admin && s.tenant == "" {
		http.Redirect(w, r, Prefix+"tenants", http.StatusSeeOther)
		return nil
	}
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	ctx := r.Context()
	now := c.o.Now()
	data := map[string]any{}
	// The store's activity counters, kept as deliveries and runs are
	// written by every process: one read of 60 minutes and 24 hours,
	// whatever the volume.
	hour := store.ActivitySpan{Step: store.ActivityMinute, From: now.Add(-59 * time.Minute), N: 60}
	day := store.ActivitySpan{Step: store.ActivityHour, From: now.Add(-23 * time.Hour), N: 24}
	counts, err := c.o.Records.ReadActivity(ctx, tid, []store.ActivitySpan{hour, day})
	if err != nil {
		return err
	}
	data["DeliveriesHour"] = buildChart("Deliveries, last hour, per minute", hour, "15:04", deliverySeries, counts[0])
	data["RunsHour"] = buildChart("Runs, last hour, per minute (by start)", hour, "15:04", runSeries, counts[0])
	data["DeliveriesDay"] = buildChart("Deliveries, last day, per hour", day, "15:04", deliverySeries, counts[1])
	data["RunsDay"] = buildChart("Runs, last day, per hour (by start)", day, "15:04", runSeries, counts[1])
	refused, err := c.o.Records.ListDeliveries(ctx, store.DeliveryFilter{TenantID: tid, Answer: store.AnswerRefused, Limit: 5})
	if err != nil {
		return err
	}
	failed, err := c.o.Records.ListRuns(ctx, store.RunFilter{TenantID: tid, Status: store.RunFailed, Limit: 5})
	if err != nil {
		return err
	}
	data["Refused"], data["Failed"] = refused, failed
	data["Ready"] = c.readiness(ctx)
	if c.o.Backlog != nil {
		data["Backlog"] = c.o.Backlog(ctx)
	}
	c.render(w, r, s, http.StatusOK, "overview", "Overview", data)
	return nil
}

type readiness struct {
	Name  string
	OK    bool
	Error string
}

func (c *Console) readiness(ctx context.Context) []readiness {
	if c.o.Ready == nil {
		return nil
	}
	var out []readiness
	m := c.o.Ready(ctx)
	for _, name := range slices.Sorted(maps.Keys(m)) {
		rd := readiness{Name: name, OK: m[name] == nil}
		if m[name] != nil {
			rd.Error = m[name].Error()
		}
		out = append(out, rd)
	}
	return out
}
