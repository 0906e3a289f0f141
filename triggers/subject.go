package triggers

import "strings"

// SubjectPrefix is the first token of every trigger event subject; a stream
// holding "triggers.>" holds them all.
const SubjectPrefix = "triggers"

// MissingToken stands for an absent subject token (no repository, no team).
const MissingToken = "~"

const hexDigits = "0123456789ABCDEF"

// EncodeToken makes s safe as one NATS subject token: every byte outside
// [A-Za-z0-9_-] is written as %XX (upper-case hex), so "socket.io" becomes
// "socket%2Eio" and no token can contain '.', '*', '>' or white space. An
// empty s becomes MissingToken.
func EncodeToken(s string) string {
	if s == "" {
		return MissingToken
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !tokenSafe(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if tokenSafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xF])
	}
	return b.String()
}

// DecodeToken reverses EncodeToken. It returns "" for MissingToken and
// false for a token EncodeToken cannot have produced.
func DecodeToken(tok string) (string, bool) {
	if tok == MissingToken {
		return "", true
	}
	if tok == "" {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(tok)) // one allocation: the decoding is never longer

	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case tokenSafe(c):
			b.WriteByte(c)
		case c == '%' && i+2 < len(tok):
			hi, ok1 := unhex(tok[i+1])
			lo, ok2 := unhex(tok[i+2])
			v := hi<<4 | lo
			if !ok1 || !ok2 || tokenSafe(v) {
				return "", false
			}
			b.WriteByte(v)
			i += 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

func tokenSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Subject returns the subject the event is published on:
// "triggers.<connector>.<kind>.<owner>.<repo>" for code hosting, with owner
// and repo lower-cased first (the provider's names are case-insensitive),
// and "triggers.deploy.<kind>.<team-or-user-id>.<project-id>" for
// deployments. Every token is encoded with EncodeToken.
func (e *Event) Subject() string {
	var owner, repo string
	switch e.Connector {
	case Deploy:
		owner, repo = e.Account, e.Resource.Project
	default:
		if e.Repository != nil {
			owner, repo = strings.ToLower(e.Repository.Owner), strings.ToLower(e.Repository.Name)
		} else {
			owner = strings.ToLower(e.Account)
		}
	}
	return SubjectPrefix + "." + EncodeToken(string(e.Connector)) + "." + EncodeToken(string(e.Kind)) +
		"." + EncodeToken(owner) + "." + EncodeToken(repo)
}

// ParseSubject returns the connector and kind of an event subject
// (Event.Subject); ok is false for any other subject.
func ParseSubject(subject string) (c Connector, k Kind, ok bool) {
	rest, found := strings.CutPrefix(subject, SubjectPrefix+".")
	if !found {
		return "", "", false
	}
	conn, rest, _ := strings.Cut(rest, ".")
	kind, _, _ := strings.Cut(rest, ".")
	c, k = Connector(conn), Kind(kind)
	if !k.Valid() || k.Connector() != c {
		return "", "", false
	}
	return c, k, true
}

// ConnectorFilter returns the subject filter that matches every event of
// connector c.
func ConnectorFilter(c Connector) string {
	return SubjectPrefix + "." + EncodeToken(string(c)) + ".>"
}

// KindFilter returns the subject filter that matches every event of kind k,
// whatever its repository or project.
func KindFilter(k Kind) string {
	return SubjectPrefix + "." + EncodeToken(string(k.Connector())) + "." + EncodeToken(string(k)) + ".>"
}

// RepositorySubject returns the subject filter that matches every event of
// kind k on a code-hosting repository; k "" matches every kind.
func RepositorySubject(k Kind, owner, repo string) string {
	kt := "*"
	if k != "" {
		kt = EncodeToken(string(k))
	}
	return SubjectPrefix + "." + string(CodeHost) + "." + kt + "." +
		EncodeToken(strings.ToLower(owner)) + "." + EncodeToken(strings.ToLower(repo))
}
