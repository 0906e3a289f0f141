// Package bus is triggerd's only door to NATS JetStream. It provisions the
// streams, makes a delivery and its trigger events durable (Commit), reads
// archived deliveries back, and tails event subjects.
//
// Three kinds of message make a delivery durable:
//
//   - Events, on "triggers.>" in EventsStream, one message per trigger
//     event, with the event id as Nats-Msg-Id.
//   - Index messages, on IndexSubject in IndexStream (shared layout): one
//     entry per accepted delivery whose events carry its body (its key, its
//     HTTP headers, and the sequence of the event holding the body), many
//     deliveries to a message under load. The bucket DedupBucket holds a
//     hash of each indexed delivery's key and its index message, in a
//     fixed number of keys, so a redelivery is recognised across restarts
//     and across processes for as long as the archive keeps it, with
//     nothing per delivery in any process.
//   - Archive records, on "deliveries.<connector>.<delivery-key>", one per
//     other accepted delivery (no events, payload by reference, or the
//     separate layout): its HTTP headers as message headers, its raw body
//     as data. A record is written at most once per subject, so its
//     presence means "this delivery was accepted".
//
// Where the records live is the archive's layout, chosen once per NATS:
//
//   - Shared (NATS 2.11 and later, the default): records live in
//     EventsStream beside the events, and the index in IndexStream. Each
//     event is published on condition that its delivery has no record yet
//     (Nats-Expected-Last-Subject-Sequence-Subject), so the server itself
//     refuses the events of a delivery recorded before; indexed deliveries
//     are looked up in DedupBucket.
//   - Separate (older servers, and a NATS that already holds
//     DeliveriesStream): records live in DeliveriesStream, every delivery
//     gets one, and Commit looks the record up before publishing.
//
// An archived delivery's body is written once: when an event of the
// delivery carries it byte for byte, the index entry or record names that
// event's sequence instead. This holds while EventRetention is at least
// ArchiveRetention (Commit checks); an operator who purges the events
// stream purges those bodies too. Bodies too large for one message live
// in the object store bucket BodiesBucket and the record points at them.
//
// The package never logs; it returns errors and calls the hooks in Options.
package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/triggers"
)

// Stream, bucket and subject names.
const (
	EventsStream     = "TRIGGERD_EVENTS"
	DeliveriesStream = "TRIGGERD_DELIVERIES"
	BodiesBucket     = "triggerd_bodies"
	// DeliveriesPrefix is the first token of archive subjects.
	DeliveriesPrefix = "deliveries"
	// EventsFilter matches every trigger event, and no archive record
	// sharing EventsStream: consumers of events filter on it.
	EventsFilter = triggers.SubjectPrefix + ".>"
)

// Defaults for Options.
const (
	DefaultEventRetention   = 7 * 24 * time.Hour
	DefaultArchiveRetention = 7 * 24 * time.Hour
	// DefaultDedupWindow covers a sender's retry of an attempt interrupted
	// mid-way. The server keeps every event id of the window in memory
	// (about 130 bytes each), so it is hours, not days; event ids are
	// deterministic, so consumers can deduplicate beyond it.
	DefaultDedupWindow = 2 * time.Hour
	// MinArchiveRetention is the shortest archive the product promises:
	// duplicates are recognised and deliveries replayable for 72 hours.
	MinArchiveRetention = 72 * time.Hour
	// DefaultMaxInlineBytes bounds the payload bytes one delivery's events
	// carry inline in total (a push of 2,048 commits would otherwise copy
	// its payload 2,049 times).
	DefaultMaxInlineBytes = 8 << 20
	// DefaultWriteTimeout bounds a write to NATS: nats.go writes under the
	// connection's lock, so a server that stopped reading (stopped, or
	// behind a network black hole) would hold every publisher for as long
	// as one write may block, a minute by nats.go's default, past any
	// commit deadline. A write that times out closes the connection, which
	// then reconnects.
	DefaultWriteTimeout = 2 * time.Second
)

