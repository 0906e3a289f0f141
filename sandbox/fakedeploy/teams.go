package fakedeploy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// teamRoles are the roles of Vercel's team members.
var teamRoles = []string{"OWNER", "MEMBER", "DEVELOPER", "SECURITY", "BILLING", "VIEWER", "VIEWER_FOR_PLUS", "CONTRIBUTOR"}

// AddTeam stores t, filling Slug and Name (from the id), CreatorID and
// CreatedAt (unique per fake, so the list's cursor is exact), and the creator as OWNER when not among Members, and returns
// it. Teams a token may act for (Options.Authenticate) that were never
// added exist all the same, with those defaults.
func (s *Server) AddTeam(t Team) Team {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneTeam(*s.addTeam(t))
}

// addTeam is AddTeam; callers hold mu.
func (s *Server) addTeam(t Team) *Team {
	if t.Slug == "" {
		t.Slug = strings.ToLower(strings.TrimPrefix(t.ID, "team_"))
	}
	if t.Name == "" {
		t.Name = t.Slug
	}
	if t.CreatorID == "" {
		t.CreatorID = DefaultUserID
	}
	t.CreatedAt = s.after(&s.lastTeam, t.CreatedAt)
	t.Members = slices.Clone(t.Members)
	if !slices.ContainsFunc(t.Members, func(m Member) bool { return m.UID == t.CreatorID }) {
		t.Members = append([]Member{{UID: t.CreatorID, Role: "OWNER", Confirmed: true, CreatedAt: t.CreatedAt}}, t.Members...)
	}
	for i := range t.Members {
		m := &t.Members[i]
		if m.Username == "" {
			m.Username = username(m.UID)
		}
		if m.Email == "" {
			m.Email = m.Username + "@example.com"
		}
		if m.Role == "" {
			m.Role = "MEMBER"
		}
		m.CreatedAt = s.after(&s.lastMember, m.CreatedAt)
	}
	stored := t
	s.teams[t.ID] = &stored
	return &stored
}

// team returns the team with this id, made with defaults when it was
// never added. Callers hold mu.
func (s *Server) team(id string) *Team {
	if t, ok := s.teams[id]; ok {
		return t
	}
	return s.addTeam(Team{ID: id})
}

// teamIDBySlug returns the id of the team with this slug, "" for none.
func (s *Server) teamIDBySlug(slug string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.teams {
		if t.Slug == slug {
			return t.ID
		}
	}
	return ""
}

func cloneTeam(t Team) Team {
	t.Members = slices.Clone(t.Members)
	return t
}

// teamJSON is a team as GET /v2/teams and /v2/teams/{teamId} answer it.
type teamJSON struct {
	ID            string          `json:"id"`
	Slug          string          `json:"slug"`
	Name          string          `json:"name"`
	Avatar        *string         `json:"avatar"`
	Description   *string         `json:"description"`
	CreatorID     string          `json:"creatorId"`
	CreatedAt     int64           `json:"createdAt"`
	UpdatedAt     int64           `json:"updatedAt"`
	StagingPrefix string          `json:"stagingPrefix"`
	Billing       *map[string]any `json:"billing"`
	Membership    *membershipJSON `json:"membership,omitempty"`
}

type membershipJSON struct {
	UID       string `json:"uid"`
	TeamID    string `json:"teamId"`
	Role      string `json:"role"`
	Confirmed bool   `json:"confirmed"`
	Created   int64  `json:"created"`
	CreatedAt int64  `json:"createdAt"`
}

// toJSON shapes t as seen by userID.
func (t *Team) toJSON(userID string) teamJSON {
	out := teamJSON{
		ID: t.ID, Slug: t.Slug, Name: t.Name, CreatorID: t.CreatorID,
		CreatedAt: t.CreatedAt.UnixMilli(), UpdatedAt: t.CreatedAt.UnixMilli(),
		StagingPrefix: t.Slug + "-" + sha256Hex(t.ID)[:6],
	}
	if i := slices.IndexFunc(t.Members, func(m Member) bool { return m.UID == userID }); i >= 0 {
		m := t.Members[i]
		out.Membership = &membershipJSON{UID: m.UID, TeamID: t.ID, Role: m.Role, Confirmed: true,
			Created: m.CreatedAt.UnixMilli(), CreatedAt: m.CreatedAt.UnixMilli()}
	}
	return out
}

