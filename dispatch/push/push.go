// Package push starts HTTP agents: it POSTs a run to the agent's URL,
// signed the Standard Webhooks way, and says whether and when to try again.
//
// The package is pure HTTP. The caller drives the retries: it is a
// JetStream consumer that calls Sender.Send for each delivery of a run,
// acknowledges the run on success, terminates it when the error is
// permanent (IsPermanent), and otherwise NakWithDelay's it by Delay.
//
// Agents' URLs are given by users, so the package guards against
// server-side request forgery (package internal/netguard): CheckURL vets a
// URL when it is registered, and the client NewClient builds refuses, at
// dial time, addresses inside
// the platform's network (loopback, private, link-local and the like),
// whatever a name resolves to when the run is sent.
package push

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/internal/netguard"
)

// Defaults and limits.
const (
	// DefaultTimeout bounds a send whose context has no deadline, and the
	// requests of the default client.
	DefaultTimeout = 30 * time.Second
	// MaxResponseBytes is how much of an agent's answer Send reads.
	MaxResponseBytes = 1 << 20
	// DefaultUserAgent is sent when Sender.UserAgent is empty.
	DefaultUserAgent = "triggerd-push/1"
	// DefaultBackoffBase and DefaultBackoffMax are the backoff Delay uses:
	// the first retry comes within a second, the later ones within five
	// minutes at most.
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	// MaxRetryAfter caps an agent's Retry-After, and so Delay.
	MaxRetryAfter = time.Hour
)

// Sender POSTs runs to HTTP agents. The zero value is ready to use: it
// sends with the default client (NewClient(DefaultTimeout, false)) and the
// system clock. A Sender is safe for concurrent use.
type Sender struct {
	// Client sends the requests; nil means a shared NewClient(DefaultTimeout,
	// false). Send never follows redirects, whatever the client's
	// CheckRedirect says; the client's own transport and dialer decide which
	// addresses it may reach, so give it one from NewClient.
	Client *http.Client
	// Now is the clock the signature's timestamp comes from; nil means
	// time.Now.
	Now func() time.Time
	// UserAgent is the User-Agent header; empty means DefaultUserAgent.
	UserAgent string
}

// Delivery is the answer of an agent that took a run.
type Delivery struct {
	// Status is the HTTP status the agent answered.
	Status int
	// Result is the agent's result when its 2xx answer was one: a JSON
	// Result of at most MaxResponseBytes with a valid status, for this run
	// and agent (a result naming no run or agent is taken as this run's).
	// Nil otherwise: answering a result is optional.
	Result *agent.Result
	// Unrecognized is the 2xx answer's body when it was not such a Result
	// (at most MaxResponseBytes; nil for an empty body): the caller keeps
	// it on the run, marked, instead of dropping it.
	Unrecognized []byte
	// Duration is the time from sending the request to reading the answer.
	Duration time.Duration
}

// SendError is why a send failed. Its text never contains the signing
// secret, nor the URL's query.
type SendError struct {
	// Permanent means sending the run again cannot succeed: the agent
	// refused it (a 4xx other than 408 and 429, 410 Gone included), it
	// redirected, or the URL, address or secret is unusable. Otherwise the
	// failure (network error, timeout, 408, 429, 5xx) is worth retrying.
	Permanent bool
	// RetryAfter is the wait the agent asked for with Retry-After, at most
	// MaxRetryAfter; zero when it did not.
	RetryAfter time.Duration
	// Status is the HTTP status the agent answered; zero when there was no
	// answer.
	Status int
	// Err is the underlying error, when there was one.
	Err error
}

func (e *SendError) Error() string {
	var b strings.Builder
	b.WriteString("push: ")
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "agent answered %d %s", e.Status, http.StatusText(e.Status))
		if e.Status >= 300 && e.Status < 400 {
			b.WriteString(", redirects are not followed")
		}
		if e.Err != nil {
			b.WriteString(": " + e.Err.Error())
		}
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	default:
		b.WriteString("send failed")
	}
	if e.Permanent {
		b.WriteString(" (permanent)")
	} else if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