// Options configures a Bus.
type Options struct {
	// Name identifies this client to the server ("triggerd", "triggerctl").
	Name string
	// EventRetention is how long events stay in EventsStream.
	EventRetention time.Duration
	// ArchiveRetention is how long raw deliveries stay archived, and so how
	// long a redelivery is recognised as a duplicate. At least
	// MinArchiveRetention.
	ArchiveRetention time.Duration
	// DedupWindow is EventsStream's Nats-Msg-Id duplicate window: an
	// attempt interrupted after publishing some events and retried within
	// the window publishes no event twice. It costs server memory in
	// proportion to the events published within the window.
	DedupWindow time.Duration
	// MaxInlineBytes bounds the payload bytes one delivery's events carry
	// inline, in total; past it, events carry a payload_ref instead.
	MaxInlineBytes int
	// OnConnectionChange, when set, is called with a short description on
	// every disconnect and reconnect.
	OnConnectionChange func(connected bool, detail string)
	// OnWorkStall, when set, is called when a Work consumer found itself
	// no longer pulling while messages waited, and pulled afresh.
	OnWorkStall func(durable string, pending uint64)
	// Embedded, when set, is the in-process server url belongs to: the
	// connection then bypasses the network stack.
	Embedded *Embedded
	// User and Password authenticate the connection, when the server
	// asks (the embedded server with EmbeddedOptions.Auth: OperatorUser
	// and its password). A url carrying a user of its own keeps it.
	User, Password string
	// SkipProvision connects without creating or updating the streams
	// (for tools that only read).
	SkipProvision bool
	// ServeAgents answers agents' consumer creations and results on
	// agent.GatewayPrefix (see agent.Imports), as triggerd itself does:
	// without a process that does, agents in accounts of their own can
	// neither create their consumer nor report.
	ServeAgents bool
	// WriteTimeout bounds each write to NATS (DefaultWriteTimeout if
	// zero); keep it well below the commit deadline.
	WriteTimeout time.Duration
	// SeparateArchive keeps archive records in DeliveriesStream on a NATS
	// that holds no triggerd streams yet, as servers before 2.11 require
	// (Connect chooses it itself there). A NATS that already holds the
	// streams keeps the layout it has.
	SeparateArchive bool
	// Replicas is how many servers hold each stream and bucket triggerd
	// creates (1 to MaxReplicas). Zero picks 3 on a JetStream cluster of
	// three or more servers, else 1. A stream with more replicas keeps
	// them; a count above the cluster's size is refused.
	Replicas int
	// ReplicasFlag names the setting Replicas came from, for errors
	// ("--nats-replicas").
	ReplicasFlag string
	// OnReplicasKept, when set, is called once per stream or bucket that
	// has more replicas than Replicas asks, which Connect leaves as is.
	OnReplicasKept func(stream string, have, want int)
}

func (o *Options) setDefaults() error {
	if o.Name == "" {
		o.Name = "triggerd"
	}
	if o.EventRetention == 0 {
		o.EventRetention = DefaultEventRetention
	}
	if o.ArchiveRetention == 0 {
		o.ArchiveRetention = DefaultArchiveRetention
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = DefaultDedupWindow
	}
	if o.MaxInlineBytes == 0 {
		o.MaxInlineBytes = DefaultMaxInlineBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.ArchiveRetention < MinArchiveRetention {
		return fmt.Errorf("archive retention %s is shorter than the promised %s: duplicates and replays must stay available that long", o.ArchiveRetention, MinArchiveRetention)
	}
	if o.DedupWindow > o.EventRetention {
		return fmt.Errorf("dedup window %s exceeds event retention %s; JetStream requires the window to fit in the retention", o.DedupWindow, o.EventRetention)
	}
	return nil
}

// Bus is a connection to NATS with the triggerd streams provisioned.
type Bus struct {
	opts       Options
	nc         *nats.Conn
	js         jetstream.JetStream
	events     jetstream.Stream
	deliveries jetstream.Stream
	bodies     jetstream.ObjectStore
	// shared is true when archive records live in EventsStream (then
	// deliveries is events).
	shared bool
	// index is the delivery index (shared layout only), and indexStream
	// the stream holding it (nil for a reader on a NATS without one).
	index       *deliveryIndex
	indexStream jetstream.Stream
	// dedupStream is the stream behind DedupBucket (shared layout, once
	// provisioned).
	dedupStream jetstream.Stream
	// eventTTL and recordTTL, when set, are the per-message TTLs that give
	// events and records of a shared stream their own retention.
	eventTTL, recordTTL time.Duration
	closed              chan struct{}
	// consumed, set by tests, sees every ConsumeContext Work starts.
	consumed func(jetstream.ConsumeContext)
	// encodeBufs recycles event encoding buffers (*[]byte).
	encodeBufs sync.Pool
	// acks publishes events and hands out their acknowledgements.
	acks *ackMux
	// replicas is what streams and buckets triggerd creates get.
	replicas int
	// health follows whether the written streams have leaders.
	health health
	// down is set while the connection is lost (between nats.go's
	// disconnect and reconnect callbacks, and once closed). Ready reads
	// it on every delivery: the connection's status would take the
	// connection's lock, which publishers and the flusher contend for.
	down atomic.Bool
}

// Connect connects to the NATS server at url, provisions the streams (unless
// SkipProvision) and returns the Bus. The connection reconnects forever; a
// NATS outage makes Commit fail, never hang past its context.
func Connect(ctx context.Context, url string, o Options) (*Bus, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	b := &Bus{opts: o, closed: make(chan struct{})}
	b.encodeBufs.New = func() any { buf := make([]byte, 0, 16<<10); return &buf }
	nopts := []nats.Option{
		nats.ClosedHandler(func(*nats.Conn) { b.down.Store(true); close(b.closed) }),
		nats.DrainTimeout(5 * time.Second),
		nats.FlusherTimeout(o.WriteTimeout),
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
	}
	if o.Embedded != nil {
		nopts = append(nopts, nats.InProcessServer(o.Embedded))
	}
	if o.User != "" {
		nopts = append(nopts, nats.UserInfo(o.User, o.Password))
	}
	cb := o.OnConnectionChange
	if cb == nil {
		cb = func(bool, string) {}
	}
	nopts = append(nopts,
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			b.down.Store(true)
			detail := "disconnected"
			if err != nil {
				detail = "disconnected: " + err.Error()
			}
			cb(false, detail)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			b.down.Store(false)
			cb(true, "reconnected to "+nc.ConnectedUrlRedacted())
		}),
	)
	nc, err := nats.Connect(url, nopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", RedactURL(url), redactError(err, url))
	}
	b.nc = nc
	b.js, err = jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if b.acks, err = newAckMux(nc); err != nil {
		nc.Close()
		return nil, err
	}
	err = b.provision(ctx)
	if err == nil && o.ServeAgents {
		err = b.serveAgents(ctx)
	}
	if err == nil && !o.SkipProvision {
		b.watchHealth()
	}
	if err != nil {
		if b.index != nil {
			b.index.close()
		}
		nc.Close()
		return nil, err
	}
	return b, nil
}

