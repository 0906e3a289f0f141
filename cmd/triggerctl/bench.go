package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/google/uuid"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/dispatch"
)

// benchTarget is one payload file, prepared so that a request costs little
// more than a fresh delivery id.
type benchTarget struct {
	// header holds the headers every request of the file carries, as
	// canonical name/value pairs.
	header [][2]string
	// body is a codehost file's body, sent as is.
	body []byte
	// env is a deploy file's envelope, rebuilt per request with a new id.
	env envelope
}

// benchRun is one benchmark: where and what to post, and when to count.
type benchRun struct {
	endpoint  string
	connector string
	secret    []byte
	targets   []benchTarget
	// Requests started before measureStart are warmup; requests still in
	// flight at deadline are not counted.
	measureStart, deadline time.Time
	firstErr               firstError
}

// workerStats is what one worker measured; workers never share it.
type workerStats struct {
	latencies  []time.Duration
	ok         int
	events     int
	bytes      int64
	statuses   map[int]int // non-2xx answers by status
	transport  int         // requests that got no complete answer
	unfinished int         // requests answered after the deadline
	// allEvents counts the events of every 2xx answer, warmup and late
	// ones included: what the stream must have gained.
	allEvents int
}

// firstError keeps the first failure any worker saw.
type firstError struct {
	mu  sync.Mutex
	msg string
}

// note records msg() unless a failure was already recorded; msg is only
// called for the first one.
func (f *firstError) note(msg func() string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msg == "" {
		f.msg = msg()
	}
}

// get returns the first recorded failure, or "".
func (f *firstError) get() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

// benchReport is the result of a run; --json prints it as is.
type benchReport struct {
	URL             string         `json:"url"`
	Connector       string         `json:"connector"`
	Files           []string       `json:"files"`
	Concurrency     int            `json:"concurrency"`
	DurationS       float64        `json:"duration_s"`
	WarmupS         float64        `json:"warmup_s"`
	Requests        int            `json:"requests"`
	OK              int            `json:"ok"`
	Errors          map[string]int `json:"errors"`
	ThroughputRPS   float64        `json:"throughput_rps"`
	LatencyMS       latencyMS      `json:"latency_ms"`
	Events          int            `json:"events"`
	BytesPerRequest int64          `json:"bytes_per_request"`
	Unfinished      int            `json:"unfinished"`
	// EventsAnswered is the events of every 2xx answer of the run, warmup
	// and late answers included; with --nats-url, EventsInStream is how
	// many the events stream gained, and Durable says whether they match.
	EventsAnswered int    `json:"events_answered"`
	EventsInStream *int64 `json:"events_in_stream,omitempty"`
	Durable        *bool  `json:"durable,omitempty"`
	// DispatchBacklog is how many events the dispatcher's consumer had
	// not taken yet when the measured window ended: work a bench leaves
	// for later is not in its figures.
	DispatchBacklog *uint64 `json:"dispatch_backlog,omitempty"`
	FirstError      string  `json:"first_error,omitempty"`
	Interrupted     bool    `json:"interrupted,omitempty"`
	// With --server-pid: the CPU time the server process and this one
	// used in the measured window, per measured request, in microseconds.
	ServerCPUUSPerRequest *float64 `json:"server_cpu_us_per_request,omitempty"`
	ClientCPUUSPerRequest *float64 `json:"client_cpu_us_per_request,omitempty"`
	// ServerFaultsPerRequest is the server's minor page faults in the
	// measured window per measured request: how much fresh memory each
	// request made it touch (4 KiB a fault).
	ServerFaultsPerRequest *float64 `json:"server_page_faults_per_request,omitempty"`
}

