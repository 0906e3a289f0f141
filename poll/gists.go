package poll

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/triggers"
)

// gistsAdvanceAt is the size of a GET /gists answer past which the poller
// asks for fewer gists (a later since) next time.
const gistsAdvanceAt = 50

// gistCursor is what the poller keeps about an account's gists.
type gistCursor struct {
	// ETag is the last fully processed answer's, sent as If-None-Match;
	// Since is the since that answer was asked with, kept so that the ETag
	// still describes the same question.
	ETag  string    `json:"etag,omitempty"`
	Since time.Time `json:"since,omitzero"`
	highWater[string]
}

// pollGists emits a new_gist event per gist of the account created at or
// after from (the earliest trigger's creation) and not emitted before, and
// returns what it emitted.
//
// It asks for the gists updated at or after a since no later than the
// high-water mark (a gist created then was updated then too), with the
// ETag of the last answer it fully processed: nothing new answers 304,
// which costs no budget. The since stays the same from poll to poll, so
// that the ETag stays comparable; it moves up to the high-water mark only
// when an answer grows past gistsAdvanceAt gists (the next poll then
// costs one request). GET /gists reads one page of 100, most recently
// updated first: a gist is missed only if more than 100 others were
// updated after it between two polls.
func (p *Poller) pollGists(ctx context.Context, a account, from time.Time) (counts, error) {
	key := cursorKey(a.tenant, a.id, triggers.NewGist)
	var cur gistCursor
	stored, err := p.loadCursor(ctx, key, &cur)
	if err != nil {
		return counts{}, err
	}
	since := later(cur.Since, from)
	gists, etag, notModified, err := a.api.ListGists(ctx, since, cur.ETag)
	if err != nil {
		return counts{}, err
	}
	next := cur
	var failed error
	var n counts
	if !notModified {
		slices.SortFunc(gists, func(x, y codehost.PolledGist) int {
			return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), cmp.Compare(x.ID, y.ID))
		})
		for _, g := range gists {
			if g.CreatedAt.Before(from) || next.seen(g.CreatedAt, g.ID) {
				continue
			}
			dup, err := p.emit(ctx, a, gistItem(g))
			if err != nil {
				failed = err
				break
			}
			next.advance(g.CreatedAt, g.ID)
			n.add(dup)
		}
	}
	// An answer processed only in part must be read again: keep the old
	// ETag.
	if failed == nil {
		next.ETag, next.Since = etag, since
		if len(gists) > gistsAdvanceAt {
			next.Since = later(since, next.High)
		}
	}
	if err := p.saveCursor(ctx, stored, next); err != nil {
		return n, err
	}
	return n, failed
}

// gistItem is the new_gist event of g.
func gistItem(g codehost.PolledGist) item {
	return item{
		kind:       triggers.NewGist,
		deliveryID: "gist-" + g.ID,
		source:     SourceGists,
		action:     "created",
		sender:     g.Owner,
		resource:   triggers.Resource{Type: "gist", ID: g.ID, Title: g.Description, URL: g.HTMLURL, Author: g.Owner},
		raw:        g.Raw,
		marker:     "gists",
	}
}
