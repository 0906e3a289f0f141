package mention

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file scans a paragraph, or a type-6 HTML block, for mentions: code
// spans, HTML comments and elements, links, escapes, emphasis underscores
// and the mentions themselves.

// maxLoginLen is the longest login the code host allows.
const maxLoginLen = 39

// scanner collects the mentions of one text.
type scanner struct {
	text   string
	sender string
	found  []string
	// seen holds the lower-cased logins found, once there are too many to
	// compare one by one.
	seen map[string]struct{}
	// raw is set while a type-6 HTML block is scanned: HTML, where
	// backslashes, backticks, brackets and underscores are text.
	raw bool
	// inComment is set while an HTML comment that starts a line of an
	// earlier paragraph (an HTML block) is not closed yet, inPre while a
	// <pre> element that does is not.
	inComment, inPre bool
	// refs tells whether the text has link reference definitions: 0 not
	// known yet, 1 none, 2 some.
	refs int8

	// The paragraph being scanned: where it starts, and the content column
	// of the list item holding it (0 outside list items).
	start, base int
	// runs indexes the backtick runs of the paragraph, when it has any.
	runs backtickRuns
	// htmlEnd is where the line ends on which an HTML block that a comment
	// or a <pre> starts closes: the rest of that line is HTML too, where an
	// unclosed comment runs on as the block would.
	htmlEnd int
	// The searches of link, element and comments, remembered for the
	// paragraph so that a run of openers without closers stays linear.
	closeBracket, refBracket, paren, blank, gt, dashes nextMemo
	// linkClose is the ']' for which link last looked at what follows,
	// linkEnd what it found.
	linkClose, linkEnd int
	// destBlank is the blank after a destination that link last skipped
	// blanks from, destAfter where they end.
	destBlank, destAfter int
	// titleParen is the ')' that link last looked around for a title,
	// titleBefore and titleAfter the first non-blanks before and after it.
	titleParen, titleBefore, titleAfter int
	// emph tells whether firstOpen and lastClose are computed for the
	// paragraph: where its first '_' run that can open emphasis starts,
	// and where its last one that can close emphasis starts (-1: none).
	emph                 bool
	firstOpen, lastClose int
}

// linearDedupe is how many logins add compares one by one before it
// switches to a set.
const linearDedupe = 16

// htmlBlock scans text[start:end], a type-6 HTML block, for mentions
// outside comments and code, pre and a elements: as a paragraph whose
// Markdown is text.
func (s *scanner) htmlBlock(start, end int) {
	s.raw = true
	s.paragraph(start, end)
	s.raw = false
}

// paragraph scans text[start:end], a run of ordinary lines, for mentions
// outside code spans, comments, code, pre and a elements and links (only
// the comments and elements when s.raw is set). A negative start means no
// paragraph.
func (s *scanner) paragraph(start, end int) {
	if start < 0 {
		return
	}
	t := s.text[:end]
	s.htmlEnd = 0
	if s.inComment {
		j := strings.Index(t[start:], "-->")
		if j < 0 {
			return
		}
		start += j + len("-->")
		s.inComment = false
		s.htmlEnd = lineEnd(t, start)
	}
	if s.inPre {
		if start = closeTag(t, start, "pre"); start < 0 {
			return
		}
		s.inPre = false
		s.htmlEnd = lineEnd(t, start)
	}
	s.start, s.emph = start, false
	s.closeBracket, s.refBracket, s.paren, s.blank, s.gt, s.dashes = nextMemo{}, nextMemo{}, nextMemo{}, nextMemo{}, nextMemo{}, nextMemo{}
	s.linkClose, s.destBlank, s.titleParen = -1, -1, -1
	stops := &scanStops
	if s.raw {
		stops = &rawScanStops
	} else if strings.IndexByte(t[start:], '`') >= 0 {
		s.runs = backtickRuns{}
		s.runs.index(t, start)
	}
	for i := start; i < end; {
		// Skip the bytes that stop nothing.
		k, rest := 0, t[i:]
		for k < len(rest) && !stops[rest[k]] {
			k++
		}
		if k == len(rest) {
			return
		}
		i += k
		// A type-6 block is HTML, and so is the rest of the line another
		// HTML block ends on: backslashes, backticks and brackets are text.
		html := s.raw || i < s.htmlEnd
		if html && t[i] != '<' && t[i] != '@' {
			i++
			continue
		}
		switch t[i] {
		case '\\':
			if i+1 < end && isASCIIPunct(t[i+1]) {
				// An escaped character is literal: a backtick opens no
				// code span, an '@' is no mention, a backslash escapes
				// nothing.
				i += 2
				continue
			}
			i++
		case '<':
			if !strings.HasPrefix(t[i:], "<!--") {
				k, ok := s.element(t, i)
				if !ok {
					i++
					continue
				}
				if k < 0 {
					return // runs to the end of the paragraph, or further
				}
				i = k
				continue
			}
			if i = s.comment(t, i); i < 0 {
				return // an HTML block, closed in a later paragraph if at all
			}
		case '`':
			n := runLen(t, i, '`')
			if s.runs.last(n) >= i+n {
				// A closing run exists: skip the code span.
				i = closingRun(t, i+n, n) + n
				continue
			}
			i += n // no closing run: the backticks are literal
		case '[':
			if k := s.link(t, i); k > 0 {
				i = k // link text, destination and all
				continue
			}
			i++
		case '@':
			if login, next, ok := s.mentionAt(t, i, html); ok {
				s.add(login)
				i = next
				continue
			}
			i++
		default:
			i++
		}
	}
}