// ErrNoJetStream reports a NATS server without JetStream (nats-server
// started without -js, or an account without JetStream).
var ErrNoJetStream = errors.New("JetStream is not enabled")

func (b *Bus) provision(ctx context.Context) error {
	// Without JetStream the requests after this one find "no responders",
	// which says nothing of the cause: ask first (AccountInfo reports no
	// responders as ErrJetStreamNotEnabled). Any other failure (a
	// credential allowed only the streams it needs, say) is left to those
	// requests, which report their own.
	// In a cluster, JetStream answers nothing (no responders, or not
	// enabled) until its servers have elected a meta leader: wait for it.
	clustered := b.nc.ConnectedClusterName() != ""
	// A server without a meta leader yet does not answer at all: ask
	// often.
	_, err := retryJSEvery(ctx, time.Second, func(ctx context.Context) (*jetstream.AccountInfo, error) {
		info, err := b.js.AccountInfo(ctx)
		if clustered && (errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount)) {
			err = fmt.Errorf("%w: %w", nats.ErrNoResponders, err)
		}
		return info, err
	})
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("the NATS at %s: %w (start nats-server with -js, or enable JetStream for this account)", b.nc.ConnectedUrlRedacted(), ErrNoJetStream)
	}
	if err := b.chooseReplicas(); err != nil {
		return err
	}
	shared, err := b.layout(ctx)
	if err != nil {
		return err
	}
	b.shared = shared
	if shared {
		b.index = newDeliveryIndex(b)
	}
	if b.opts.SkipProvision {
		if b.events, err = b.js.Stream(ctx, EventsStream); err != nil {
			return fmt.Errorf("stream %s: %w (has triggerd run against this NATS?)", EventsStream, err)
		}
		b.deliveries = b.events
		if !shared {
			if b.deliveries, err = b.js.Stream(ctx, DeliveriesStream); err != nil {
				return fmt.Errorf("stream %s: %w (has triggerd run against this NATS?)", DeliveriesStream, err)
			}
		}
		if b.bodies, err = b.js.ObjectStore(ctx, BodiesBucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("object store %s: %w", BodiesBucket, err)
		}
		if shared {
			if b.indexStream, err = b.js.Stream(ctx, IndexStream); errors.Is(err, jetstream.ErrStreamNotFound) {
				b.indexStream = nil // only an earlier version has run: its index is in EventsStream
			} else if err != nil {
				return fmt.Errorf("stream %s: %w", IndexStream, err)
			}
			if b.index.kv, err = b.js.KeyValue(ctx, DedupBucket); errors.Is(err, jetstream.ErrBucketNotFound) {
				b.index.kv = nil // only an earlier version has run: nothing indexed is found
			} else if err != nil {
				return fmt.Errorf("bucket %s: %w", DedupBucket, err)
			}
		}
		return nil
	}
	events := jetstream.StreamConfig{
		Name:        EventsStream,
		Description: "triggerd trigger events, one message per event, Nats-Msg-Id = event id",
		Subjects:    []string{EventsFilter},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      b.opts.EventRetention,
		Duplicates:  b.opts.DedupWindow,
		Discard:     jetstream.DiscardOld,
		AllowDirect: true,
	}
	if shared {
		// One stream, two retentions: the stream keeps messages for the
		// longer one and the shorter-lived kind carries a TTL.
		events.Description = "triggerd trigger events (triggers.>, Nats-Msg-Id = event id) and raw webhook deliveries (deliveries.>, one per delivery)"
		events.Subjects = append(events.Subjects, DeliveriesPrefix+".>")
		events.MaxAge = max(b.opts.EventRetention, b.opts.ArchiveRetention)
		events.AllowMsgTTL = true
		if b.opts.EventRetention < events.MaxAge {
			b.eventTTL = b.opts.EventRetention
		}
		if b.opts.ArchiveRetention < events.MaxAge {
			b.recordTTL = b.opts.ArchiveRetention
		}
	}
	if b.events, err = b.ensureStream(ctx, events); err != nil {
		return err
	}
	b.deliveries = b.events
	// The archive's other stream: the index (shared layout) or the
	// records (separate layout), kept as long as the archive.
	archive := jetstream.StreamConfig{
		Name:        DeliveriesStream,
		Description: "triggerd raw webhook deliveries (headers and body), one per delivery id",
		Subjects:    []string{DeliveriesPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      b.opts.ArchiveRetention,
		Discard:     jetstream.DiscardOld,
		AllowDirect: true,
	}
	if shared {
		archive.Name, archive.Subjects = IndexStream, []string{IndexSubject}
		archive.Description = "triggerd delivery index: which deliveries were accepted, with their headers and the event holding each body"
	}
	stream, err := b.ensureStream(ctx, archive)
	if err != nil {
		return err
	}
	if shared {
		b.indexStream = stream
	} else {
		b.deliveries = stream
	}
	b.bodies, err = b.ensureObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      BodiesBucket,
		Description: "triggerd raw webhook bodies too large for one message",
		TTL:         b.opts.ArchiveRetention,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return err
	}
	if err := b.provisionWork(ctx); err != nil {
		return err
	}
	if b.index != nil {
		kv, err := b.ensureKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      DedupBucket,
			Description: "triggerd duplicate check: which deliveries the delivery index holds, 2^18 keys of sorted (hash, index message, expiry)",
			History:     1,
			Storage:     jetstream.FileStorage,
		})
		if err != nil {
			return err
		}
		b.index.kv = kv
		if b.dedupStream, err = retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) {
			return b.js.Stream(ctx, dedupStream)
		}); err != nil {
			return fmt.Errorf("stream %s: %w", dedupStream, err)
		}
		// Commit must know every delivery accepted before it runs: once,
		// when the bucket is new, those indexed by earlier versions.
		return b.index.fill(ctx)
	}
	return nil
}

