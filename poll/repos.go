package poll

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/triggers"
)

// repoCursor is what the poller keeps about an account's own
// repositories.
type repoCursor struct {
	// ETag is the last fully processed answer's, sent as If-None-Match.
	ETag string `json:"etag,omitempty"`
	highWater[int64]
}

// pollRepos emits a new_repository event per repository the account owns
// created at or after from (the earliest polled new_repository trigger's
// creation) and not emitted before, and returns what it emitted.
//
// It reads the newest 100 repositories the account owns with the ETag of
// the last answer it fully processed: nothing new answers 304, which
// costs no budget. A repository is missed only if more than 100 were
// created between two polls.
func (p *Poller) pollRepos(ctx context.Context, a account, from time.Time) (counts, error) {
	key := cursorKey(a.tenant, a.id, triggers.NewRepository)
	var cur repoCursor
	stored, err := p.loadCursor(ctx, key, &cur)
	if err != nil {
		return counts{}, err
	}
	repos, etag, notModified, err := a.api.OwnRepositories(ctx, cur.ETag)
	if err != nil {
		return counts{}, err
	}
	next := cur
	var failed error
	var n counts
	if !notModified {
		slices.SortFunc(repos, func(x, y codehost.AccountRepo) int {
			return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), cmp.Compare(x.ID, y.ID))
		})
		for _, r := range repos {
			// affiliation=owner lists the user's own repositories; an
			// organisation's reach its triggers through its hook.
			if r.CreatedAt.Before(from) || next.seen(r.CreatedAt, r.ID) || r.OwnerIsOrg {
				continue
			}
			dup, err := p.emit(ctx, a, repoItem(r))
			if err != nil {
				failed = err
				break
			}
			next.advance(r.CreatedAt, r.ID)
			n.add(dup)
		}
	}
	// An answer processed only in part must be read again: keep the old
	// ETag.
	if failed == nil {
		next.ETag = etag
	}
	if err := p.saveCursor(ctx, stored, next); err != nil {
		return n, err
	}
	return n, failed
}

// repoItem is the new_repository event of r. Its payload has the shape of
// GitHub's repository webhook (action and repository), so that filters
// and agents read a polled event as they read one from an organisation
// hook.
func repoItem(r codehost.AccountRepo) item {
	owner, name, _ := strings.Cut(r.FullName, "/")
	raw, _ := json.Marshal(struct {
		Action     string          `json:"action"`
		Repository json.RawMessage `json:"repository"`
	}{"created", r.Raw})
	id := strconv.FormatInt(r.ID, 10)
	return item{
		kind:       triggers.NewRepository,
		deliveryID: "repository-" + id,
		source:     SourceRepositories,
		action:     "created",
		sender:     r.Owner,
		repo:       &triggers.Repository{Owner: owner, Name: name, FullName: r.FullName},
		resource:   triggers.Resource{Type: "repository", ID: id, Title: r.FullName, URL: r.HTMLURL, Author: r.Owner},
		raw:        raw,
		marker:     "repositories",
	}
}
