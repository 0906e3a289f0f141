package fakecodehost

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PollInterval is the X-Poll-Interval of GET /notifications: how many
// seconds GitHub asks pollers to wait between polls.
const PollInterval = 60

// notification is one notification thread of one user.
type notification struct {
	id       int64
	login    string
	repo     *repo
	reason   string
	unread   bool
	updated  time.Time
	lastRead time.Time
	title    string
	typ      string
	// subject and comment are the subject's and its latest comment's API
	// URLs: a path below the API root, or an absolute URL.
	subject, comment string
}

// participating are the reasons of threads the user takes part in, which
// participating=true keeps.
var participating = map[string]bool{
	"assign": true, "author": true, "comment": true, "manual": true, "mention": true,
	"review_requested": true, "state_change": true, "team_mention": true,
}

// notifyLocked creates or refreshes login's thread about subject.
func (st *state) notifyLocked(login string, r *repo, reason, typ, title, subject, comment string, now time.Time) {
	var n *notification
	for _, o := range st.notifications {
		if o.login == login && o.subject == subject {
			n = o
		}
	}
	if n == nil {
		n = &notification{id: st.id(), login: login, repo: r, subject: subject}
		st.notifications = append(st.notifications, n)
	}
	n.reason, n.typ, n.title, n.comment, n.unread, n.updated = reason, typ, title, comment, true, now
	st.touchLocked(login, now)
}

func (st *state) touchLocked(login string, at time.Time) {
	k := strings.ToLower(login)
	if at.After(st.notified[k]) {
		st.notified[k] = at
	}
}

// lastNotified is when login's threads last changed (the seed time when
// they never did).
func (st *state) lastNotified(login string) time.Time {
	t := seedEpoch
	if n := st.notified[strings.ToLower(login)]; n.After(t) {
		t = n
	}
	return t
}