// comment returns, for the "<!--" at t[i], where the scan goes on: past
// the comment, or past the "<!--" when it is text (no comment closes in
// the paragraph, and it starts no HTML block); -1 when it is an HTML block
// that the paragraph does not close.
func (s *scanner) comment(t string, i int) int {
	// <!--> and <!---> are whole, empty comments.
	k := i + len("<!--")
	if rest := t[k:]; strings.HasPrefix(rest, ">") || strings.HasPrefix(rest, "->") {
		k += strings.IndexByte(rest, '>') + 1
	} else if j := s.dashes.comment(t, k); j >= 0 {
		k = j + len("-->")
	} else {
		k = -1
	}
	block := s.raw || i < s.htmlEnd || s.opensHTMLBlock(t, i)
	switch {
	case k < 0 && block:
		s.inComment = true
	case k < 0:
		k = i + len("<!--")
	case block && k > s.htmlEnd:
		s.htmlEnd = lineEnd(t, k)
	}
	return k
}

// scanStops marks the bytes at which paragraph stops to look, rawScanStops
// those in an HTML block, where only comments, elements and '@' matter.
var (
	scanStops    = [256]bool{'\\': true, '<': true, '`': true, '[': true, '@': true}
	rawScanStops = [256]bool{'<': true, '@': true}
)

// element reports whether t[i], a '<', opens a code, pre or a element (an
// HTML start tag: the name in any case, then a blank, '/' or '>', and a '>'
// later in the paragraph), and returns the index just past its end tag, or
// -1 when there is none in the paragraph. Then a <pre> that starts a line
// outside list items is an HTML block, which blank lines do not end: it
// runs on to a </pre> in a later paragraph, if any.
func (s *scanner) element(t string, i int) (end int, ok bool) {
	j := i + 1
	for j < len(t) && j-i <= len("code") && isAlnum(t[j]) {
		j++
	}
	name := t[i+1 : j]
	if !strings.EqualFold(name, "a") && !strings.EqualFold(name, "code") && !strings.EqualFold(name, "pre") {
		return 0, false
	}
	if j == len(t) || (t[j] != '>' && t[j] != '/' && asciiClass(t[j]) != classSpace) {
		return 0, false
	}
	gt := s.gt.next(t, j, '>')
	if gt < 0 {
		return 0, false
	}
	end = closeTag(t, gt+1, name)
	if len(name) != len("pre") {
		return end, true
	}
	if end < 0 && s.base == 0 && lineStarts(t, i, s.start) {
		s.inPre = true
	} else if end > s.htmlEnd && s.opensHTMLBlock(t, i) {
		s.htmlEnd = lineEnd(t, end) // the block ends with the line of </pre>
	}
	return end, true
}

// closeTag returns the index just past the first end tag </name> (in any
// case, blanks allowed before the '>') in t[from:], or -1.
func closeTag(t string, from int, name string) int {
	for i := from; i < len(t); {
		j := strings.Index(t[i:], "</")
		if j < 0 {
			return -1
		}
		i += j + len("</")
		if len(t)-i < len(name) || !strings.EqualFold(t[i:i+len(name)], name) {
			continue
		}
		k := i + len(name)
		for k < len(t) && asciiClass(t[k]) == classSpace {
			k++
		}
		if k < len(t) && t[k] == '>' {
			return k + 1
		}
	}
	return -1
}

