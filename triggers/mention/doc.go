// Package mention finds the users a Markdown text newly @-mentions, as
// GitHub links them: [Logins] returns their logins. The trigger mapper
// (package triggers) emits one new_mention event for each.
//
// The package is pure: no I/O, and no NATS, HTTP or store library. Its scan
// stays linear in the length of the text, even for inputs built to make a
// naive scanner quadratic (runs of openers without closers): forward
// searches are remembered per paragraph.
//
// # What counts as a mention
//
// A mention is '@' followed by a login: 1 to 39 characters of [A-Za-z0-9-],
// no leading, trailing or doubled hyphen, optionally followed by '_' and the
// short code of an enterprise with managed users (@mona_acme).
//
// The '@' must start the text or follow a character that is not a letter,
// digit or underscore (so e-mail addresses do not count), nor '/' (URLs
// such as medium.com/@x). A backtick is none of those, whether it closes a
// code span ("`code`@alice") or is literal ("`@alice" with no closing run).
//
// The login must not run on into '/' (a team, @org/team), '_', a letter or
// a digit, nor into dots followed by one of those (@example.com); trailing
// dots are punctuation ("thanks @octocat.").
//
// Logins are compared case-insensitively, and the first spelling seen is
// kept. The text's author (the sender of the delivery) is left out.
//
// # Where GitHub does not link one
//
// Only newly written text counts. Left out are:
//
//   - fenced code blocks (``` or ~~~, indented by at most three columns more
//     than the list item holding them, if any, and so is the closing fence;
//     an unclosed fence runs to the end of the text, or of its list item)
//     and indented code blocks (a line indented by four or more columns
//     more than that, that does not continue a paragraph);
//   - quoted lines: a line whose first non-blank character is '>' (the
//     line-based rule: a following unquoted line counts as new text even
//     where Markdown would continue the quote lazily), except in a type-6
//     HTML block, where such a line is HTML text, no quote, and GitHub
//     links its mentions;
//   - inline code spans: a run of N backticks up to the next run of exactly
//     N backticks in the same paragraph (an unmatched run is literal, as is
//     a backslash-escaped backtick);
//   - HTML comments, <!-- to --> (<!--> and <!---> are whole, empty ones),
//     which GitHub does not show (issue and pull request templates are full
//     of them). Inside a paragraph a comment is one only when it closes in
//     that paragraph (an unclosed <!-- is text). A <!-- that starts a line,
//     indented by less than four columns past the list item holding it, if
//     any, starts an HTML block, which runs on to the first --> even in a
//     later paragraph, or to the end of the text;
//   - HTML code, pre and a elements, whose text GitHub does not link: from a
//     start tag (<code>, <A href="...">: the name in any case, then a blank,
//     '/' or '>', and a '>' later in the paragraph) to the end tag (</code>,
//     </a >). An unclosed one runs to the end of its paragraph (or type-6
//     HTML block), except a <pre> that starts a line outside list items,
//     an HTML block, which runs on to a </pre> in a later paragraph, or to
//     the end of the text;
//   - links and images, whose text GitHub renders in an <a> element (or an
//     alt attribute): from '[' to the first ']' that is not escaped, when
//     '[' or '(' follows at once, and on to the next ']' or ')'. A reference
//     ([text][ref], [text][]) counts when its label has no '[' and the text
//     defines some reference ("]:", whatever the label); an inline
//     destination ([text](url)) has no blank, and only a title in quotes or
//     parentheses may follow it. A bracket with no link after it
//     ([@octocat], a task list's [ ]) is text;
//   - link reference definitions, lines "[label]: ..." that start a
//     paragraph or follow one another there, which GitHub does not show;
//   - a backslash-escaped '@' (\@octocat), which GitHub does not link
//     (outside type-6 HTML blocks, where a backslash escapes nothing).
//
// An HTML block that a comment or a <pre> starts ends with the line of its
// end, the rest of which is HTML too, read as a type-6 HTML block is
// ("<!-- a --> `@b`" mentions b): an unclosed <!-- there runs on as one
// that starts a line, and so does one anywhere in a type-6 HTML block.
//
// # Underscores and emphasis
//
// An underscore is a word character, except where Markdown reads a run of
// them as an emphasis delimiter, which GitHub renders as <em> or <strong>:
// _@alice_ and __@alice__ mention alice.
//
// A run of '_' right before the '@' may precede it when it can open
// emphasis (CommonMark's rule: the run starts the text or follows
// whitespace or punctuation, ASCII or Unicode, and is not a
// backslash-escaped '_') and a run later in the paragraph can close
// emphasis, or when it can close emphasis (it follows no whitespace) and a
// run earlier in the paragraph can open emphasis (_hi_@alice).
//
// A run of '_' right after the login (or its trailing dots) may follow it
// when it can close emphasis (it is followed by the end, whitespace or
// punctuation) and a run earlier in the paragraph can open emphasis, or,
// after dots, when it can open emphasis that a later run can close
// (@alice._thanks_). So foo_@bar and _@alice (nothing closes) are no
// mentions, and _@mona_acme_ mentions the managed user mona_acme.
//
// # Type-6 HTML blocks
//
// A type-6 HTML block is HTML, which GitHub keeps as it is, not Markdown.
// It starts with a line whose first non-blank characters, indented by less
// than four columns past the list item holding it, if any, are '<' or "</"
// and one of CommonMark's type-6 tag names in any case (address, article,
// aside, base, basefont, blockquote, body, caption, center, col, colgroup,
// dd, details, dialog, dir, div, dl, dt, fieldset, figcaption, figure,
// footer, form, frame, frameset, h1 to h6, head, header, hr, html, iframe,
// legend, li, link, main, menu, menuitem, nav, noframes, ol, optgroup,
// option, p, param, search, section, summary, table, tbody, td, tfoot, th,
// thead, title, tr, track, ul), then a blank, the end of the line, '>' or
// "/>": <div>, </details>, <hr/>, not <divx>.
//
// Such a line ends a paragraph it would continue, and the block runs up to
// a blank line, or to a line that leaves that list item (it takes no lazy
// lines). In it, only comments and code, pre and a elements hide mentions:
// backticks, brackets, link reference definitions, fences, indentation and
// '>' at a line's start are text, a backslash is a literal non-word
// character (<div>\@alice</div> mentions alice) and an underscore a word
// character (<div>_@alice_</div> mentions nobody).
//
// # List items
//
// List items are followed as far as indentation needs them. An item starts
// with '-', '*' or '+', or 1 to 9 digits and '.' or ')', then 1 to 4
// blanks; its content column is the marker's column, plus the marker's
// width, plus the blanks (one blank only when the line ends after the
// marker, or when 5 or more follow it: then the rest of the line is an
// indented code block).
//
// A line indented to the content column is in the item; a line indented
// less leaves the item, unless it continues a paragraph lazily (text right
// after text, not itself a quote, fence, thematic break, list item,
// comment, <pre> or type-6 tag, or else indented four columns or more past
// the item it is in); a blank line leaves nothing. Nested items are kept on
// a stack eight deep (a deeper one replaces the innermost).
//
// A quote, fence, thematic break ("* * *", not a list item), list item or
// line starting with a comment, a <pre> or a type-6 tag (an HTML block)
// starts a new paragraph, and so does each of several on one line
// ("- > quoted", "1. - item"); an ordered item interrupts a paragraph only
// at number 1, an empty item not at all.
//
// # Known simplifications of Markdown
//
//   - HTML other than comments and code, pre and a elements is not parsed,
//     and HTML blocks other than those of comments, <pre> and type-6 tags
//     (<span> alone on a line, <script>) are read as paragraphs (Markdown
//     in them included).
//   - An unclosed comment in a type-6 block ends at the first --> of the
//     text, even one that Markdown later escapes as text.
//   - A comment or element is looked for in ordinary lines only (not in
//     quoted lines or code), and its end even in a code span; an HTML block
//     a comment starts does not end with its list item.
//   - Link text ends at the first ']' (brackets in it do not nest) and a
//     destination at the first ')'; a link reference definition is one
//     line.
//   - An empty list item stays open after a blank line; headings and tables
//     do not end paragraphs.
//   - Emphasis delimiters are not paired, so that one Markdown pairs
//     elsewhere, or leaves literal by its rule of three, may still count
//     next to a mention.
package mention