func (e *SendError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is a SendError that retrying cannot fix.
// Any other error, nil aside, is worth retrying.
func IsPermanent(err error) bool {
	var se *SendError
	return errors.As(err, &se) && se.Permanent
}

var defaultClient = sync.OnceValue(func() *http.Client { return NewClient(DefaultTimeout, false) })

// Send POSTs run as JSON to url, signed with secret under the run's id
// (webhook-id, webhook-timestamp and webhook-signature headers, see
// agent.Sign), and reads at most MaxResponseBytes of the answer. The
// request ends with ctx, or after DefaultTimeout when ctx has no deadline.
//
// A 2xx answer means the agent took the run: Send returns its Delivery and
// a nil error. Anything else returns a *SendError (with the Delivery when
// there was an answer): a redirect is a permanent failure and is not
// followed.
func (s *Sender) Send(ctx context.Context, url, secret string, run agent.Run) (Delivery, error) {
	if err := netguard.CheckURL(url, true); err != nil {
		return Delivery{}, &SendError{Permanent: true, Err: err}
	}
	body, err := json.Marshal(run)
	if err != nil {
		return Delivery{}, &SendError{Permanent: true, Err: fmt.Errorf("encoding run %s: %w", run.ID, err)}
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ts := now()
	sig, err := agent.Sign(secret, run.ID, ts, body)
	if err != nil {
		return Delivery{}, &SendError{Permanent: true, Err: err}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Delivery{}, &SendError{Permanent: true, Err: redact(err)}
	}
	ua := s.UserAgent
	if ua == "" {
		ua = DefaultUserAgent
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", ua)
	req.Header.Set(agent.HeaderID, run.ID)
	req.Header.Set(agent.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(agent.HeaderSignature, sig)

	client := s.Client
	if client == nil {
		client = defaultClient()
	}
	noRedirects := *client
	noRedirects.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	start := time.Now()
	resp, err := noRedirects.Do(req)
	if err != nil {
		return Delivery{Duration: time.Since(start)}, &SendError{Permanent: errors.Is(err, netguard.ErrForbiddenAddress), Err: redact(err)}
	}
	defer resp.Body.Close()
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	d := Delivery{Status: resp.StatusCode, Duration: time.Since(start)}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if readErr == nil && len(answer) <= MaxResponseBytes {
			d.Result = decodeResult(answer, run)
			if d.Result == nil && len(bytes.TrimSpace(answer)) > 0 {
				d.Unrecognized = answer
			}
		}
		return d, nil
	}
	e := &SendError{Status: resp.StatusCode, Permanent: true}
	if c := resp.StatusCode; c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500 && c < 600 {
		e.Permanent = false
		e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now())
	}
	return d, e
}

// decodeResult returns the Result answer holds for run, or nil.
func decodeResult(answer []byte, run agent.Run) *agent.Result {
	var res agent.Result
	if err := json.Unmarshal(answer, &res); err != nil {
		return nil
	}
	if res.Status != agent.StatusSucceeded && res.Status != agent.StatusFailed {
		return nil
	}
	if res.RunID == "" {
		res.RunID = run.ID
	}
	if res.Agent == "" {
		res.Agent = run.Agent
	}
	if res.RunID != run.ID || res.Agent != run.Agent {
		return nil
	}
	return &res
}

// redact drops the query and fragment of the URL a *url.Error names: a
// user's URL may carry a token there.
func redact(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil {
		return &url.Error{Op: ue.Op, URL: "(invalid URL)", Err: ue.Err}
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment = nil, "", "", ""
	return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
}

// parseRetryAfter reads a Retry-After value, seconds or an HTTP date, as a
// wait from now in [0, MaxRetryAfter].
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || secs >= uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		return 0
	case d > MaxRetryAfter:
		return MaxRetryAfter
	}
	return d
}

// Backoff returns the wait before retry number attempt (1 for the retry
// after the first failure), "full jitter" style: uniform in
// [0, min(max, base * 2^(attempt-1))], rnd giving numbers in [0, 1)
// (math/rand/v2's Float64 when nil). An attempt below 1 counts as 1; a
// base or max that is not positive means DefaultBackoffBase or
// DefaultBackoffMax. It does not overflow, however large attempt is. It is
// agent.Backoff, the delay agents' own consumers wait, with these
// defaults.
func Backoff(attempt int, base, max time.Duration, rnd func() float64) time.Duration {
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if max <= 0 {
		max = DefaultBackoffMax
	}
	return agent.Backoff(attempt, base, max, rnd)
}

// Delay is how long to wait before sending again after err, the attempt-th
// failure of the run: the longer of Backoff(attempt, DefaultBackoffBase,
// DefaultBackoffMax, nil) and the agent's Retry-After, at most
// MaxRetryAfter. Permanent errors are not to be retried at all.
func Delay(err error, attempt int) time.Duration {
	d := Backoff(attempt, DefaultBackoffBase, DefaultBackoffMax, nil)
	var se *SendError
	if errors.As(err, &se) && se.RetryAfter > d {
		d = se.RetryAfter
	}
	if d > MaxRetryAfter {
		d = MaxRetryAfter
	}
	return d
}