// dedupStream is the stream behind DedupBucket.
const dedupStream = "KV_" + DedupBucket

// sharedArchiveSince is the first NATS release that checks a subject other
// than the published one (Nats-Expected-Last-Subject-Sequence-Subject) and
// keeps per-message TTLs: what the shared layout relies on.
var sharedArchiveSince = [3]int{2, 11, 0}

// layout reports whether archive records live in EventsStream. A NATS that
// holds triggerd's streams keeps the layout it has; a new one gets the
// shared layout unless the server is too old or SeparateArchive asks.
func (b *Bus) layout(ctx context.Context) (shared bool, err error) {
	version := b.nc.ConnectedServerVersion()
	capable := versionAtLeast(version, sharedArchiveSince)
	stream := func(name string) (jetstream.Stream, error) {
		return retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) { return b.js.Stream(ctx, name) })
	}
	if _, err := stream(DeliveriesStream); err == nil {
		return false, nil
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return false, fmt.Errorf("stream %s: %w", DeliveriesStream, err)
	}
	s, err := stream(EventsStream)
	switch {
	case err == nil && slices.Contains(s.CachedInfo().Config.Subjects, DeliveriesPrefix+".>"):
		if !capable {
			return false, fmt.Errorf("stream %s holds the delivery archive, which needs NATS %d.%d or later; this server is %s", EventsStream, sharedArchiveSince[0], sharedArchiveSince[1], version)
		}
		return true, nil
	case err != nil && !errors.Is(err, jetstream.ErrStreamNotFound):
		return false, fmt.Errorf("stream %s: %w", EventsStream, err)
	}
	return capable && !b.opts.SeparateArchive, nil
}

