package codehost

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
)

const (
	// DefaultPollInterval is what Notifications reports when GitHub sends
	// no X-Poll-Interval (GitHub's usual value).
	DefaultPollInterval = 60 * time.Second
	// notificationsPerPage is GitHub's largest page of notifications.
	notificationsPerPage = 50
	// maxNotificationPages bounds one Notifications read.
	maxNotificationPages = 10
)

// PolledGist is one of the authenticated user's gists, as GET /gists
// lists it (Gist is the gist steps' output).
type PolledGist struct {
	ID          string
	HTMLURL     string
	Description string
	Public      bool
	// Owner is the owner's login.
	Owner                string
	CreatedAt, UpdatedAt time.Time
	// Raw is GitHub's JSON object of the gist.
	Raw json.RawMessage
}

// ListGists reads the authenticated user's gists (GET /gists), public and
// secret, updated at or after since (all of them when since is zero), most
// recently updated first. It reads one page of 100, GitHub's largest: a
// poller that passes its previous poll's time as since sees at most the
// gists changed in between, which fit.
//
// etag, when set, is sent as If-None-Match: an unchanged list answers
// notModified (and costs no rate limit budget), with newETag = etag.
// Otherwise newETag is the answer's ETag, to pass on the next call.
//
// GitHub API docs: https://docs.github.com/rest/gists/gists#list-gists-for-the-authenticated-user
func (h Hooks) ListGists(ctx context.Context, since time.Time, etag string) (gists []PolledGist, newETag string, notModified bool, err error) {
	const what = "list the user's gists"
	c, err := h.client()
	if err != nil {
		return nil, "", false, wrapHook(what, err)
	}
	q := url.Values{"per_page": {strconv.Itoa(perPage)}}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	raws, status, newETag, notModified, err := h.pollList(ctx, c, what, c.url("/gists", q), etag, "list of gists")
	if err != nil || notModified {
		return nil, newETag, notModified, err
	}
	gists = make([]PolledGist, 0, len(raws))
	for _, raw := range raws {
		var j struct {
			ID          string    `json:"id"`
			HTMLURL     string    `json:"html_url"`
			Description *string   `json:"description"`
			Public      bool      `json:"public"`
			CreatedAt   time.Time `json:"created_at"`
			UpdatedAt   time.Time `json:"updated_at"`
			Owner       *struct {
				Login string `json:"login"`
			} `json:"owner"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, "", false, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: status, Message: fmt.Sprintf("decode a gist: %v", err)})
		}
		g := PolledGist{ID: j.ID, HTMLURL: j.HTMLURL, Public: j.Public, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, Raw: raw}
		if j.Description != nil {
			g.Description = *j.Description
		}
		if j.Owner != nil {
			g.Owner = j.Owner.Login
		}
		gists = append(gists, g)
	}
	return gists, newETag, false, nil
}

// pollList GETs one page of a list a poller reads, sending etag (when
// set) as If-None-Match: an unchanged list answers notModified, which
// costs no rate limit budget, with newETag = etag. Otherwise it returns
// the list's items undecoded, the answer's status and its ETag, to pass
// on the next call. what names the call in errors, noun the list.
func (h Hooks) pollList(ctx context.Context, c *client, what, u, etag, noun string) (raws []json.RawMessage, status int, newETag string, notModified bool, err error) {
	hdr := http.Header{}
	if etag != "" {
		hdr.Set("If-None-Match", etag)
	}
	a, err := h.exchange(ctx, c, http.MethodGet, u, hdr, nil)
	if err != nil {
		return nil, 0, "", false, h.poll(c, what, a, err)
	}
	newETag = a.header.Get("ETag")
	if a.status == http.StatusNotModified {
		if newETag == "" {
			newETag = etag
		}
		return nil, a.status, newETag, true, nil
	}
	if err := decodeAnswer(a, noun, &raws); err != nil {
		return nil, 0, "", false, wrapHook(what, err)
	}
	return raws, a.status, newETag, false, nil
}

// NotificationSubject is what a notification thread is about.
type NotificationSubject struct {
	Title string
	// URL and LatestCommentURL are API URLs ("" when GitHub sends null).
	URL, LatestCommentURL string
	// Type is Issue, PullRequest, Commit, Release, Discussion, ...
	Type string
}

// Notification is one notification thread of the authenticated user.
type Notification struct {
	ID string
	// Reason is why the user was notified: mention, author, comment,
	// assign, review_requested, ...
	Reason    string
	Unread    bool
	UpdatedAt time.Time
	Subject   NotificationSubject
	// Repository is the repository's full name (owner/name).
	Repository string
	// Raw is GitHub's JSON object of the thread.
	Raw json.RawMessage
}

// Notifications reads the threads the authenticated user takes part in
// (GET /notifications?participating=true), most recently updated first.
// With a non-zero since it asks for the threads updated at or after since,
// read ones included (all=true), so a mention read on the web before the
// next poll is not missed; with a zero since, only unread threads. It
// follows the Link pages (50 threads each) up to 10 pages.
//
// lastModified, when set, is sent as If-Modified-Since: when nothing
// changed GitHub answers notModified, which costs no rate limit budget.
// newLastModified is the answer's Last-Modified (else lastModified), to
// pass on the next call. Last-Modified has a one-second granularity, so
// overlap since with the previous poll and drop threads already seen.
// pollInterval is GitHub's X-Poll-Interval: poll no more often.
//
// GitHub API docs: https://docs.github.com/rest/activity/notifications#list-notifications-for-the-authenticated-user
func (h Hooks) Notifications(ctx context.Context, lastModified string, since time.Time) (threads []Notification, newLastModified string, pollInterval time.Duration, notModified bool, err error) {
	const what = "list the user's notifications"
	c, err := h.client()
	if err != nil {
		return nil, "", 0, false, wrapHook(what, err)
	}
	q := url.Values{"participating": {"true"}, "per_page": {strconv.Itoa(notificationsPerPage)}}
	if !since.IsZero() {
		q.Set("all", "true")
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	hdr := http.Header{}
	if lastModified != "" {
		hdr.Set("If-Modified-Since", lastModified)
	}
	next := c.url("/notifications", q)
	threads = []Notification{}
	for pages := 1; ; pages++ {
		a, err := h.exchange(ctx, c, http.MethodGet, next, hdr, nil)
		if err != nil {
			return nil, "", 0, false, h.poll(c, what, a, err)
		}
		if pages == 1 {
			pollInterval = DefaultPollInterval
			if s, perr := strconv.Atoi(strings.TrimSpace(a.header.Get("X-Poll-Interval"))); perr == nil && s > 0 {
				pollInterval = time.Duration(s) * time.Second
			}
			newLastModified = a.header.Get("Last-Modified")
			if newLastModified == "" {
				newLastModified = lastModified
			}
			if a.status == http.StatusNotModified {
				return nil, newLastModified, pollInterval, true, nil
			}
			hdr = nil
		}
		var raws []json.RawMessage
		if err := decodeAnswer(a, "list of notifications", &raws); err != nil {
			return nil, "", 0, false, wrapHook(what, err)
		}
		for _, raw := range raws {
			n, derr := decodeNotification(raw)
			if derr != nil {
				return nil, "", 0, false, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: a.status, Message: fmt.Sprintf("decode a notification: %v", derr)})
			}
			threads = append(threads, n)
		}
		link := nextLink(a.header.Get("Link"))
		if link == "" || len(raws) == 0 || pages >= maxNotificationPages {
			return threads, newLastModified, pollInterval, false, nil
		}
		u, ok := c.pageLink(link)
		if !ok {
			return nil, "", 0, false, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: a.status,
				Message: fmt.Sprintf("refusing GitHub's next page link: it is not on %s", c.base.Host)})
		}
		next = u
	}
}

func decodeNotification(raw json.RawMessage) (Notification, error) {
	var j struct {
		ID        string    `json:"id"`
		Reason    string    `json:"reason"`
		Unread    bool      `json:"unread"`
		UpdatedAt time.Time `json:"updated_at"`
		Subject   struct {
			Title            string  `json:"title"`
			URL              *string `json:"url"`
			LatestCommentURL *string `json:"latest_comment_url"`
			Type             string  `json:"type"`
		} `json:"subject"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return Notification{}, err
	}
	n := Notification{ID: j.ID, Reason: j.Reason, Unread: j.Unread, UpdatedAt: j.UpdatedAt, Repository: j.Repository.FullName, Raw: raw,
		Subject: NotificationSubject{Title: j.Subject.Title, Type: j.Subject.Type}}
	if j.Subject.URL != nil {
		n.Subject.URL = *j.Subject.URL
	}
	if j.Subject.LatestCommentURL != nil {
		n.Subject.LatestCommentURL = *j.Subject.LatestCommentURL
	}
	return n, nil
}

// poll maps a failed polling read onto the steps' *connectors.Error.
func (h Hooks) poll(c *client, what string, a *answer, err error) error {
	if a == nil {
		return wrapHook(what, err)
	}
	return wrapHook(what, c.statusError(http.MethodGet, a.path, a.status, a.header, a.body))
}
