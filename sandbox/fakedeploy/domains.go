package fakedeploy

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// hostName is a fully qualified host name of at least two labels.
var hostName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$`)

// redirectCodes are the redirect status codes Vercel allows.
var redirectCodes = []int{301, 302, 307, 308}

// apexOf is a host's registrable domain: its last two labels (the fake
// knows no public suffix list).
func apexOf(host string) string {
	labels := strings.Split(host, ".")
	if len(labels) <= 2 {
		return host
	}
	return strings.Join(labels[len(labels)-2:], ".")
}

// AddDomain stores d as a domain of its owner's account, filling ID,
// OwnerID, CreatorID, ServiceType and CreatedAt, and returns it.
func (s *Server) AddDomain(d Domain) Domain {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addDomain(d)
}

// addDomain is AddDomain; callers hold mu.
func (s *Server) addDomain(d Domain) *Domain {
	if d.ID == "" {
		d.ID = "dom_" + s.nextID()
	}
	if d.OwnerID == "" {
		d.OwnerID = DefaultUserID
	}
	if d.CreatorID == "" {
		d.CreatorID = DefaultUserID
	}
	if d.ServiceType == "" {
		d.ServiceType = "external"
	}
	d.CreatedAt = s.after(&s.lastDomain, d.CreatedAt)
	stored := d
	s.domains[d.Name] = &stored
	return &stored
}

// domainJSON is an account domain as GET /v5/domains answers it.
type domainJSON struct {
	ID                  string            `json:"id"`
	Name                string            `json:"name"`
	Verified            bool              `json:"verified"`
	CreatedAt           int64             `json:"createdAt"`
	BoughtAt            *int64            `json:"boughtAt"`
	ExpiresAt           *int64            `json:"expiresAt"`
	TransferredAt       *int64            `json:"transferredAt"`
	Creator             domainCreatorJSON `json:"creator"`
	Nameservers         []string          `json:"nameservers"`
	IntendedNameservers []string          `json:"intendedNameservers"`
	CustomNameservers   []string          `json:"customNameservers"`
	ServiceType         string            `json:"serviceType"`
	TeamID              *string           `json:"teamId"`
	UserID              string            `json:"userId"`
	EchMode             string            `json:"echMode"`
	Renew               bool              `json:"renew"`
	Zone                bool              `json:"zone"`
	Suffix              *bool             `json:"suffix,omitempty"`
}

type domainCreatorJSON struct {
	ID         string  `json:"id"`
	Username   string  `json:"username"`
	Email      string  `json:"email"`
	CustomerID *string `json:"customerId"`
}

func emailOf(userID string) string { return username(userID) + "@example.com" }

func (d *Domain) toJSON() domainJSON {
	out := domainJSON{
		ID: d.ID, Name: d.Name, Verified: d.Verified, CreatedAt: d.CreatedAt.UnixMilli(),
		Creator:             domainCreatorJSON{ID: d.CreatorID, Username: username(d.CreatorID), Email: emailOf(d.CreatorID)},
		Nameservers:         []string{},
		IntendedNameservers: []string{"ns1.vercel-dns.com", "ns2.vercel-dns.com"},
		CustomNameservers:   []string{},
		ServiceType:         d.ServiceType,
		UserID:              d.CreatorID,
		EchMode:             "auto",
		Zone:                d.ServiceType == "zeit.world",
	}
	if d.ServiceType == "zeit.world" {
		out.Nameservers = out.IntendedNameservers
	}
	if strings.HasPrefix(d.OwnerID, "team_") {
		t := d.OwnerID
		out.TeamID = &t
	}
	return out
}

// listDomains is GET /v5/domains: the owner's domains newest first, a
// page at a time (limit, default 20, at most 100; since, until).
func (s *Server) listDomains(w http.ResponseWriter, r *http.Request, sc scope) {
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
	var matched []*Domain
	for _, d := range s.domains {
		if d.OwnerID == sc.owner && win.inWindow(d.CreatedAt.UnixMilli()) {
			matched = append(matched, d)
		}
	}
	slices.SortFunc(matched, func(a, b *Domain) int { return b.CreatedAt.Compare(a.CreatedAt) })
	pg, pagination := page(matched, limit, func(d *Domain) int64 { return d.CreatedAt.UnixMilli() })
	items := make([]domainJSON, 0, len(pg))
	for _, d := range pg {
		items = append(items, d.toJSON())
	}
	writeJSON(w, http.StatusOK, map[string]any{"domains": items, "pagination": pagination})
}

// getDomain is GET /v5/domains/{domain}: {domain}.
func (s *Server) getDomain(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.domains[strings.ToLower(r.PathValue("domain"))]
	if !ok || d.OwnerID != sc.owner {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("Domain %q was not found", r.PathValue("domain")))
		return
	}
	out := d.toJSON()
	suffix := false
	out.Suffix = &suffix
	writeJSON(w, http.StatusOK, map[string]any{"domain": out})
}

// projectDomainJSON is a project's domain as Vercel answers it.
type projectDomainJSON struct {
	Name                string             `json:"name"`
	ApexName            string             `json:"apexName"`
	ProjectID           string             `json:"projectId"`
	Redirect            *string            `json:"redirect"`
	RedirectStatusCode  *int               `json:"redirectStatusCode"`
	GitBranch           *string            `json:"gitBranch"`
	CustomEnvironmentID *string            `json:"customEnvironmentId"`
	UpdatedAt           int64              `json:"updatedAt"`
	CreatedAt           int64              `json:"createdAt"`
	Verified            bool               `json:"verified"`
	Verification        []verificationJSON `json:"verification,omitempty"`
}

type verificationJSON struct {
	Type   string `json:"type"`
	Domain string `json:"domain"`
	Value  string `json:"value"`
	Reason string `json:"reason"`
}

func (d *ProjectDomain) toJSON(projectID string) projectDomainJSON {
	out := projectDomainJSON{
		Name: d.Name, ApexName: apexOf(d.Name), ProjectID: projectID,
		UpdatedAt: d.UpdatedAt.UnixMilli(), CreatedAt: d.CreatedAt.UnixMilli(), Verified: d.Verified,
	}
	if d.Redirect != "" {
		r, c := d.Redirect, d.RedirectStatusCode
		out.Redirect, out.RedirectStatusCode = &r, &c
	}
	if d.GitBranch != "" {
		b := d.GitBranch
		out.GitBranch = &b
	}
	if !d.Verified {
		apex := apexOf(d.Name)
		out.Verification = []verificationJSON{{
			Type:   "TXT",
			Domain: "_vercel." + apex,
			Value:  "vc-domain-verify=" + d.Name + "," + sha256Hex(projectID + d.Name)[:20],
			Reason: "pending_domain_verification",
		}}
	}
	return out
}

// domainOwner finds the project, of any owner, holding the domain name.
// Callers hold mu.
func (s *Server) domainOwner(name string) *Project {
	for _, p := range s.sortedProjects() {
		if slices.ContainsFunc(p.Domains, func(d ProjectDomain) bool { return d.Name == name }) {
			return p
		}
	}
	return nil
}

type projectDomainBody struct {
	Name                *string `json:"name"`
	GitBranch           *string `json:"gitBranch"`
	Redirect            *string `json:"redirect"`
	RedirectStatusCode  *int    `json:"redirectStatusCode"`
	CustomEnvironmentID *string `json:"customEnvironmentId"`
}

// addProjectDomain is POST /v10/projects/{idOrName}/domains: 200 with the
// domain, verified when its apex is a verified domain of the owner's
// account (else with the TXT record that verifies it; the apex is added
// to the account unverified); 409 when a project already has it.
func (s *Server) addProjectDomain(w http.ResponseWriter, r *http.Request, sc scope) {
	raw, _ := io.ReadAll(r.Body)
	var b projectDomainBody
	if !decodeStrict(w, raw, &b, []string{"name", "gitBranch", "redirect", "redirectStatusCode", "customEnvironmentId"}) {
		return
	}
	if b.Name == nil || *b.Name == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: missing required property `name`.")
		return
	}
	name := strings.ToLower(strings.TrimSuffix(*b.Name, "."))
	if !hostName.MatchString(name) {
		writeError(w, http.StatusBadRequest, "invalid_domain", fmt.Sprintf("The domain name %q is invalid.", *b.Name))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findProject(sc.owner, r.PathValue("idOrName"))
	if p == nil {
		writeError(w, http.StatusNotFound, "not_found", "Project not found")
		return
	}
	if other := s.domainOwner(name); other != nil {
		msg := fmt.Sprintf("The domain %s is already in use by another project.", name)
		if other.ID == p.ID {
			msg = fmt.Sprintf("Cannot add %s since it's already in use by your project.", name)
		}
		writeError(w, http.StatusConflict, "domain_already_in_use", msg)
		return
	}
	d := ProjectDomain{Name: name}
	if b.GitBranch != nil {
		d.GitBranch = *b.GitBranch
	}
	if b.Redirect != nil && *b.Redirect != "" {
		if !slices.ContainsFunc(p.Domains, func(o ProjectDomain) bool { return o.Name == *b.Redirect }) {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("The redirect target %s is not a domain of project %s.", *b.Redirect, p.Name))
			return
		}
		d.Redirect, d.RedirectStatusCode = *b.Redirect, 307
	}
	if b.RedirectStatusCode != nil {
		if !slices.Contains(redirectCodes, *b.RedirectStatusCode) {
			writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `redirectStatusCode` should be equal to one of the allowed values 301, 302, 307, 308.")
			return
		}
		if d.Redirect == "" {
			writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `redirectStatusCode` needs `redirect`.")
			return
		}
		d.RedirectStatusCode = *b.RedirectStatusCode
	}
	apex := apexOf(name)
	acct, ok := s.domains[apex]
	if !ok || acct.OwnerID != sc.owner {
		acct = s.addDomain(Domain{Name: apex, OwnerID: sc.owner, CreatorID: sc.userID})
	}
	d.Verified = acct.Verified
	d.CreatedAt = s.now()
	d.UpdatedAt = d.CreatedAt
	p.Domains = append(p.Domains, d)
	writeJSON(w, http.StatusOK, d.toJSON(p.ID))
}

// listProjectDomains is GET /v9/projects/{idOrName}/domains: newest
// first, filtered by production, gitBranch, redirects and verified.
func (s *Server) listProjectDomains(w http.ResponseWriter, r *http.Request, sc scope) {
	limit, ok := listLimit(w, r, 20, 100)
	if !ok {
		return
	}
	win, ok := timeWindow(w, r, "until")
	if !ok {
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findProject(sc.owner, r.PathValue("idOrName"))
	if p == nil {
		writeError(w, http.StatusNotFound, "not_found", "Project not found")
		return
	}
	var matched []ProjectDomain
	for _, d := range p.Domains {
		switch {
		case q.Get("production") == "true" && d.GitBranch != "":
		case q.Get("gitBranch") != "" && d.GitBranch != q.Get("gitBranch"):
		case q.Get("redirects") == "false" && d.Redirect != "":
		case q.Get("verified") == "true" && !d.Verified, q.Get("verified") == "false" && d.Verified:
		case !win.inWindow(d.CreatedAt.UnixMilli()):
		default:
			matched = append(matched, d)
		}
	}
	slices.SortStableFunc(matched, func(a, b ProjectDomain) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if q.Get("order") == "ASC" {
		slices.Reverse(matched)
	}
	pg, pagination := page(matched, limit, func(d ProjectDomain) int64 { return d.CreatedAt.UnixMilli() })
	items := make([]projectDomainJSON, 0, len(pg))
	for i := range pg {
		items = append(items, pg[i].toJSON(p.ID))
	}
	writeJSON(w, http.StatusOK, map[string]any{"domains": items, "pagination": pagination})
}

// projectDomain resolves the request's project and domain, answering 404
// itself. Callers hold mu.
func (s *Server) projectDomain(w http.ResponseWriter, r *http.Request, sc scope) (*Project, int) {
	p := s.findProject(sc.owner, r.PathValue("idOrName"))
	if p == nil {
		writeError(w, http.StatusNotFound, "not_found", "Project not found")
		return nil, -1
	}
	name := strings.ToLower(r.PathValue("domain"))
	i := slices.IndexFunc(p.Domains, func(d ProjectDomain) bool { return d.Name == name })
	if i < 0 {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("The domain %s is not assigned to project %s.", name, p.Name))
		return nil, -1
	}
	return p, i
}

// getProjectDomain is GET /v9/projects/{idOrName}/domains/{domain}.
func (s *Server) getProjectDomain(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, i := s.projectDomain(w, r, sc); p != nil {
		writeJSON(w, http.StatusOK, p.Domains[i].toJSON(p.ID))
	}
}

// removeProjectDomain is DELETE /v9/projects/{idOrName}/domains/{domain}:
// 200 {}; domains redirecting to it lose their redirect.
func (s *Server) removeProjectDomain(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, i := s.projectDomain(w, r, sc)
	if p == nil {
		return
	}
	name := p.Domains[i].Name
	p.Domains = slices.Delete(p.Domains, i, i+1)
	for j := range p.Domains {
		if p.Domains[j].Redirect == name {
			p.Domains[j].Redirect, p.Domains[j].RedirectStatusCode = "", 0
			p.Domains[j].UpdatedAt = s.now()
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// SetDomainVerified marks an account domain, and the project domains
// under it, verified or not.
func (s *Server) SetDomainVerified(name string, verified bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.domains[name]
	if !ok {
		return fmt.Errorf("fakedeploy: no domain %q", name)
	}
	d.Verified = verified
	now := s.now()
	for _, p := range s.projects {
		if p.OwnerID != d.OwnerID {
			continue
		}
		for i := range p.Domains {
			if apexOf(p.Domains[i].Name) == name {
				p.Domains[i].Verified, p.Domains[i].UpdatedAt = verified, now
			}
		}
	}
	return nil
}
