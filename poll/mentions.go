package poll

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/triggers"
)

const (
	// overlap is how far before the high-water mark a notifications poll
	// asks from: threads show up with whole-second timestamps and possibly
	// late, and those already emitted are recognised by their id and
	// updated_at.
	overlap = time.Minute
	// lastModifiedGuard: a Last-Modified this close to now may be followed
	// by another change in the same second, which If-Modified-Since (whole
	// seconds) would hide; such a Last-Modified is sent a second earlier,
	// so the next poll reads the threads once more.
	lastModifiedGuard = 2 * time.Second
	// intervalSlack absorbs the scheduling jitter of passes spaced exactly
	// X-Poll-Interval apart.
	intervalSlack = time.Second
)

// mentionCursor is what the poller keeps about an account's notifications.
type mentionCursor struct {
	// LastModified is sent as If-Modified-Since.
	LastModified string `json:"last_modified,omitempty"`
	// NotBefore is when the provider's X-Poll-Interval allows the next poll.
	NotBefore time.Time `json:"not_before,omitzero"`
	// High is the newest updated_at of the threads processed.
	High time.Time `json:"high,omitzero"`
	// Threads holds, for the threads emitted at or after High - overlap,
	// the updated_at last emitted.
	Threads map[string]time.Time `json:"threads,omitempty"`
}

// seen reports whether n's current update was emitted already, or is older
// than what the cursor tracks.
func (c *mentionCursor) seen(n codehost.Notification) bool {
	if last, ok := c.Threads[n.ID]; ok {
		return !n.UpdatedAt.After(last)
	}
	return !c.High.IsZero() && n.UpdatedAt.Before(c.High.Add(-overlap))
}

// pollMentions emits a new_mention event per participating notification
// thread with reason "mention" updated at or after from (the earliest
// account-wide trigger's creation) and after the update last emitted for
// the thread, and returns what it emitted. An account polled less than
// X-Poll-Interval before (by any poller: the time is in the cursor) is not
// polled.
//
// It asks for the threads updated since a minute before the high-water
// mark, read ones included, with If-Modified-Since: nothing new answers
// 304, which costs no budget.
func (p *Poller) pollMentions(ctx context.Context, a account, from time.Time) (counts, error) {
	key := cursorKey(a.tenant, a.id, triggers.NewMention)
	var cur mentionCursor
	stored, err := p.loadCursor(ctx, key, &cur)
	if err != nil {
		return counts{}, err
	}
	start := p.o.Now()
	if start.Add(intervalSlack).Before(cur.NotBefore) {
		return counts{}, nil
	}
	since := from
	if !cur.High.IsZero() {
		since = later(cur.High.Add(-overlap), from)
	}
	threads, lastModified, interval, notModified, err := a.api.Notifications(ctx, cur.LastModified, since)
	if err != nil {
		return counts{}, err
	}
	next := cur
	next.NotBefore = start.Add(interval).UTC()
	var failed error
	var c counts
	if !notModified {
		slices.SortFunc(threads, func(x, y codehost.Notification) int {
			return cmp.Or(x.UpdatedAt.Compare(y.UpdatedAt), cmp.Compare(x.ID, y.ID))
		})
		for _, n := range threads {
			if n.Reason == "mention" && !n.UpdatedAt.Before(from) && !next.seen(n) {
				dup, err := p.emit(ctx, a, mentionItem(a, n))
				if err != nil {
					failed = err
					break
				}
				if next.Threads == nil {
					next.Threads = map[string]time.Time{}
				}
				next.Threads[n.ID] = n.UpdatedAt
				c.add(dup)
			}
			next.High = later(next.High, n.UpdatedAt)
		}
		maps.DeleteFunc(next.Threads, func(_ string, t time.Time) bool { return t.Before(next.High.Add(-overlap)) })
	}
	// An answer processed only in part must be read again: keep the old
	// Last-Modified.
	if failed == nil {
		next.LastModified = p.guardLastModified(lastModified)
	}
	if err := p.saveCursor(ctx, stored, next); err != nil {
		return c, err
	}
	return c, failed
}

// guardLastModified returns the If-Modified-Since to send next: lm, or a
// second earlier when lm is so recent that another change may still come
// within its second.
func (p *Poller) guardLastModified(lm string) string {
	t, err := http.ParseTime(lm)
	if err != nil || t.Before(p.o.Now().Add(-lastModifiedGuard)) {
		return lm
	}
	return t.Add(-time.Second).UTC().Format(http.TimeFormat)
}

// mentionItem is the new_mention event of thread n of account a.
func mentionItem(a account, n codehost.Notification) item {
	var repo *triggers.Repository
	if owner, name, ok := strings.Cut(n.Repository, "/"); ok {
		repo = &triggers.Repository{Owner: owner, Name: name, FullName: n.Repository}
	}
	return item{
		kind:       triggers.NewMention,
		deliveryID: "notification-" + n.ID + "-" + n.UpdatedAt.UTC().Format(time.RFC3339),
		source:     SourceNotifications,
		action:     "mention",
		repo:       repo,
		resource: triggers.Resource{
			Type: "mention", ID: n.ID, Number: subjectNumber(n.Subject), Title: n.Subject.Title,
			URL: htmlURL(n.Subject.URL), Mentioned: a.login,
		},
		raw:    n.Raw,
		marker: "notifications",
	}
}

// subjectNumber is the issue, pull request or discussion number of a
// thread's subject, from its API URL; 0 for other subjects.
func subjectNumber(s codehost.NotificationSubject) int64 {
	switch s.Type {
	case "Issue", "PullRequest", "Discussion":
	default:
		return 0
	}
	i := strings.LastIndexByte(s.URL, '/')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(s.URL[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// htmlURL turns a subject's API URL into its web page's, as webhook events
// carry, for GitHub (api.github.com) and GitHub Enterprise Server
// (<host>/api/v3) issues, pull requests and commits; any other URL is
// returned as it is.
func htmlURL(api string) string {
	u, err := url.Parse(api)
	if err != nil || u.Host == "" {
		return api
	}
	root, rest, ok := strings.Cut(u.Path, "/repos/")
	switch {
	case !ok:
		return api
	case u.Host == "api.github.com" && root == "":
		u.Host = "github.com"
	case strings.HasSuffix(root, "/api/v3"):
		root = strings.TrimSuffix(root, "/api/v3")
	default:
		return api
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 {
		return api
	}
	switch parts[2] {
	case "issues":
	case "pulls":
		parts[2] = "pull"
	case "commits":
		parts[2] = "commit"
	default:
		return api
	}
	u.Path = root + "/" + strings.Join(parts, "/")
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}