// latencyMS are latency percentiles in milliseconds.
type latencyMS struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// bench implements "triggerctl bench": it posts signed payloads from a fixed
// number of workers for a fixed time and reports throughput, latency and
// failures. It fails (1) if any counted request failed.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", defaultURL, "root URL of triggerd (or of bench-baseline)")
	connector := fs.String("connector", connectorCodeHost, "codehost or deploy")
	var files fileList
	fs.Var(&files, "file", "payload file; repeat or comma-separate for several, requests cycle through them (required); a codehost event comes from the file name, issues.opened.json → issues")
	concurrency := fs.Int("concurrency", 64, "number of requests in flight")
	duration := fs.Duration("duration", 10*time.Second, "measured time")
	warmup := fs.Duration("warmup", 2*time.Second, "time before the measurement, with requests sent but not counted")
	asJSONOut := fs.Bool("json", false, "print one JSON object instead of text")
	dataDir := fs.String("data-dir", "./data", "directory where triggerd keeps generated webhook secrets, read when TRIGGERD_<CONNECTOR>_WEBHOOK_SECRET is unset, and its NATS operator password (with --nats-url, when TRIGGERD_NATS_PASSWORD is unset)")
	nf := natsFlags{url: fs.String("nats-url", "", "triggerd's NATS: when set, check that the events stream gained exactly the events the 2xx answers listed"), dataDir: dataDir}
	compact := fs.Bool("compact", false, "send each file's JSON minified, as GitHub and Vercel send deliveries (corpus files are often indented for reading)")
	serverPID := fs.Int("server-pid", 0, "process id of the server on this machine: when set, report the CPU time it and bench itself used per request in the measured window (Linux)")
	synopsis := "usage: triggerctl bench --file FILE [flags]\n\n" +
		"Posts signed payloads, each with a fresh delivery id, at a fixed concurrency for a fixed time,\n" +
		"then prints throughput, p50/p90/p99/max latency and errors.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(fs, "unexpected arguments %q: name payload files with --file", fs.Args())
	case *connector != connectorCodeHost && *connector != connectorDeploy:
		return usageError(fs, "--connector is %q: use codehost or deploy", *connector)
	case len(files) == 0:
		return usageError(fs, "--file is required: name a payload file, e.g. --file issues.opened.json")
	case *concurrency < 1:
		return usageError(fs, "--concurrency must be at least 1, not %d", *concurrency)
	case *duration <= 0:
		return usageError(fs, "--duration must be positive, not %v", *duration)
	case *warmup < 0:
		return usageError(fs, "--warmup must not be negative, not %v", *warmup)
	case *serverPID < 0:
		return usageError(fs, "--server-pid must be a process id, not %d", *serverPID)
	}
	if *serverPID > 0 {
		if _, err := processUsage(*serverPID); err != nil {
			return usageError(fs, "--server-pid %d: %v", *serverPID, err)
		}
	}

	secret, _, err := loadSecret(*connector, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl bench: %v\n", err)
		return 1
	}
	targets, err := benchTargets(*connector, secret, files, *compact)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl bench: %v\n", err)
		return 1
	}
	start := time.Now()
	b := &benchRun{
		endpoint:     endpointURL(*baseURL, *connector),
		connector:    *connector,
		secret:       secret,
		targets:      targets,
		measureStart: start.Add(*warmup),
		deadline:     start.Add(*warmup + *duration),
	}
	if _, err := newBenchConn(b.endpoint); err != nil {
		return usageError(fs, "--url %q is not a usable URL: %v", *baseURL, err)
	}
	if !*asJSONOut {
		fmt.Fprintf(stderr, "triggerctl bench: posting to %s from %d workers for %v after %v warmup\n", b.endpoint, *concurrency, *duration, *warmup)
	}

	var before uint64
	var nb *bus.Bus
	if *nf.url != "" {
		if nb, err = nf.connect(ctx); err != nil {
			fmt.Fprintf(stderr, "triggerctl bench: %v\n", err)
			return 1
		}
		defer nb.Close()
		if before, err = nb.EventCount(ctx); err != nil {
			fmt.Fprintf(stderr, "triggerctl bench: %v\n", err)
			return 1
		}
	}

	type cpuResult struct {
		used []usage
		err  error
	}
	var cpu chan cpuResult
	if *serverPID > 0 {
		cpu = make(chan cpuResult, 1)
		go func() {
			used, err := usageWindow(ctx, []int{*serverPID, os.Getpid()}, b.measureStart, b.deadline)
			cpu <- cpuResult{used, err}
		}()
	}
	stats := b.run(ctx, *concurrency)

	measured := *duration
	interrupted := false
	if now := time.Now(); ctx.Err() != nil && now.Before(b.deadline) {
		interrupted = true
		measured = now.Sub(b.measureStart)
	}
	r := summarize(stats, measured)
	r.URL, r.Connector, r.Files, r.Concurrency = b.endpoint, *connector, files, *concurrency
	r.WarmupS, r.Interrupted, r.FirstError = warmup.Seconds(), interrupted, b.firstErr.get()
	if cpu != nil {
		// The window ends at the deadline, which run has passed, or
		// with ctx.
		res := <-cpu
		switch {
		case res.err != nil && !interrupted:
			fmt.Fprintf(stderr, "triggerctl bench: %v\n", res.err)
			return 1
		case res.err == nil && r.Requests > 0:
			perReq := func(n int64) *float64 {
				v := float64(n) / float64(r.Requests)
				return &v
			}
			server, client := res.used[0], res.used[1]
			r.ServerCPUUSPerRequest, r.ClientCPUUSPerRequest = perReq(server.CPU.Microseconds()), perReq(client.CPU.Microseconds())
			r.ServerFaultsPerRequest = perReq(server.MinorFaults)
		}
	}
	if nb != nil {
		// Every 2xx answer came after its events were stored, and every
		// request has been answered, so the count is final.
		after, err := nb.EventCount(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "triggerctl bench: %v\n", err)
			return 1
		}
		gained := int64(after - before)
		durable := gained == int64(r.EventsAnswered)
		r.EventsInStream, r.Durable = &gained, &durable
		if backlog, found, err := nb.ConsumerPending(ctx, bus.EventsStream, dispatch.EventsConsumer); err != nil {
			fmt.Fprintf(stderr, "triggerctl bench: %v\n", err)
			return 1
		} else if found {
			r.DispatchBacklog = &backlog
		}
	}

	if *asJSONOut {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(stderr, "triggerctl bench: write the report: %v\n", err)
			return 1
		}
	} else {
		printBenchReport(stdout, r)
	}
	switch {
	case interrupted && measured <= 0:
		fmt.Fprintln(stderr, "triggerctl bench: interrupted during the warmup; nothing was measured")
		return 1
	case r.Requests == 0:
		fmt.Fprintln(stderr, "triggerctl bench: no request completed in the measured time: lengthen --duration or check the server")
		return 1
	case r.Durable != nil && !*r.Durable:
		fmt.Fprintf(stderr, "triggerctl bench: the answers listed %d events but the stream gained %d\n", r.EventsAnswered, *r.EventsInStream)
		return 1
	case r.OK < r.Requests:
		fmt.Fprintf(stderr, "triggerctl bench: %d of %d requests failed; first failure: %s\n", r.Requests-r.OK, r.Requests, r.FirstError)
		return 1
	}
	if interrupted {
		fmt.Fprintln(stderr, "triggerctl bench: interrupted; the report covers the time measured until then")
	}
	return 0
}

