package mention

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxLoginLen is the longest login the code host allows.
const maxLoginLen = 39

// Logins returns the distinct logins @-mentioned in the newly written parts
// of text, a Markdown document, in order of first appearance, leaving out
// sender (the text's author, who is not notified of their own mention).
// Logins are compared case-insensitively; the first spelling seen is kept.
// It returns nil when there is none. The package documentation states the
// rules.
func Logins(text, sender string) []string {
	var s scanner
	s.text = text
	s.sender = sender

	var (
		inFence   bool
		fenceChar byte
		fenceLen  int
		fenceBase int // the content column of the list item holding the fence
		paraStart = -1
		paraEnd   int
		onlyDefs  bool // the paragraph has only link reference definitions
		items     listItems
		// A type-6 HTML block being read: where it starts (-1: none) and
		// ends so far.
		rawStart = -1
		rawEnd   int
	)
	for lineStart, next := 0, 0; lineStart <= len(text); lineStart = next {
		lineEnd := len(text)
		next = len(text) + 1
		if i := strings.IndexByte(text[lineStart:], '\n'); i >= 0 {
			lineEnd = lineStart + i
			next = lineEnd + 1
		}
		line := strings.TrimSuffix(text[lineStart:lineEnd], "\r")
		indent, first := lineIndent(line)
		blank := first == len(line)

		if inFence {
			if blank || indent >= fenceBase {
				if indent < fenceBase+4 && isFenceClose(line[first:], fenceChar, fenceLen) {
					inFence = false
				}
				continue
			}
			inFence = false // the list item holding the fence ends here
		}
		if rawStart >= 0 {
			// A type-6 HTML block takes every line up to a blank one, or
			// to one that leaves the list item holding it: it has no lazy
			// lines, and nothing in it starts a Markdown block.
			if !blank && indent >= items.content() {
				rawEnd = lineStart + len(line)
				continue
			}
			s.htmlBlock(rawStart, rawEnd)
			rawStart = -1
		}
		if blank {
			s.paragraph(paraStart, paraEnd)
			paraStart = -1
			continue
		}
		// A line indented less than the innermost list item's content
		// leaves the items it is not indented into, unless it continues a
		// paragraph lazily: it starts no other block, or is indented by
		// four columns or more past the item it is in, too far to start
		// one. Then a list item it starts interrupts no paragraph.
		interrupts := paraStart >= 0
		if indent < items.content() {
			if interrupts && (indent >= items.within(indent)+4 || !startsBlock(line[first:])) {
				paraEnd, onlyDefs = lineStart+len(line), false
				continue
			}
			items.leave(indent)
			interrupts = false
		}
		base := items.content()
		if indent >= base+4 {
			// Indented code, unless it continues a paragraph.
			if paraStart >= 0 {
				paraEnd, onlyDefs = lineStart+len(line), false
			}
			continue
		}
		// The blocks the line starts, one in another: "- > quote",
		// "1. - item", "- ```".
		for pos, col := first, indent; ; {
			rest := line[pos:]
			if rest[0] == '>' || isThematicBreak(rest) {
				s.paragraph(paraStart, paraEnd)
				paraStart = -1
				break
			}
			if isFenceOpen(rest) {
				s.paragraph(paraStart, paraEnd)
				paraStart = -1
				inFence = true
				fenceChar = rest[0]
				fenceLen = runLen(rest, 0, fenceChar)
				fenceBase = base
				break
			}
			w := listMarker(rest, interrupts)
			if w == 0 {
				if startsRawHTMLBlock(rest) {
					// It interrupts a paragraph, and is HTML, not Markdown,
					// up to a blank line.
					s.paragraph(paraStart, paraEnd)
					paraStart = -1
					rawStart, rawEnd = lineStart+pos, lineStart+len(line)
					s.base = base
					break
				}
				if startsHTMLBlock(rest) {
					// It interrupts a paragraph, and is scanned as one of
					// its own.
					s.paragraph(paraStart, paraEnd)
					paraStart = -1
				}
				if (paraStart < 0 || onlyDefs) && isLinkDefinition(rest) {
					// Not shown, but it starts a paragraph, which the
					// lines after it continue.
					paraStart, paraEnd, onlyDefs = lineStart+len(line), lineStart+len(line), true
					s.base = base
					break
				}
				if paraStart < 0 {
					paraStart = lineStart + pos
					s.base = base
				}
				paraEnd, onlyDefs = lineStart+len(line), false
				break
			}
			// The content starts after 1 to 4 columns of blanks; after
			// more, it starts one column after the marker with an indented
			// code block.
			k, c := pos+w, col+w
			for ; k < len(line) && (line[k] == ' ' || line[k] == '\t'); k++ {
				if line[k] == ' ' {
					c++
				} else {
					c += 4 - c%4
				}
			}
			if k == len(line) && interrupts {
				// An empty list item interrupts no paragraph.
				paraEnd, onlyDefs = lineStart+len(line), false
				break
			}
			s.paragraph(paraStart, paraEnd)
			paraStart = -1
			if k == len(line) || c-(col+w) > 4 {
				items.enter(col + w + 1)
				break // empty, or indented code
			}
			items.enter(c)
			base, interrupts = c, false
			pos, col = k, c
		}
	}
	s.paragraph(paraStart, paraEnd)
	if rawStart >= 0 {
		s.htmlBlock(rawStart, rawEnd)
	}
	return s.found
}

