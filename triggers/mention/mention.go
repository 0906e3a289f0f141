package mention

import "strings"

// This file follows the block structure of a text, line by line: fences,
// indented code, quotes, list items and HTML blocks, and hands the
// paragraphs and type-6 HTML blocks to the scanner (inline.go).

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