// lineStarts reports whether only blanks come between the start of the
// line holding t[i] (or the paragraph start, start) and t[i].
func lineStarts(t string, i, start int) bool {
	for i > start && (t[i-1] == ' ' || t[i-1] == '\t') {
		i--
	}
	return i == start || t[i-1] == '\n'
}

// lineEnd returns the index of the first '\n' in t[i:], or len(t).
func lineEnd(t string, i int) int {
	if j := strings.IndexByte(t[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(t)
}

// opensHTMLBlock reports whether t[i], the '<' of a comment or a <pre>,
// starts an HTML block, which runs on to the line of the comment's or the
// element's end, even past the paragraph: it starts a line of the
// paragraph, indented by less than four columns past the list item holding
// the paragraph, if any (indented more, it would be indented code, which
// does not interrupt a paragraph).
func (s *scanner) opensHTMLBlock(t string, i int) bool {
	if !lineStarts(t, i, s.start) {
		return false
	}
	j := i
	for j > s.start && t[j-1] != '\n' {
		j--
	}
	if j == s.start {
		return true // the paragraph's first line, past its indentation
	}
	cols, _ := lineIndent(t[j:i])
	return cols < s.base+4
}

// link returns, when t[i], a '[', opens a link or an image, where it ends,
// destination and all; 0 otherwise. A link is '[', text up to the first
// ']' not escaped, then either '[', a label up to the next ']' (a
// reference, which may be undefined), or '(', blanks, a destination with no
// blank, blanks, and ')', perhaps after a title in quotes or parentheses.
func (s *scanner) link(t string, i int) int {
	c := s.closeBracket.next(t, i+1, ']')
	if c < 0 || c+1 == len(t) {
		return 0
	}
	if c == s.linkClose {
		return s.linkEnd
	}
	s.linkClose, s.linkEnd = c, 0
	switch t[c+1] {
	case '[':
		if s.refs == 0 {
			s.refs = 1
			if strings.Contains(s.text, "]:") {
				s.refs = 2
			}
		}
		if k := s.refBracket.next(t, c+2, ']'); k > 0 && s.refs == 2 && strings.IndexByte(t[c+2:k], '[') < 0 {
			s.linkEnd = k + 1
		}
	case '(':
		p := s.paren.next(t, c+2, ')')
		if p < 0 {
			break
		}
		k := skipBlanks(t, c+2, p)
		if e := s.blank.next(t, k, ' '); e >= 0 && e < p {
			// Past the destination and the blanks after it.
			if e != s.destBlank {
				s.destBlank, s.destAfter = e, skipBlanks(t, e, p)
			}
			k = s.destAfter
		} else {
			k = p
		}
		if k == p {
			s.linkEnd = p + 1
			break
		}
		if s.titleParen != p {
			s.titleParen = p
			s.titleBefore = p - 1
			for s.titleBefore > s.start && asciiClass(t[s.titleBefore]) == classSpace {
				s.titleBefore--
			}
			s.titleAfter = skipBlanks(t, p+1, len(t))
		}
		switch t[k] {
		case '"', '\'':
			if s.titleBefore > k && t[s.titleBefore] == t[k] {
				s.linkEnd = p + 1
			}
		case '(':
			// The title's ')' is p; the link's comes after blanks.
			if q := s.titleAfter; q < len(t) && t[q] == ')' {
				s.linkEnd = q + 1
			}
		}
	}
	return s.linkEnd
}

// skipBlanks returns the index of the first byte of t[i:end] that is not
// a blank, or end.
func skipBlanks(t string, i, end int) int {
	for i < end && asciiClass(t[i]) == classSpace {
		i++
	}
	return i
}

// nextMemo remembers a forward search of a paragraph: there is no match
// in t[from:at] (none in t[from:] when at < 0), so that a later search
// from between from and at is answered at once.
type nextMemo struct {
	ok       bool
	from, at int
}

// next returns the index of the first c in t[from:] that is not
// backslash-escaped (of the first blank when c is ' '), or -1.
func (m *nextMemo) next(t string, from int, c byte) int {
	if m.ok && m.from <= from && (m.at < 0 || from <= m.at) {
		return m.at
	}
	at := -1
	for k := from; k < len(t); k++ {
		if c == ' ' {
			if asciiClass(t[k]) == classSpace {
				at = k
				break
			}
			continue
		}
		j := strings.IndexByte(t[k:], c)
		if j < 0 {
			break
		}
		k += j
		if backslashes(t, k)%2 == 0 {
			at = k
			break
		}
	}
	*m = nextMemo{ok: true, from: from, at: at}
	return at
}

// comment returns the index of the first "-->" in t[from:], which closes
// an HTML comment opened before from, or -1.
func (m *nextMemo) comment(t string, from int) int {
	if m.ok && m.from <= from && (m.at < 0 || from <= m.at) {
		return m.at
	}
	at := strings.Index(t[from:], "-->")
	if at >= 0 {
		at += from
	}
	*m = nextMemo{ok: true, from: from, at: at}
	return at
}

// backtickRuns records, for each length n, where the last run of exactly n
// backticks of a paragraph starts, so that an opening run without a closing
// one is found in constant time and the scan stays linear.
type backtickRuns struct {
	small [64]int // by length, index+1 (0: none)
	big   map[int]int
}

// index records the backtick runs of t[start:].
func (r *backtickRuns) index(t string, start int) {
	for i := start; i < len(t); {
		j := strings.IndexByte(t[i:], '`')
		if j < 0 {
			return
		}
		i += j
		n := runLen(t, i, '`')
		if n < len(r.small) {
			r.small[n] = i + 1
		} else {
			if r.big == nil {
				r.big = make(map[int]int)
			}
			r.big[n] = i + 1
		}
		i += n
	}
}

// last returns where the last run of exactly n backticks starts, or -1.
func (r *backtickRuns) last(n int) int {
	if n < len(r.small) {
		return r.small[n] - 1
	}
	if v, ok := r.big[n]; ok {
		return v - 1
	}
	return -1
}

// add records login unless it is the sender or already recorded.
func (s *scanner) add(login string) {
	if strings.EqualFold(login, s.sender) {
		return
	}
	if len(s.found) < linearDedupe {
		for _, f := range s.found {
			if strings.EqualFold(f, login) {
				return
			}
		}
		s.found = append(s.found, login)
		return
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{}, 2*linearDedupe)
		for _, f := range s.found {
			s.seen[strings.ToLower(f)] = struct{}{}
		}
	}
	key := strings.ToLower(login)
	if _, ok := s.seen[key]; ok {
		return
	}
	s.seen[key] = struct{}{}
	s.found = append(s.found, login)
}

// mentionAt reports whether the '@' at t[i] starts a mention, and returns
// the login and the index just past it. In HTML (raw), an underscore is a
// word character and a backslash text.
func (s *scanner) mentionAt(t string, i int, raw bool) (login string, next int, ok bool) {
	if i > 0 {
		// As GitHub's own pattern, ASCII word characters only: "さん@alice"
		// mentions alice, "a@b.com" does not mention b.
		c := t[i-1]
		if c == '_' {
			// In HTML an underscore is no emphasis delimiter.
			if raw || !s.delimitsBefore(t, i) {
				return "", 0, false
			}
		} else if isAlnum(c) || c == '/' {
			return "", 0, false
		}
	}
	j := i + 1
	for j < len(t) && (isAlnum(t[j]) || t[j] == '-') {
		j++
	}
	if !validLogin(t[i+1 : j]) {
		return "", 0, false
	}
	// A managed user's login ends in '_' and the enterprise's short code.
	if j+1 < len(t) && t[j] == '_' && isAlnum(t[j+1]) {
		k := j + 1
		for k < len(t) && isAlnum(t[k]) {
			k++
		}
		if k-(i+1) <= maxLoginLen { // the whole login, suffix included
			j = k
		}
	}
	login = t[i+1 : j]
	if j < len(t) {
		k := j
		for k < len(t) && t[k] == '.' {
			k++
		}
		if k < len(t) {
			// A login ends at anything but an ASCII word character:
			// "@aliceさん" mentions alice.
			if c := t[k]; c == '_' {
				if raw || !s.delimitsAfter(t, i, k) {
					return "", 0, false
				}
			} else if isAlnum(c) || (k == j && c == '/') || (!raw && c == '\\' && k+1 < len(t) && t[k+1] == '_') {
				// An escaped '_' is a literal one, a word character (in
				// HTML the backslash is text, and no word character).
				return "", 0, false
			}
		}
	}
	return login, j, true
}

// delimitsBefore reports whether the run of '_' that ends just before the
// '@' at t[i] opens or closes emphasis (so the '@' starts a text of its
// own): the run is not an escaped '_', and it can open emphasis that a
// later run of the paragraph can close, or close emphasis that an earlier
// run can open.
func (s *scanner) delimitsBefore(t string, i int) bool {
	p := i - 1
	for p > s.start && t[p-1] == '_' {
		p--
	}
	if p == i-1 && backslashes(t, p)%2 == 1 {
		return false // \_ is a literal underscore
	}
	open, closes := underscoreFlanks(classBefore(t, p), classAt(t, i))
	if !open && !closes {
		return false
	}
	s.emphasis(t)
	return open && s.lastClose > i || closes && s.firstOpen >= 0 && s.firstOpen < p
}

// delimitsAfter reports whether the run of '_' at t[k], right after the
// login of the '@' at t[i] and perhaps dots, closes or opens emphasis (so
// the login ends a text): it can close emphasis that an earlier run of the
// paragraph can open, or (after dots only) open emphasis that a later run
// can close.
func (s *scanner) delimitsAfter(t string, i, k int) bool {
	m := k + runLen(t, k, '_')
	open, closes := underscoreFlanks(classBefore(t, k), classAt(t, m))
	if !open && !closes {
		return false
	}
	s.emphasis(t)
	return closes && s.firstOpen >= 0 && s.firstOpen < i || open && s.lastClose > k
}

// emphasis computes, once per paragraph, where its first run of '_' that
// can open emphasis and its last one that can close emphasis start. It
// does not pair them as Markdown does: any opener before and any closer
// after will do.
func (s *scanner) emphasis(t string) {
	if s.emph {
		return
	}
	s.emph, s.firstOpen, s.lastClose = true, -1, -1
	for i := s.start; i < len(t); {
		j := strings.IndexByte(t[i:], '_')
		if j < 0 {
			break
		}
		i += j
		m := i + runLen(t, i, '_')
		if backslashes(t, i)%2 == 1 {
			if i++; i == m {
				continue // an escaped '_' is literal
			}
		}
		open, closes := underscoreFlanks(classBefore(t, i), classAt(t, m))
		if open && s.firstOpen < 0 {
			s.firstOpen = i
		}
		if closes {
			s.lastClose = i
		}
		i = m
	}
}

// Character classes for emphasis delimiters, as CommonMark has them: the
// start and end of the text count as whitespace.
const (
	classSpace = iota
	classPunct
	classOther
)

// underscoreFlanks reports whether a run of '_' between characters of
// classes before and after can open and close emphasis (CommonMark's
// left- and right-flanking rules, with the stricter ones of '_').
func underscoreFlanks(before, after int) (open, closes bool) {
	left := after != classSpace && (after != classPunct || before != classOther)
	right := before != classSpace && (before != classPunct || after != classOther)
	return left && (!right || before == classPunct), right && (!left || after == classPunct)
}

// classBefore returns the class of the character that ends t[:i].
func classBefore(t string, i int) int {
	if i == 0 {
		return classSpace
	}
	if c := t[i-1]; c < utf8.RuneSelf {
		return asciiClass(c)
	}
	r, _ := utf8.DecodeLastRuneInString(t[:i])
	return runeClass(r)
}

// classAt returns the class of the character that starts t[i:].
func classAt(t string, i int) int {
	if i >= len(t) {
		return classSpace
	}
	if c := t[i]; c < utf8.RuneSelf {
		return asciiClass(c)
	}
	r, _ := utf8.DecodeRuneInString(t[i:])
	return runeClass(r)
}

func asciiClass(c byte) int {
	switch {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		return classSpace
	case isASCIIPunct(c):
		return classPunct
	}
	return classOther
}

func runeClass(r rune) int {
	switch {
	case unicode.IsSpace(r):
		return classSpace
	case unicode.IsPunct(r) || unicode.IsSymbol(r):
		return classPunct
	}
	return classOther
}

// backslashes returns how many backslashes end t[:i].
func backslashes(t string, i int) int {
	n := 0
	for i-n > 0 && t[i-n-1] == '\\' {
		n++
	}
	return n
}

// validLogin reports whether s has the syntax of a login.
func validLogin(s string) bool {
	if s == "" || len(s) > maxLoginLen || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	return !strings.Contains(s, "--")
}

// isASCIIPunct reports whether c is ASCII punctuation, which a backslash
// escapes in Markdown.
func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// closingRun returns the index of the first run of exactly n backticks in
// s[from:], or -1.
func closingRun(s string, from, n int) int {
	for i := from; i < len(s); {
		j := strings.IndexByte(s[i:], '`')
		if j < 0 {
			return -1
		}
		i += j
		m := runLen(s, i, '`')
		if m == n {
			return i
		}
		i += m
	}
	return -1
}