// mentionRE finds @login mentions; a team (@org/team) is skipped by the
// caller, and an e-mail address does not match.
var mentionRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_@./-])@([A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38})`)

// mentioned returns the existing users body mentions, each once.
func (st *state) mentioned(body string) []string {
	var out []string
	for _, m := range mentionRE.FindAllStringSubmatchIndex(body, -1) {
		if m[3] < len(body) && body[m[3]] == '/' {
			continue
		}
		u := st.users[strings.ToLower(body[m[2]:m[3]])]
		if u != nil && !u.org && !slices.Contains(out, u.login) {
			out = append(out, u.login)
		}
	}
	return out
}

// mentions notifies the users body (of is, or of a comment on it at
// commentURL) mentions: users who can see the repository, the author
// excepted, get a thread with reason mention.
func (c *call) mentions(r *repo, is *issue, body, commentURL string) {
	typ, subject := "Issue", fmt.Sprintf("/repos/%s/%s/issues/%d", r.owner, r.name, is.number)
	if is.pr != nil {
		typ, subject = "PullRequest", fmt.Sprintf("/repos/%s/%s/pulls/%d", r.owner, r.name, is.number)
	}
	if commentURL == "" {
		commentURL = subject
	}
	for _, login := range c.s.st.mentioned(body) {
		if strings.EqualFold(login, c.login) || !c.s.st.visible(r, login) {
			continue
		}
		c.s.st.notifyLocked(login, r, "mention", typ, is.title, subject, commentURL, c.now)
	}
}

func (c *call) abs(u string) any {
	switch {
	case u == "":
		return nil
	case strings.HasPrefix(u, "/"):
		return c.base + u
	}
	return u
}

// minimalRepoJSON is the short repository object of notifications.
// minimalRepoJSON is GitHub's minimal-repository, the shape a
// notification thread carries: identity, owner and the related URLs.
func (c *call) minimalRepoJSON(r *repo) M {
	m := M{
		"id": r.id, "node_id": nodeID("Repository", r.id), "name": r.name, "full_name": r.owner + "/" + r.name,
		"owner": c.user(r.owner), "private": r.private, "html_url": repoHTML(r), "description": nullable(r.description),
		"fork": false, "url": c.repoURL(r),
	}
	maps.Copy(m, c.repoURLs(r))
	return m
}

func (c *call) notificationJSON(n *notification) M {
	id := strconv.FormatInt(n.id, 10)
	u := c.base + "/notifications/threads/" + id
	return M{
		"id": id, "unread": n.unread, "reason": n.reason, "updated_at": ts(n.updated), "last_read_at": ts(n.lastRead),
		"subject":    M{"title": n.title, "url": c.abs(n.subject), "latest_comment_url": c.abs(n.comment), "type": n.typ},
		"repository": c.minimalRepoJSON(n.repo), "url": u, "subscription_url": u + "/subscription",
	}
}

// listNotifications serves GET /notifications: the caller's unread threads
// (all=true: read ones too), only those the caller takes part in with
// participating=true, updated at or after since and before before, most
// recently updated first, 50 a page. Last-Modified is when the caller's
// threads last changed (to the second); an If-Modified-Since not older
// answers 304.
func (c *call) listNotifications() *reply {
	q := c.r.URL.Query()
	last := c.s.st.lastNotified(c.login).UTC().Truncate(time.Second)
	headers := func(rep *reply) *reply {
		return rep.set("Last-Modified", last.Format(http.TimeFormat)).set("X-Poll-Interval", strconv.Itoa(PollInterval))
	}
	if ims, err := http.ParseTime(c.r.Header.Get("If-Modified-Since")); err == nil && !last.After(ims) {
		return headers(&reply{status: http.StatusNotModified})
	}
	since, hasSince := parseTime(q.Get("since"))
	before, hasBefore := parseTime(q.Get("before"))
	var sel []*notification
	for _, n := range c.s.st.notifications {
		switch {
		case n.login != c.login, !n.unread && q.Get("all") != "true",
			q.Get("participating") == "true" && !participating[n.reason],
			hasSince && n.updated.Before(since), hasBefore && !n.updated.Before(before),
			!c.s.st.visible(n.repo, c.login):
			continue
		}
		sel = append(sel, n)
	}
	slices.SortStableFunc(sel, func(a, b *notification) int {
		if c := b.updated.Compare(a.updated); c != 0 {
			return c
		}
		return cmpInt(b.id, a.id)
	})
	items := make([]any, len(sel))
	for i, n := range sel {
		items[i] = c.notificationJSON(n)
	}
	return headers(c.pageOf(items, "", 50, 50))
}

// listOwnGists serves GET /gists: the caller's gists, public and secret,
// updated at or after since, most recently updated first.
func (c *call) listOwnGists() *reply {
	since, hasSince := parseTime(c.query("since"))
	var sel []*gist
	for i := len(c.s.st.gists) - 1; i >= 0; i-- {
		if g := c.s.st.gists[i]; g.owner == c.login && (!hasSince || !g.updated.Before(since)) {
			sel = append(sel, g)
		}
	}
	slices.SortStableFunc(sel, func(a, b *gist) int { return b.updated.Compare(a.updated) })
	items := make([]any, len(sel))
	for i, g := range sel {
		items[i] = c.gistJSON(g, false)
	}
	return c.page(items, "")
}

// Notification is a notification thread of the fake, as AddNotification
// takes it and Notifications returns it.
type Notification struct {
	// ID is the thread id; the fake sets it.
	ID string
	// Login is the user notified; Owner and Repo the repository the thread
	// is about.
	Login       string
	Owner, Repo string
	// Reason is why (mention, author, comment, subscribed, ...; default
	// subscribed).
	Reason string
	// Read marks a thread the user has read; new threads are unread.
	Read bool
	// UpdatedAt defaults to the fake's now; LastReadAt may be zero.
	UpdatedAt, LastReadAt time.Time
	// Title and Type (Issue, PullRequest, Commit, Release, ...; default
	// Issue) describe the subject.
	Title, Type string
	// SubjectURL and LatestCommentURL are API URLs: absolute, or a path
	// below the API root such as /repos/octocat/hello-world/issues/1.
	SubjectURL, LatestCommentURL string
}

// AddNotification adds a thread for n.Login about n.Owner/n.Repo, as if
// GitHub had notified the user, and returns its id. Last-Modified of the
// user's GET /notifications moves to the fake's now (or n.UpdatedAt, when
// later).
func (s *Server) AddNotification(n Notification) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.st.users[strings.ToLower(n.Login)]
	if u == nil || u.org {
		return "", fmt.Errorf("fakecodehost: no user %q", n.Login)
	}
	r := s.st.repos[repoKey(n.Owner, n.Repo)]
	if r == nil {
		return "", fmt.Errorf("fakecodehost: no repository %s/%s", n.Owner, n.Repo)
	}
	now := s.o.Now()
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = now
	}
	if n.Reason == "" {
		n.Reason = "subscribed"
	}
	if n.Type == "" {
		n.Type = "Issue"
	}
	th := &notification{id: s.st.id(), login: u.login, repo: r, reason: n.Reason, unread: !n.Read,
		updated: n.UpdatedAt, lastRead: n.LastReadAt, title: n.Title, typ: n.Type, subject: n.SubjectURL, comment: n.LatestCommentURL}
	s.st.notifications = append(s.st.notifications, th)
	s.st.touchLocked(u.login, now)
	s.st.touchLocked(u.login, n.UpdatedAt)
	return strconv.FormatInt(th.id, 10), nil
}

// Notifications returns copies of login's threads, oldest first.
func (s *Server) Notifications(login string) []Notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Notification
	for _, n := range s.st.notifications {
		if !strings.EqualFold(n.login, login) {
			continue
		}
		out = append(out, Notification{ID: strconv.FormatInt(n.id, 10), Login: n.login, Owner: n.repo.owner, Repo: n.repo.name,
			Reason: n.reason, Read: !n.unread, UpdatedAt: n.updated, LastReadAt: n.lastRead, Title: n.title, Type: n.typ,
			SubjectURL: n.subject, LatestCommentURL: n.comment})
	}
	return out
}
