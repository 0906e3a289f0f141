package fakecodehost

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Seeded identifiers, for tests and sandbox users.
const (
	// SeedOwner and SeedRepo name the seeded repository octocat/hello-world.
	SeedOwner = "octocat"
	SeedRepo  = "hello-world"
	// SeedRepoID is its numeric id.
	SeedRepoID = 1296269
	// SeedRenamedRepo is a former name of octocat/hello-world: requests to
	// it answer 301 to /repositories/{SeedRepoID}/...
	SeedRenamedRepo = "hello-world-old"
	// SeedOrg is an organisation octocat is an admin (owner) of.
	SeedOrg = "octo-org"
	// SeedOtherRepo is monalisa/octo-app: public, octocat has no rights.
	SeedOtherOwner = "monalisa"
	SeedOtherRepo  = "octo-app"
	// SeedPrivateRepo is monalisa/secret: private, invisible to octocat.
	SeedPrivateRepo = "secret"
	// SeedWorkflowID is the CI workflow (.github/workflows/ci.yml), which
	// accepts workflow_dispatch; SeedDeployWorkflowID (deploy.yml) does
	// not.
	SeedWorkflowID       = 161335
	SeedDeployWorkflowID = 161336
	// SeedRunID is a completed, successful CI run.
	SeedRunID = 30433642
	// SeedPullNumber is the open pull request feature → main.
	SeedPullNumber = 4
	// SeedGistID is octocat's public gist.
	SeedGistID = "aa5a315d61ae9438b18d"
	// Projects (v2): the board, its Status field, its options and an item.
	SeedProjectID   = "PVT_kwDOA1"
	SeedFieldID     = "PVTSSF_status"
	SeedOptionTodo  = "f75ad846"
	SeedOptionDoing = "47fc9ee4"
	SeedOptionDone  = "98236657"
	SeedItemID      = "PVTI_lADOA1"
	// SeedPriorityFieldID is a second single-select field of the seeded
	// project, named Priority.
	SeedPriorityFieldID = "PVTSSF_priority"
	// SeedTitleFieldID is the seeded project's Title field (no options).
	SeedTitleFieldID = "PVTF_title"
)

// Organisation roles, as GitHub's membership API names them: an admin is
// an owner of the organisation.
const (
	OrgAdmin  = "admin"
	OrgMember = "member"
)

type user struct {
	id          int64
	login, name string
	email       string
	org         bool
	// roles are an organisation's members: login → OrgAdmin or OrgMember.
	roles map[string]string
	// hooks are an organisation's webhooks.
	hooks []*hook
}

type commit struct {
	sha, message string
	parents      []string
	author       string
	date         time.Time
	tree         map[string][]byte
	changes      []change
}

type change struct {
	filename, status     string
	additions, deletions int
}

type comment struct {
	id       int64
	user     string
	body     string
	created  time.Time
	modified time.Time
}

type review struct {
	id        int64
	user      string
	state     string
	body      string
	submitted time.Time
	commitID  string
}

type pull struct {
	head, base          string
	headSHA, baseSHA    string
	draft               bool
	merged              bool
	mergeable           bool
	mergedAt            time.Time
	mergedBy            string
	mergeSHA            string
	maintainerCanModify bool
	requested           []string
	reviews             []review
}

type issue struct {
	id          int64
	number      int
	title, body string
	user        string
	state       string
	stateReason string
	labels      []string
	assignees   []string
	milestone   int
	comments    []comment
	created     time.Time
	updated     time.Time
	closed      time.Time
	pr          *pull
}

type workflow struct {
	id           int64
	name, path   string
	state        string
	dispatchable bool
	created      time.Time
	updated      time.Time
}

type run struct {
	id         int64
	workflowID int64
	number     int
	branch     string
	sha        string
	event      string
	actor      string
	created    time.Time
	// done fixes a seeded run's outcome; a dispatched run moves from
	// queued to in_progress to completed/success on the fake clock.
	done       bool
	conclusion string
}

// Run states on the fake clock, after dispatch.
const (
	runQueuedFor     = 10 * time.Second
	runInProgressFor = 30 * time.Second
)

func (r *run) status(now time.Time) (status, conclusion string) {
	if r.done {
		return "completed", r.conclusion
	}
	switch age := now.Sub(r.created); {
	case age < runQueuedFor:
		return "queued", ""
	case age < runQueuedFor+runInProgressFor:
		return "in_progress", ""
	}
	return "completed", "success"
}

type release struct {
	id         int64
	tag, name  string
	body       string
	target     string
	draft      bool
	prerelease bool
	author     string
	created    time.Time
	published  time.Time
}