// listItems is the stack of the list items a line is in, as the content
// column of each, the innermost last. Past its depth, a new item replaces
// the innermost.
type listItems struct {
	cols [8]int
	n    int
}

// content returns the content column of the innermost item, 0 when there
// is none.
func (l *listItems) content() int {
	if l.n == 0 {
		return 0
	}
	return l.cols[l.n-1]
}

// within returns the content column of the innermost item that a line
// indented by indent columns is in, 0 when there is none.
func (l *listItems) within(indent int) int {
	for n := l.n; n > 0; n-- {
		if l.cols[n-1] <= indent {
			return l.cols[n-1]
		}
	}
	return 0
}

// enter opens an item whose content starts at column col.
func (l *listItems) enter(col int) {
	if l.n == len(l.cols) {
		l.n--
	}
	l.cols[l.n] = col
	l.n++
}

// leave closes the items a line indented by indent columns is not in.
func (l *listItems) leave(indent int) {
	for l.n > 0 && indent < l.cols[l.n-1] {
		l.n--
	}
}

// listMarker returns the width of the list marker that starts s (a line
// without its indentation): '-', '*' or '+', or 1 to 9 digits and '.' or
// ')', followed by a blank or the end of the line; 0 when there is none.
// A marker that would interrupt a paragraph must be a bullet or number 1.
func listMarker(s string, interrupts bool) int {
	w := 0
	switch {
	case s[0] == '-' || s[0] == '*' || s[0] == '+':
		w = 1
	case s[0] >= '0' && s[0] <= '9':
		for w < len(s) && w < 10 && s[w] >= '0' && s[w] <= '9' {
			w++
		}
		if w > 9 || w == len(s) || (s[w] != '.' && s[w] != ')') {
			return 0
		}
		if interrupts && strings.TrimLeft(s[:w], "0") != "1" {
			return 0
		}
		w++
	default:
		return 0
	}
	if w < len(s) && s[w] != ' ' && s[w] != '\t' {
		return 0
	}
	return w
}

// startsBlock reports whether s (a line without its indentation) starts a
// block other than a paragraph: a quote, a fence, a thematic break, a list
// item or an HTML block that a comment, a <pre> or a type-6 tag starts.
// Such a line does not continue a paragraph lazily.
func startsBlock(s string) bool {
	return s[0] == '>' || isFenceOpen(s) || isThematicBreak(s) || listMarker(s, false) > 0 ||
		startsHTMLBlock(s) || startsRawHTMLBlock(s)
}

// startsHTMLBlock reports whether s (a line without its indentation)
// starts an HTML block that paragraph follows: a comment, or a <pre> tag
// (the name in any case, then a blank, '>' or the end of the line).
func startsHTMLBlock(s string) bool {
	if strings.HasPrefix(s, "<!--") {
		return true
	}
	return len(s) >= len("<pre") && strings.EqualFold(s[:len("<pre")], "<pre") &&
		(len(s) == len("<pre") || s[4] == ' ' || s[4] == '\t' || s[4] == '>')
}