// memberOf returns the user's team, adding the user as a MEMBER when the
// token may act for it but the team's member list lacks them. Callers
// hold mu.
func (s *Server) memberOf(sc scope, teamID string) *Team {
	t := s.team(teamID)
	if !slices.ContainsFunc(t.Members, func(m Member) bool { return m.UID == sc.userID }) {
		u := username(sc.userID)
		t.Members = append(t.Members, Member{UID: sc.userID, Username: u, Email: u + "@example.com", Role: "MEMBER",
			Confirmed: true, CreatedAt: s.after(&s.lastMember, s.now())})
	}
	return t
}

// listTeams is GET /v2/teams: the teams the token may act for, newest
// first, with the caller's membership (limit, since, until).
func (s *Server) listTeams(w http.ResponseWriter, r *http.Request, sc scope) {
	limit, ok := listLimit(w, r, 20, 100)
	if !ok {
		return
	}
	win, ok := timeWindow(w, r, "until")
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*Team
	for _, id := range sc.teams {
		t := s.memberOf(sc, id)
		if win.inWindow(t.CreatedAt.UnixMilli()) {
			matched = append(matched, t)
		}
	}
	slices.SortFunc(matched, func(a, b *Team) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	pg, pagination := page(matched, limit, func(t *Team) int64 { return t.CreatedAt.UnixMilli() })
	items := make([]teamJSON, 0, len(pg))
	for _, t := range pg {
		items = append(items, t.toJSON(sc.userID))
	}
	writeJSON(w, http.StatusOK, map[string]any{"teams": items, "pagination": pagination})
}

// teamFor resolves the path's team for the caller: 403 for a team the
// token may not act for that exists, 404 for one that does not. Callers
// hold mu.
func (s *Server) teamFor(w http.ResponseWriter, r *http.Request, sc scope) *Team {
	id := r.PathValue("teamId")
	if !slices.Contains(sc.teams, id) {
		if _, ok := s.teams[id]; ok {
			writeError(w, http.StatusForbidden, "forbidden", "You don't have permission to access this team.")
		} else {
			writeError(w, http.StatusNotFound, "not_found", "Team was not found.")
		}
		return nil
	}
	return s.memberOf(sc, id)
}

// getTeam is GET /v2/teams/{teamId}.
func (s *Server) getTeam(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.teamFor(w, r, sc); t != nil {
		writeJSON(w, http.StatusOK, t.toJSON(sc.userID))
	}
}

type memberJSON struct {
	UID       string  `json:"uid"`
	Username  string  `json:"username"`
	Email     string  `json:"email"`
	Name      *string `json:"name,omitempty"`
	Avatar    *string `json:"avatar,omitempty"`
	Role      string  `json:"role"`
	Confirmed bool    `json:"confirmed"`
	CreatedAt int64   `json:"createdAt"`
}

// listMembers is GET /v2 and /v3/teams/{teamId}/members: newest first,
// filtered by role and search (username, email or name), a page at a
// time (limit, at most 100; since, until) with pagination.hasNext.
func (s *Server) listMembers(w http.ResponseWriter, r *http.Request, sc scope) {
	limit, ok := listLimit(w, r, 20, 100)
	if !ok {
		return
	}
	win, ok := timeWindow(w, r, "until")
	if !ok {
		return
	}
	q := r.URL.Query()
	role := q.Get("role")
	if role != "" && !slices.Contains(teamRoles, role) {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("Invalid request: `role` should be equal to one of the allowed values %s.", strings.Join(teamRoles, ", ")))
		return
	}
	search := strings.ToLower(q.Get("search"))
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.teamFor(w, r, sc)
	if t == nil {
		return
	}
	var matched []Member
	for _, m := range t.Members {
		hay := strings.ToLower(m.Username + " " + m.Email + " " + m.Name)
		switch {
		case role != "" && m.Role != role:
		case search != "" && !strings.Contains(hay, search):
		case !win.inWindow(m.CreatedAt.UnixMilli()):
		default:
			matched = append(matched, m)
		}
	}
	slices.SortFunc(matched, func(a, b Member) int { return b.CreatedAt.Compare(a.CreatedAt) })
	pg, pagination := page(matched, limit, func(m Member) int64 { return m.CreatedAt.UnixMilli() })
	items := make([]memberJSON, 0, len(pg))
	for _, m := range pg {
		j := memberJSON{UID: m.UID, Username: m.Username, Email: m.Email, Role: m.Role, Confirmed: m.Confirmed, CreatedAt: m.CreatedAt.UnixMilli()}
		if m.Name != "" {
			n := m.Name
			j.Name = &n
		}
		items = append(items, j)
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": items, "pagination": map[string]any{
		"hasNext": pagination.Next != nil, "count": pagination.Count, "next": pagination.Next, "prev": pagination.Prev,
	}})
}