type invitation struct {
	id         int64
	invitee    string
	inviter    string
	permission string
	created    time.Time
}

type milestone struct {
	number int
	title  string
	state  string
}

type repo struct {
	id            int64
	owner, name   string
	description   string
	homepage      string
	private       bool
	visibility    string
	defaultBranch string
	isTemplate    bool
	hasIssues     bool
	hasProjects   bool
	hasWiki       bool
	created       time.Time
	updated       time.Time
	pushed        time.Time
	branches      map[string]string // name → head commit sha
	protected     map[string]bool
	commits       map[string]*commit
	issues        []*issue // by number-1
	milestones    []milestone
	collaborators map[string]string // login → pull, triage, push, maintain or admin
	invitations   []*invitation
	workflows     []*workflow
	runs          []*run
	releases      []*release
	stargazers    map[string]bool
	hooks         []*hook
}

type gist struct {
	id          string
	owner       string
	description string
	public      bool
	files       map[string]string
	created     time.Time
	updated     time.Time
}

type projectField struct {
	name     string
	dataType string            // GraphQL's ProjectV2FieldType
	options  map[string]string // id → name
}

type project struct {
	id     string
	owner  string
	fields map[string]*projectField
	items  map[string]map[string]string // item id → field id → option id
}

type state struct {
	users    map[string]*user // by lower-case login
	repos    map[string]*repo // by lower-case "owner/name"
	renamed  map[string]string
	gists    []*gist
	projects map[string]*project
	nextID   int64
	seq      int
	// notifications are every user's notification threads; notified is
	// when each user's (lower-case login) threads last changed.
	notifications []*notification
	notified      map[string]time.Time
}

func (st *state) id() int64 {
	st.nextID++
	return st.nextID
}

func repoKey(owner, name string) string { return strings.ToLower(owner + "/" + name) }

func (st *state) repoByID(id int64) *repo {
	for _, r := range st.repos {
		if r.id == id {
			return r
		}
	}
	return nil
}

// orgBasePermission is what an organisation's members may do on its
// repositories (GitHub's default base permission, read).
const orgBasePermission = "pull"

// orgOf is the organisation that owns r, or nil when a user does.
func (st *state) orgOf(r *repo) *user {
	if o := st.users[strings.ToLower(r.owner)]; o != nil && o.org {
		return o
	}
	return nil
}

// role is login's permission on r: admin for the owner or an admin of the
// owning organisation, else the better of the collaborator permission and
// the organisation's base permission for its members, or "" for none.
func (st *state) role(r *repo, login string) string {
	if strings.EqualFold(r.owner, login) {
		return "admin"
	}
	best := r.collaborators[login]
	if o := st.orgOf(r); o != nil {
		switch o.roles[login] {
		case OrgAdmin:
			return "admin"
		case OrgMember:
			if roleRank[orgBasePermission] > roleRank[best] {
				best = orgBasePermission
			}
		}
	}
	return best
}

var roleRank = map[string]int{"": 0, "pull": 1, "triage": 2, "push": 3, "maintain": 4, "admin": 5}

func (st *state) can(r *repo, login, want string) bool {
	return roleRank[st.role(r, login)] >= roleRank[want]
}

func (st *state) visible(r *repo, login string) bool {
	return !r.private || st.role(r, login) != ""
}