// startsRawHTMLBlock reports whether s (a line without its indentation)
// starts an HTML block of CommonMark's type 6: '<' or "</", one of
// htmlBlockTags in any case, then a blank, the end of the line, '>' or
// "/>". Its lines are HTML, not Markdown, up to a blank line.
func startsRawHTMLBlock(s string) bool {
	if s[0] != '<' {
		return false
	}
	i := 1
	if i < len(s) && s[i] == '/' {
		i++
	}
	j := i
	for j < len(s) && j-i <= maxBlockTagLen && isAlnum(s[j]) {
		j++
	}
	if j == i || j-i > maxBlockTagLen || !isBlockTag(s[i:j]) {
		return false
	}
	return j == len(s) || s[j] == ' ' || s[j] == '\t' || s[j] == '>' || strings.HasPrefix(s[j:], "/>")
}

// htmlBlockTags are the tag names that start a type-6 HTML block, lower
// case (CommonMark 0.31).
var htmlBlockTags = map[string]bool{
	"address": true, "article": true, "aside": true, "base": true, "basefont": true,
	"blockquote": true, "body": true, "caption": true, "center": true, "col": true,
	"colgroup": true, "dd": true, "details": true, "dialog": true, "dir": true,
	"div": true, "dl": true, "dt": true, "fieldset": true, "figcaption": true,
	"figure": true, "footer": true, "form": true, "frame": true, "frameset": true,
	"h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"head": true, "header": true, "hr": true, "html": true, "iframe": true,
	"legend": true, "li": true, "link": true, "main": true, "menu": true,
	"menuitem": true, "nav": true, "noframes": true, "ol": true, "optgroup": true,
	"option": true, "p": true, "param": true, "search": true, "section": true,
	"summary": true, "table": true, "tbody": true, "td": true, "tfoot": true,
	"th": true, "thead": true, "title": true, "tr": true, "track": true, "ul": true,
}

// maxBlockTagLen is the length of the longest of htmlBlockTags.
const maxBlockTagLen = len("blockquote")

// isBlockTag reports whether name, of at most maxBlockTagLen ASCII letters
// and digits, is one of htmlBlockTags in any case. It lower-cases into a
// buffer so as not to allocate.
func isBlockTag(name string) bool {
	var buf [maxBlockTagLen]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return htmlBlockTags[string(buf[:len(name)])]
}

// isLinkDefinition reports whether s (a line without its indentation), at
// the start of a paragraph, defines a link reference: "[label]: ...".
func isLinkDefinition(s string) bool {
	if s[0] != '[' {
		return false
	}
	j := strings.IndexByte(s, ']')
	return j > 1 && j+1 < len(s) && s[j+1] == ':' && strings.IndexByte(s[1:j], '[') < 0
}

// isThematicBreak reports whether s (a line without its indentation) is a
// thematic break: three or more '-', '*' or '_', with blanks between.
func isThematicBreak(s string) bool {
	c := s[0]
	if c != '-' && c != '*' && c != '_' {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case c:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

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

// lineIndent returns a line's indentation in columns (a tab advances to the
// next multiple of four) and the index of its first non-blank byte
// (len(line) for a blank line).
func lineIndent(line string) (cols, first int) {
	for first < len(line) {
		switch line[first] {
		case ' ':
			cols++
		case '\t':
			cols += 4 - cols%4
		default:
			return cols, first
		}
		first++
	}
	return cols, first
}

// runLen returns the length of the run of c starting at s[i].
func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
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

// isFenceOpen reports whether s (a line without its indentation) opens a
// fenced code block: three or more backticks or tildes; a backtick fence's
// info string may not contain a backtick.
func isFenceOpen(s string) bool {
	if s == "" || (s[0] != '`' && s[0] != '~') {
		return false
	}
	n := runLen(s, 0, s[0])
	if n < 3 {
		return false
	}
	return s[0] == '~' || strings.IndexByte(s[n:], '`') < 0
}

// isFenceClose reports whether s (a line without its indentation) closes a
// fence of n characters c: at least n of them and nothing else but blanks.
func isFenceClose(s string, c byte, n int) bool {
	m := runLen(s, 0, c)
	if m < n {
		return false
	}
	return strings.TrimRight(s[m:], " \t") == ""
}