// benchTargets reads and prepares the payload files for connector,
// minified when compact is set.
func benchTargets(connector string, secret []byte, files []string, compact bool) ([]benchTarget, error) {
	sigKey := http.CanonicalHeaderKey(scheme(connector).Header)
	targets := make([]benchTarget, 0, len(files))
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if compact {
			var b bytes.Buffer
			if err := json.Compact(&b, raw); err != nil {
				return nil, fmt.Errorf("%s: --compact needs JSON: %w", file, err)
			}
			raw = b.Bytes()
		}
		t := benchTarget{header: [][2]string{
			{"Content-Type", "application/json"},
			{"User-Agent", "triggerctl-bench"},
		}}
		if connector == connectorDeploy {
			if t.env, err = splitEnvelope(raw); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
		} else {
			event, err := eventFromFile(file)
			if err != nil {
				return nil, fmt.Errorf("%s: %w (bench has no --event: rename the file)", file, err)
			}
			t.body = raw
			// The body never changes, so neither does its signature.
			t.header = append(t.header, [2]string{"X-Github-Event", event}, [2]string{sigKey, scheme(connector).Sign(secret, raw)})
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// run starts concurrency workers, waits until the deadline (or ctx's end)
// and returns what each worker measured.
func (b *benchRun) run(ctx context.Context, concurrency int) []*workerStats {
	stats := make([]*workerStats, concurrency)
	var wg sync.WaitGroup
	for i := range stats {
		st := &workerStats{latencies: make([]time.Duration, 0, 1024), statuses: map[int]int{}}
		stats[i] = st
		wg.Go(func() { b.worker(ctx, i, st) })
	}
	wg.Wait()
	return stats
}

// worker posts requests back to back until the deadline, recording those
// started after the warmup and answered before the deadline into st. A
// request in flight at the deadline is let finish (so that what the server
// stored can be checked), and counted as unfinished.
func (b *benchRun) worker(ctx context.Context, n int, st *workerStats) {
	var answer bytes.Buffer
	conn, err := newBenchConn(b.endpoint)
	if err != nil { // checked before the run, so not expected
		st.transport++
		b.firstErr.note(func() string { return "transport: " + err.Error() })
		return
	}
	defer conn.Close()
	header := make([][2]string, 0, 8)
	next := n % len(b.targets)
	for ctx.Err() == nil && time.Now().Before(b.deadline) {
		t := &b.targets[next]
		next = (next + 1) % len(b.targets)
		start := time.Now()
		status, events, size, err := b.post(ctx, conn, t, header, &answer)
		end := time.Now()
		if err == nil && status >= 200 && status <= 299 {
			st.allEvents += events
		}
		warm := start.Before(b.measureStart)
		if end.After(b.deadline) || (err != nil && ctx.Err() != nil) {
			// Still in flight when the run ended: neither a success
			// nor an error.
			if !warm {
				st.unfinished++
			}
			return
		}
		if warm {
			continue
		}
		st.latencies = append(st.latencies, end.Sub(start))
		st.bytes += int64(size)
		switch {
		case err != nil:
			st.transport++
			b.firstErr.note(func() string { return "transport: " + err.Error() })
		case status < 200 || status > 299:
			st.statuses[status]++
			b.firstErr.note(func() string { return strconv.Itoa(status) + " " + truncate(answer.String(), 512) })
		default:
			st.ok++
			st.events += events
		}
	}
}

// post sends one request of t over conn with a fresh delivery id and reads
// the whole answer into answer. events counts the answer's "events" when
// the status is 2xx; size is the request body's length. header is scratch
// space.
func (b *benchRun) post(ctx context.Context, conn *benchConn, t *benchTarget, header [][2]string, answer *bytes.Buffer) (status, events, size int, err error) {
	id := uuid.NewString()
	body := t.body
	header = append(header[:0], t.header...)
	if b.connector == connectorDeploy {
		body = t.env.withID(id)
		s := scheme(connectorDeploy)
		header = append(header, [2]string{http.CanonicalHeaderKey(s.Header), s.Sign(b.secret, body)})
	} else {
		header = append(header, [2]string{"X-Github-Delivery", id})
	}
	status, err = conn.post(ctx, header, body, answer)
	if err != nil {
		return status, 0, len(body), err
	}
	if status >= 200 && status <= 299 && answer.Len() > 0 {
		// goccy/go-json counts them in an eighth of encoding/json's time
		// (0.2 against 1.6 µs for a one-event answer, on their own): the
		// bench shares the machine with the server it measures, so what
		// it spends on its own checks is taken from the server.
		var a struct {
			Events []struct{} `json:"events"`
		}
		if fastjson.Unmarshal(answer.Bytes(), &a) == nil {
			events = len(a.Events)
		}
	}
	return status, events, len(body), nil
}

// summarize merges the workers' measurements into a report over measured.
func summarize(stats []*workerStats, measured time.Duration) benchReport {
	r := benchReport{Errors: map[string]int{}, DurationS: measured.Seconds()}
	n := 0
	for _, st := range stats {
		n += len(st.latencies)
	}
	all := make([]time.Duration, 0, n)
	var bytesSent int64
	for _, st := range stats {
		all = append(all, st.latencies...)
		bytesSent += st.bytes
		r.OK += st.ok
		r.Events += st.events
		r.EventsAnswered += st.allEvents
		r.Unfinished += st.unfinished
		for status, c := range st.statuses {
			r.Errors[strconv.Itoa(status)] += c
		}
		if st.transport > 0 {
			r.Errors["transport"] += st.transport
		}
	}
	r.Requests = len(all)
	r.LatencyMS, _, _ = latencies(all)
	if r.Requests > 0 {
		r.BytesPerRequest = bytesSent / int64(r.Requests)
	}
	if measured > 0 {
		r.ThroughputRPS = math.Round(float64(r.Requests)/measured.Seconds()*10) / 10
	}
	return r
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 1) of sorted,
// which must not be empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// ms converts d to milliseconds, rounded to microseconds.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// truncate shortens s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// printBenchReport writes r as text.
func printBenchReport(w io.Writer, r benchReport) {
	fmt.Fprintf(w, "url:          %s\n", r.URL)
	fmt.Fprintf(w, "files:        %d (%d bytes/request on average)\n", len(r.Files), r.BytesPerRequest)
	fmt.Fprintf(w, "concurrency:  %d\n", r.Concurrency)
	fmt.Fprintf(w, "duration:     %.2fs measured after %.2fs warmup\n", r.DurationS, r.WarmupS)
	fmt.Fprintf(w, "requests:     %d (ok %d, unfinished at the deadline %d)\n", r.Requests, r.OK, r.Unfinished)
	fmt.Fprintf(w, "throughput:   %.1f req/s\n", r.ThroughputRPS)
	fmt.Fprintf(w, "latency:      p50 %.3fms  p90 %.3fms  p99 %.3fms  max %.3fms\n", r.LatencyMS.P50, r.LatencyMS.P90, r.LatencyMS.P99, r.LatencyMS.Max)
	fmt.Fprintf(w, "events:       %d\n", r.Events)
	if r.Durable != nil {
		fmt.Fprintf(w, "durable:      %v (answers listed %d events in all, the stream gained %d)\n", *r.Durable, r.EventsAnswered, *r.EventsInStream)
	}
	if r.DispatchBacklog != nil {
		fmt.Fprintf(w, "dispatch:     %d events not yet taken by the dispatcher at the end\n", *r.DispatchBacklog)
	}
	if r.ServerCPUUSPerRequest != nil {
		fmt.Fprintf(w, "cpu:          server %.1f µs/request, bench %.1f µs/request\n", *r.ServerCPUUSPerRequest, *r.ClientCPUUSPerRequest)
		fmt.Fprintf(w, "memory:       server %.2f minor page faults/request\n", *r.ServerFaultsPerRequest)
	}
	non2xx := 0
	for k, c := range r.Errors {
		if k != "transport" {
			non2xx += c
		}
	}
	if non2xx > 0 {
		keys := slices.Sorted(maps.Keys(r.Errors))
		fmt.Fprintf(w, "non-2xx: %d (by status:", non2xx)
		for _, k := range keys {
			if k != "transport" {
				fmt.Fprintf(w, " %s×%d", k, r.Errors[k])
			}
		}
		fmt.Fprintln(w, ")")
	} else {
		fmt.Fprintln(w, "non-2xx: 0")
	}
	fmt.Fprintf(w, "transport errors: %d\n", r.Errors["transport"])
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
}