// blobSHA is git's blob id: sha1("blob <len>\0" + data).
func blobSHA(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

func (st *state) commitSHA(parts ...string) string {
	st.seq++
	h := sha1.Sum([]byte(fmt.Sprintf("commit %d %s", st.seq, strings.Join(parts, "\x00"))))
	return hex.EncodeToString(h[:])
}

// commitOn adds a commit to branch of r whose tree is edit applied to the
// branch head's tree, and returns it.
func (st *state) commitOn(r *repo, branch, author, message string, at time.Time, edit func(tree map[string][]byte) []change) *commit {
	tree := map[string][]byte{}
	var parents []string
	if head, ok := r.branches[branch]; ok {
		maps.Copy(tree, r.commits[head].tree)
		parents = []string{head}
	}
	ch := edit(tree)
	c := &commit{
		sha: st.commitSHA(r.owner, r.name, branch, message, strings.Join(parents, ",")), message: message,
		parents: parents, author: author, date: at, tree: tree, changes: ch,
	}
	r.commits[c.sha] = c
	r.branches[branch] = c.sha
	r.pushed, r.updated = at, at
	return c
}

func writeFile(path string, data []byte) func(map[string][]byte) []change {
	return func(tree map[string][]byte) []change {
		old, existed := tree[path]
		tree[path] = data
		status := "added"
		if existed {
			status = "modified"
		}
		return []change{{filename: path, status: status, additions: lines(data), deletions: lines(old)}}
	}
}

func lines(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	n := strings.Count(string(b), "\n")
	if b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func newRepo(id int64, owner, name string, at time.Time) *repo {
	return &repo{
		id: id, owner: owner, name: name, visibility: "public", defaultBranch: "main",
		hasIssues: true, hasProjects: true, hasWiki: true,
		created: at, updated: at, pushed: at,
		branches: map[string]string{}, protected: map[string]bool{}, commits: map[string]*commit{},
		collaborators: map[string]string{}, stargazers: map[string]bool{},
	}
}

// seedEpoch is the time of the seeded state.
var seedEpoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// seed builds the initial state; seeded timestamps are fixed so that the
// seeded answers (and their ETags) do not depend on the clock.
func seed() *state {
	t0 := seedEpoch
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	st := &state{
		users: map[string]*user{}, repos: map[string]*repo{}, renamed: map[string]string{},
		projects: map[string]*project{}, nextID: 5000000, notified: map[string]time.Time{},
	}
	for _, u := range []*user{
		{id: 1, login: "octocat", name: "The Octocat", email: "octocat@github.com"},
		{id: 2, login: "hubot", name: "Hubot", email: "hubot@github.com"},
		{id: 3, login: "monalisa", name: "Mona Lisa Octocat", email: "mona@github.com"},
		{id: 4, login: SeedOrg, name: "Octo Org", org: true, roles: map[string]string{"octocat": OrgAdmin}},
	} {
		st.users[u.login] = u
	}

	r := newRepo(SeedRepoID, SeedOwner, SeedRepo, at(0))
	r.description = "My first repository on GitHub!"
	r.homepage = "https://github.com"
	r.collaborators["hubot"] = "push"
	r.milestones = []milestone{{number: 1, title: "v1.0", state: "open"}}
	st.commitOn(r, "main", "octocat", "Initial commit", at(0), func(t map[string][]byte) []change {
		t["README.md"] = []byte("# Hello World\n\nHello, world!\n")
		t["docs/guide.md"] = []byte("# Guide\n\nRead me first.\n")
		t["docs/img/logo.svg"] = []byte("<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n")
		t["src/main.go"] = []byte("package main\n\nfunc main() { println(\"hello\") }\n")
		t[".github/workflows/ci.yml"] = []byte("on: [push, workflow_dispatch]\n")
		t[".github/workflows/deploy.yml"] = []byte("on: [push]\n")
		return []change{{filename: "README.md", status: "added", additions: 3}}
	})
	st.commitOn(r, "main", "octocat", "Add the changelog", at(1), writeFile("CHANGELOG.md", []byte("## v1.0.0\n\n- First release.\n")))
	main := r.branches["main"]
	r.protected["main"] = true
	r.branches["feature"] = main
	st.commitOn(r, "feature", "hubot", "Say hello louder", at(2),
		writeFile("src/main.go", []byte("package main\n\nfunc main() { println(\"HELLO\") }\n")))
	st.repos[repoKey(r.owner, r.name)] = r
	st.renamed[repoKey(SeedOwner, SeedRenamedRepo)] = repoKey(r.owner, r.name)

	r.issues = []*issue{
		{id: 1001, number: 1, title: "Found a bug", body: "I'm having a problem with this.", user: "octocat", state: "open",
			labels: []string{"bug"}, assignees: []string{"octocat"}, milestone: 1, created: at(3), updated: at(3)},
		{id: 1002, number: 2, title: "Add dark mode", body: "Please add a dark theme.", user: "hubot", state: "open",
			labels: []string{"enhancement"}, created: at(4), updated: at(4)},
		{id: 1003, number: 3, title: "Typo in README", body: "Hello is misspelt.", user: "monalisa", state: "closed", stateReason: "completed",
			labels: []string{"documentation"}, assignees: []string{"hubot"}, created: at(5), updated: at(6), closed: at(6)},
		{id: 1004, number: SeedPullNumber, title: "Say hello louder", body: "Makes the greeting louder.", user: "hubot", state: "open",
			labels: []string{"enhancement"}, assignees: []string{"hubot"}, created: at(7), updated: at(8),
			pr: &pull{head: "feature", base: "main", headSHA: r.branches["feature"], baseSHA: main, mergeable: true,
				requested: []string{"octocat"},
				reviews: []review{
					{id: 80, user: "monalisa", state: "COMMENTED", body: "Nice.", submitted: at(8), commitID: r.branches["feature"]},
					{id: 81, user: "octocat", state: "CHANGES_REQUESTED", body: "Too loud.", submitted: at(8).Add(time.Minute), commitID: r.branches["feature"]},
				}}},
	}
	r.issues[0].comments = []comment{{id: 9001, user: "hubot", body: "Me too.", created: at(3), modified: at(3)}}
	r.workflows = []*workflow{
		{id: SeedWorkflowID, name: "CI", path: ".github/workflows/ci.yml", state: "active", dispatchable: true, created: at(0), updated: at(0)},
		{id: SeedDeployWorkflowID, name: "Deploy", path: ".github/workflows/deploy.yml", state: "active", created: at(0), updated: at(0)},
	}
	r.runs = []*run{{id: SeedRunID, workflowID: SeedWorkflowID, number: 1, branch: "main", sha: r.branches["main"], event: "push",
		actor: "octocat", created: at(1), done: true, conclusion: "success"}}
	r.releases = []*release{
		{id: 7001, tag: "v0.9.0", name: "v0.9.0", body: "Beta.", target: "main", prerelease: true, author: "octocat", created: at(1), published: at(1)},
		{id: 7002, tag: "v1.0.0", name: "v1.0.0", body: "First release.", target: "main", author: "octocat", created: at(2), published: at(2)},
	}

	o := newRepo(1300192, SeedOtherOwner, SeedOtherRepo, at(0))
	o.description = "Mona's app"
	st.commitOn(o, "main", "monalisa", "Initial commit", at(0), writeFile("README.md", []byte("# Octo app\n")))
	st.repos[repoKey(o.owner, o.name)] = o

	p := newRepo(1300193, SeedOtherOwner, SeedPrivateRepo, at(0))
	p.private, p.visibility = true, "private"
	st.commitOn(p, "main", "monalisa", "Initial commit", at(0), writeFile("README.md", []byte("# Secret\n")))
	st.repos[repoKey(p.owner, p.name)] = p

	st.gists = []*gist{{id: SeedGistID, owner: "octocat", description: "Hello World Examples", public: true,
		files:   map[string]string{"hello_world.rb": "class HelloWorld\n  def initialize(name)\n    @name = name.capitalize\n  end\nend\n"},
		created: at(2), updated: at(2)}}
	st.projects[SeedProjectID] = &project{id: SeedProjectID, owner: "octocat",
		fields: map[string]*projectField{
			SeedFieldID: {name: "Status", dataType: "SINGLE_SELECT", options: map[string]string{
				SeedOptionTodo: "Todo", SeedOptionDoing: "In Progress", SeedOptionDone: "Done"}},
			SeedPriorityFieldID: {name: "Priority", dataType: "SINGLE_SELECT", options: map[string]string{
				"p1a2b3c4": "High", "p5d6e7f8": "Low"}},
			SeedTitleFieldID: {name: "Title", dataType: "TITLE"},
		},
		items: map[string]map[string]string{SeedItemID: {SeedFieldID: SeedOptionTodo}}}
	return st
}

// Issue is a read-only view of an issue or pull request of the fake.
type Issue struct {
	Number      int
	Title, Body string
	User        string
	State       string
	StateReason string
	Labels      []string
	Assignees   []string
	Milestone   int
	Comments    []string
	PullRequest bool
	Merged      bool
	Head, Base  string
	Draft       bool
}

// Issue returns issue (or pull request) number of owner/repo.
func (s *Server) Issue(owner, repo string, number int) (Issue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	if r == nil || number < 1 || number > len(r.issues) {
		return Issue{}, false
	}
	is := r.issues[number-1]
	v := Issue{Number: is.number, Title: is.title, Body: is.body, User: is.user, State: is.state, StateReason: is.stateReason,
		Labels: slices.Clone(is.labels), Assignees: slices.Clone(is.assignees), Milestone: is.milestone}
	for _, c := range is.comments {
		v.Comments = append(v.Comments, c.body)
	}
	if is.pr != nil {
		v.PullRequest, v.Merged, v.Head, v.Base, v.Draft = true, is.pr.merged, is.pr.head, is.pr.base, is.pr.draft
	}
	return v, true
}

// IssueCount returns how many issues and pull requests owner/repo has.
func (s *Server) IssueCount(owner, repo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.st.repos[repoKey(owner, repo)]; r != nil {
		return len(r.issues)
	}
	return 0
}

// Repo reports whether owner/repo exists, and its default branch and
// privacy.
func (s *Server) Repo(owner, repo string) (defaultBranch string, private, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	if r == nil {
		return "", false, false
	}
	return r.defaultBranch, r.private, true
}

// Branch returns the head commit sha of a branch.
func (s *Server) Branch(owner, repo, branch string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	if r == nil {
		return "", false
	}
	sha, ok := r.branches[branch]
	return sha, ok
}

// File returns a file's content at the head of branch ("" for the default
// branch).
func (s *Server) File(owner, repo, branch, path string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	if r == nil {
		return nil, false
	}
	if branch == "" {
		branch = r.defaultBranch
	}
	head, ok := r.branches[branch]
	if !ok {
		return nil, false
	}
	b, ok := r.commits[head].tree[path]
	return slices.Clone(b), ok
}

// BlobSHA returns git's blob sha of data, as the contents API reports it.
func BlobSHA(data []byte) string { return blobSHA(data) }

// Starred reports whether login starred owner/repo.
func (s *Server) Starred(login, owner, repo string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	return r != nil && r.stargazers[login]
}

// Collaborator returns login's collaborator permission on owner/repo
// (pull, triage, push, maintain or admin) and whether an invitation to
// login is pending.
func (s *Server) Collaborator(owner, repo, login string) (permission string, invited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	if r == nil {
		return "", false
	}
	for _, inv := range r.invitations {
		if inv.invitee == login {
			invited = true
		}
	}
	return r.collaborators[login], invited
}

// WorkflowState returns a workflow's state (active or disabled_manually)
// and how many runs it has.
func (s *Server) WorkflowState(owner, repo string, id int64) (state string, runs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	if r == nil {
		return "", 0
	}
	for _, w := range r.workflows {
		if w.id == id {
			state = w.state
		}
	}
	for _, rn := range r.runs {
		if rn.workflowID == id {
			runs++
		}
	}
	return state, runs
}

// Gist returns a gist's description and files (name → content).
func (s *Server) Gist(id string) (description string, files map[string]string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.st.gists {
		if g.id == id {
			return g.description, maps.Clone(g.files), true
		}
	}
	return "", nil, false
}

// ProjectItemOption returns the single-select option an item has for a
// field of a Projects (v2) board.
func (s *Server) ProjectItemOption(projectID, itemID, fieldID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.st.projects[projectID]; p != nil {
		return p.items[itemID][fieldID]
	}
	return ""
}

var loginRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)

// AddUser adds a user account and returns its id; name is the display
// name. It fails when the login is invalid or taken (by a user or an
// organisation, case-insensitively). Options.Authenticate decides which
// token acts as the user.
func (s *Server) AddUser(login, name string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !loginRE.MatchString(login) {
		return 0, fmt.Errorf("fakecodehost: %q is not a valid login", login)
	}
	if s.st.users[strings.ToLower(login)] != nil {
		return 0, fmt.Errorf("fakecodehost: login %q is taken", login)
	}
	u := &user{id: s.st.id(), login: login, name: name, email: strings.ToLower(login) + "@users.noreply.github.com"}
	s.st.users[strings.ToLower(login)] = u
	return u.id, nil
}

// SetOrg creates organisation org when it does not exist and sets the
// roles of its members: login → OrgAdmin (an owner, who may manage the
// organisation's hooks and is admin of all its repositories) or OrgMember
// (read access to its repositories, GitHub's default base permission); an
// empty role removes the member. Members must be existing users. It fails
// when org is a user's login.
func (s *Server) SetOrg(org string, members map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !loginRE.MatchString(org) {
		return fmt.Errorf("fakecodehost: %q is not a valid organisation name", org)
	}
	for login, role := range members {
		u := s.st.users[strings.ToLower(login)]
		switch {
		case u == nil || u.org:
			return fmt.Errorf("fakecodehost: no user %q", login)
		case role != "" && role != OrgAdmin && role != OrgMember:
			return fmt.Errorf("fakecodehost: role %q: want %q or %q", role, OrgAdmin, OrgMember)
		}
	}
	o := s.st.users[strings.ToLower(org)]
	switch {
	case o == nil:
		o = &user{id: s.st.id(), login: org, name: org, org: true, roles: map[string]string{}}
		s.st.users[strings.ToLower(org)] = o
	case !o.org:
		return fmt.Errorf("fakecodehost: %q is a user, not an organisation", org)
	}
	for login, role := range members {
		canonical := s.st.users[strings.ToLower(login)].login
		if role == "" {
			delete(o.roles, canonical)
		} else {
			o.roles[canonical] = role
		}
	}
	return nil
}
