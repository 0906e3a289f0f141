package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Sessions are kept in the process's memory, by a hash of their cookie:
// signing out or idling past sessionIdle ends one, and a restart ends all
// (the user signs in again). Several triggerd processes behind one
// address need sticky routing for the console.
const (
	cookieName  = "triggerd_console"
	sessionIdle = 12 * time.Hour
	// maxSessions bounds the memory sessions take; past it the session
	// idle longest is ended.
	maxSessions = 10000
)

// session is one signed-in browser.
type session struct {
	hash [32]byte
	// admin signed in with an admin key; tenant is the tenant acted for
	// ("" for an admin who has not chosen one).
	admin      bool
	tenant     string
	tenantName string
	csrf       string
	lastSeen   time.Time
	// once holds a secret to show on the next page that asks for it
	// (an agent's secret after its creation, by the agent's id): shown
	// once, after a redirect, so reloading the page creates nothing.
	once map[string]string
}

// Admin and Tenant are for templates.
func (s *session) Admin() bool        { return s.admin }
func (s *session) Tenant() string     { return s.tenant }
func (s *session) TenantName() string { return s.tenantName }

// checkCSRF compares token with the session's, in constant time.
func (s *session) checkCSRF(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.csrf)) == 1
}

type sessions struct {
	now  func() time.Time
	idle time.Duration
	max  int
	mu   sync.Mutex
	m    map[[32]byte]*session
}

func newSessions(now func() time.Time, idle time.Duration, max int) *sessions {
	return &sessions{now: now, idle: idle, max: max, m: map[[32]byte]*session{}}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns its cookie value.
func (ss *sessions) create(admin bool, tenant, tenantName string) (string, *session) {
	id := randomToken()
	s := &session{hash: sha256.Sum256([]byte(id)), admin: admin, tenant: tenant, tenantName: tenantName,
		csrf: randomToken(), lastSeen: ss.now()}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweepLocked()
	if len(ss.m) >= ss.max {
		var oldest *session
		for _, o := range ss.m {
			if oldest == nil || o.lastSeen.Before(oldest.lastSeen) {
				oldest = o
			}
		}
		delete(ss.m, oldest.hash)
	}
	ss.m[s.hash] = s
	return id, s
}

// sweepLocked ends the sessions idle too long.
func (ss *sessions) sweepLocked() {
	now := ss.now()
	for h, s := range ss.m {
		if now.Sub(s.lastSeen) > ss.idle {
			delete(ss.m, h)
		}
	}
}

// get returns the request's live session, marking it seen, or nil.
func (ss *sessions) get(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil
	}
	h := sha256.Sum256([]byte(ck.Value))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[h]
	if !ok {
		return nil
	}
	now := ss.now()
	if now.Sub(s.lastSeen) > ss.idle {
		delete(ss.m, h)
		return nil
	}
	s.lastSeen = now
	return s
}

// update changes a session's tenant under the lock.
func (ss *sessions) setTenant(s *session, tenant, name string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.tenant, s.tenantName = tenant, name
}

// keepOnce keeps secret for the page of key, once.
func (ss *sessions) keepOnce(s *session, key, secret string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s.once == nil {
		s.once = map[string]string{}
	}
	s.once[key] = secret
}

// takeOnce returns and forgets the secret kept for key.
func (ss *sessions) takeOnce(s *session, key string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v := s.once[key]
	delete(s.once, key)
	return v
}

func (ss *sessions) end(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, s.hash)
}

// cookie returns the session cookie carrying value (empty: deleting it).
func (c *Console) cookie(value string) *http.Cookie {
	ck := &http.Cookie{
		Name: cookieName, Value: value, Path: Prefix,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.o.SecureCookies,
	}
	if value == "" {
		ck.MaxAge = -1
	}
	return ck
}