// versionAtLeast reports whether a server version ("2.11.4",
// "2.12.0-RC.1") is at least min.
func versionAtLeast(version string, min [3]int) bool {
	core, _, _ := strings.Cut(version, "-")
	parts := strings.SplitN(core, ".", 3)
	for i := range min {
		if i >= len(parts) {
			return false
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return false
		}
		if n != min[i] {
			return n > min[i]
		}
	}
	return true
}

// Ready reports whether the Bus can make deliveries durable now: the
// connection to NATS is up, as nats.go last told (its callbacks come a
// moment after the change), and every stream triggerd writes to has a
// leader, as last checked (see NotReadyReason).
func (b *Bus) Ready() bool { return !b.down.Load() && b.health.reason.Load() == nil }

// MaxPayload returns the server's max message size, in bytes.
func (b *Bus) MaxPayload() int { return int(b.nc.MaxPayload()) }

// Close drains pending publishes and closes the connection, waiting at
// most the drain timeout (5s).
func (b *Bus) Close() {
	b.stopHealth()
	if b.index != nil {
		b.index.close()
	}
	if err := b.nc.Drain(); err != nil {
		b.nc.Close()
	}
	<-b.closed
}

// RedactURL hides credentials in a NATS URL, or a comma-separated list of
// them as nats.Connect takes, before it is shown. A URL that does not
// parse (a bad escape in the password, say) loses its user information
// all the same.
func RedactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		if userinfo(p) != "" {
			parts[i] = strings.Replace(p, userinfo(p), "REDACTED", 1)
		}
	}
	return strings.Join(parts, ",")
}

// userinfo returns the user information of one NATS URL ("user:password"
// in nats://user:password@host:4222), or "". It reads the text rather
// than parsing it, so that a URL url.Parse refuses is covered too.
func userinfo(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	end := len(raw)
	if i := strings.IndexAny(raw[start:], "/?#"); i >= 0 {
		end = start + i
	}
	at := strings.LastIndexByte(raw[start:end], '@')
	if at <= 0 {
		return ""
	}
	return raw[start : start+at]
}

// redactError hides the credentials of the NATS URL raw in err's text:
// nats.go quotes the URL it could not parse in its error, password and
// all. errors.Is and As still see err.
func redactError(err error, raw string) error {
	msg := err.Error()
	redacted := msg
	for _, p := range strings.Split(raw, ",") {
		if ui := userinfo(p); ui != "" {
			quoted := strconv.Quote(ui)
			redacted = strings.ReplaceAll(redacted, ui, "REDACTED")
			redacted = strings.ReplaceAll(redacted, quoted[1:len(quoted)-1], "REDACTED")
		}
	}
	if redacted == msg {
		return err
	}
	return &redactedError{msg: redacted, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// EventCount returns how many events EventsStream holds (archive records
// sharing the stream are not counted). In the shared layout it lists the
// stream's event subjects with their counts: it is for tools and tests
// (triggerctl bench checks durability with it), not a hot path.
func (b *Bus) EventCount(ctx context.Context) (uint64, error) {
	if !b.shared {
		info, err := b.events.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("stream %s: %w", EventsStream, err)
		}
		return info.State.Msgs, nil
	}
	return subjectMsgs(ctx, b.events, EventsFilter)
}

// subjectMsgs returns how many messages s holds on subjects matching filter.
func subjectMsgs(ctx context.Context, s jetstream.Stream, filter string) (uint64, error) {
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", s.CachedInfo().Config.Name, err)
	}
	var n uint64
	for _, count := range info.State.Subjects {
		n += count
	}
	return n, nil
}

// ConsumerPending returns how many messages of stream a durable consumer
// has not been delivered yet; found is false when it does not exist. It is
// for tools (triggerctl bench reports the dispatcher's backlog with it).
func (b *Bus) ConsumerPending(ctx context.Context, stream, durable string) (pending uint64, found bool, err error) {
	cons, err := b.js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("consumer %s on %s: %w", durable, stream, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("consumer %s on %s: %w", durable, stream, err)
	}
	return info.NumPending, true, nil
}
