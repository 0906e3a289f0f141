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

// overviewCap bounds the deliveries and the runs Overview reads: past it
// a chart says its counts are at least what it shows.
const overviewCap = 1000

// chart is a stacked bar chart drawn as inline SVG.
type chart struct {
	Title  string
	Width  int
	Height int
	Bars   []bar
	Series []series
	Max    int
	Capped bool
	// Labels are the axis's time labels.
	Labels []axisLabel
	Total  int
	// AxisY and LabelY place the time axis and its labels.
	AxisY, LabelY int
}

type series struct{ Name, Class string }

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

// buildChart counts items into buckets of step from start and stacks
// them by the series key.
func buildChart(title string, start time.Time, step time.Duration, n int, ss []series, times []time.Time, keys []string, capped bool) chart {
	counts := make([]map[string]int, n)
	for i := range counts {
		counts[i] = map[string]int{}
	}
	total := 0
	for i, t := range times {
		b := int(t.Sub(start) / step)
		if b >= 0 && b < n {
			counts[b][keys[i]]++
			total++
		}
	}
	c := chart{Title: title, Width: 720, Height: 140, Series: ss, Capped: capped, Total: total, AxisY: 120, LabelY: 136}
	for _, m := range counts {
		sum := 0
		for _, v := range m {
			sum += v
		}
		c.Max = max(c.Max, sum)
	}
	scale := 1.0
	if c.Max > 0 {
		scale = float64(c.Height-20) / float64(c.Max)
	}
	w := float64(c.Width) / float64(n)
	for i, m := range counts {
		x := float64(i) * w
		y := float64(c.Height - 20)
		b := bar{Title: start.Add(time.Duration(i) * step).UTC().Format("15:04")}
		for _, s := range ss {
			if v := m[s.Name]; v > 0 {
				h := float64(v) * scale
				y -= h
				b.Rects = append(b.Rects, rect{X: x + 1, Y: y, W: max(w-2, 1), H: h, Class: s.Class})
				b.Title += fmt.Sprintf(" · %s %d", s.Name, v)
			}
		}
		c.Bars = append(c.Bars, b)
		if i%(n/6) == 0 {
			c.Labels = append(c.Labels, axisLabel{X: x, Text: start.Add(time.Duration(i) * step).UTC().Format("15:04")})
		}
	}
	return c
}

var (
	deliverySeries = []series{{"accepted", "s-accepted"}, {"duplicate", "s-duplicate"}, {"ignored", "s-ignored"}, {"refused", "s-refused"}}
	runSeries      = []series{{"succeeded", "s-succeeded"}, {"failed", "s-failed"}, {"waiting", "s-waiting"}}
)

func runKey(r store.Run) string {
	switch r.Status {
	case store.RunSucceeded, store.RunFailed:
		return string(r.Status)
	}
	return "waiting"
}

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
	// One read of the last day serves both spans: the hour is its newest
	// part. Past overviewCap records a chart counts only those read.
	dayStart := now.Add(-24 * time.Hour).Truncate(30 * time.Minute).Add(30 * time.Minute)
	ds, err := c.o.Records.ListDeliveries(ctx, store.DeliveryFilter{TenantID: tid, Since: dayStart, Limit: overviewCap})
	if err != nil {
		return err
	}
	runs, err := c.o.Records.ListRuns(ctx, store.RunFilter{TenantID: tid, Limit: overviewCap})
	if err != nil {
		return err
	}
	runs = slices.DeleteFunc(runs, func(r store.Run) bool { return r.CreatedAt.Before(dayStart) })
	dTimes, dKeys := make([]time.Time, len(ds)), make([]string, len(ds))
	for i, d := range ds {
		dTimes[i], dKeys[i] = d.ReceivedAt, d.Answer
	}
	rTimes, rKeys := make([]time.Time, len(runs)), make([]string, len(runs))
	for i, r := range runs {
		rTimes[i], rKeys[i] = r.CreatedAt, runKey(r)
	}
	// capped reports whether a read that filled its cap stopped after
	// start (its oldest record, the last, is newer).
	capped := func(n int, oldest func() time.Time, start time.Time) bool {
		return n == overviewCap && oldest().After(start)
	}
	for _, span := range []struct {
		key, label string
		start      time.Time
		n          int
		step       time.Duration
	}{
		{"Hour", "last hour, per minute", now.Add(-time.Hour).Truncate(time.Minute).Add(time.Minute), 60, time.Minute},
		{"Day", "last day, per 30 minutes", dayStart, 48, 30 * time.Minute},
	} {
		data["Deliveries"+span.key] = buildChart("Deliveries, "+span.label, span.start, span.step, span.n, deliverySeries, dTimes, dKeys,
			capped(len(ds), func() time.Time { return ds[len(ds)-1].ReceivedAt }, span.start))
		data["Runs"+span.key] = buildChart("Runs, "+span.label, span.start, span.step, span.n, runSeries, rTimes, rKeys,
			capped(len(runs), func() time.Time { return runs[len(runs)-1].CreatedAt }, span.start))
	}
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
