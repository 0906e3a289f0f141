package mention

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

func TestMentions(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		sender string
		want   []string
	}{
		{name: "empty", text: "", want: nil},
		{name: "plain", text: "hey @octocat!", want: []string{"octocat"}},
		{name: "start of text", text: "@octocat please look", want: []string{"octocat"}},
		{name: "end of text", text: "ping @octocat", want: []string{"octocat"}},
		{name: "order of first appearance", text: "@b then @a then @b", want: []string{"b", "a"}},
		{name: "distinct case-insensitive, first spelling kept", text: "@MonaLisa and @monalisa and @MONALISA", want: []string{"MonaLisa"}},
		{name: "punctuation around", text: "(@a), @b: @c; @d? \"@e\" @f's [@g] @h!", want: []string{"a", "b", "c", "d", "e", "f", "g", "h"}},
		{name: "trailing dots are punctuation", text: "thanks @octocat. And @hubot...", want: []string{"octocat", "hubot"}},
		{name: "preceded by @", text: "@@octocat", want: []string{"octocat"}},
		{name: "hyphenated login", text: "@mona-lisa-2", want: []string{"mona-lisa-2"}},
		{name: "39 characters", text: "@" + strings.Repeat("a", 39), want: []string{strings.Repeat("a", 39)}},
		{name: "multi-line paragraph", text: "first line\n@a second line\r\n@b third", want: []string{"a", "b"}},
		{name: "CRLF line endings", text: "hi\r\n\r\n@a\r\n", want: []string{"a"}},

		// The sender.
		{name: "sender excluded", text: "hey @abeyuya!", sender: "abeyuya", want: nil},
		{name: "sender excluded case-insensitively", text: "@AbeYuya and @other", sender: "abeyuya", want: []string{"other"}},

		// Inline code spans.
		{name: "inline code", text: "run `@octocat` now", want: nil},
		{name: "inline code with text around", text: "`x @a y` but @b", want: []string{"b"}},
		{name: "double-backtick span", text: "``code with ` and @a`` then @b", want: []string{"b"}},
		{name: "triple-backtick span on one line", text: "```@a``` @b", want: []string{"b"}},
		{name: "span across lines of a paragraph", text: "`start\n@a end` @b", want: []string{"b"}},
		{name: "span does not cross a blank line", text: "`start\n\n@a end`", want: []string{"a"}},
		{name: "unmatched backtick is literal", text: "a ` b @a", want: []string{"a"}},
		{name: "unmatched longer run is literal", text: "`` @a ` @b", want: []string{"a", "b"}},
		{name: "escaped backtick opens no span", text: "\\` @a `", want: []string{"a"}},
		{name: "backslash is literal inside a span", text: "`x \\` @a `y`", want: []string{"a"}},
		{name: "escaped backtick then mention", text: "\\` @a \\`", want: []string{"a"}},

		// Code blocks.
		{name: "fenced block", text: "before @a\n```\n@b\n```\nafter @c", want: []string{"a", "c"}},
		{name: "fenced block with info string", text: "```go\n// @b\n```", want: nil},
		{name: "tilde fence", text: "~~~\n@b\n~~~\n@c", want: []string{"c"}},
		{name: "longer fence needs longer close", text: "````\n```\n@b\n````\n@c", want: []string{"c"}},
		{name: "indented fence", text: "- item\n    ```\n    @b\n    ```\n@c", want: []string{"c"}},
		{name: "unclosed fence runs to the end", text: "```\n@b\n@c", want: nil},
		{name: "indented code block", text: "text\n\n    @b in code\n\n@c", want: []string{"c"}},
		{name: "tab-indented code block", text: "\t@b", want: nil},
		{name: "indented line continuing a paragraph", text: "text\n    @a continues", want: []string{"a"}},

		// List items: a line indented to an item's content belongs to the
		// item, and only four more columns make an indented code block.
		{name: "list item paragraph after a blank line", text: "- item\n\n    @alice more", want: []string{"alice"}},
		{name: "ordered list item paragraph", text: "1. item\n\n    @alice", want: []string{"alice"}},
		{name: "wide ordered marker", text: "10) item\n\n     @alice", want: []string{"alice"}},
		{name: "four spaces after the marker", text: "-    item\n\n       @alice", want: []string{"alice"}},
		{name: "nested list item paragraph", text: "- a\n  - b\n\n      @alice", want: []string{"alice"}},
		{name: "back in the outer list item", text: "- a\n  - b\n\n  text\n\n    @alice", want: []string{"alice"}},
		{name: "lazy line keeps the list item", text: "- item\nlazy\n\n    @alice", want: []string{"alice"}},
		{name: "code block in a list item", text: "- item\n\n      @b code\n\n@c", want: []string{"c"}},
		{name: "code block first in a list item", text: "-     @b code\n- @c", want: []string{"c"}},
		{name: "unindented line ends the list", text: "- item\n\ntext\n\n    @b code", want: nil},
		{name: "thematic break is no list item", text: "* * *\n\n    @b code", want: nil},
		{name: "ordered item not at 1 does not interrupt a paragraph", text: "text\n2. item\n\n    @b code", want: nil},
		{name: "fence on a list item's line", text: "- ```\n  @b\n@c", want: []string{"c"}},
		{name: "fence ends with its list item", text: "1. run:\n   ```\n   @b\n@c\n   ```\n@d", want: []string{"c"}},
		{name: "quote in a list item", text: "- > @b quoted\n- @c", want: []string{"c"}},
		{name: "closing fence indented as code closes nothing", text: "```\n@a\n    ```\n@b", want: nil},
		{name: "closing fence indented as code in a list item", text: "- x\n\n   ```\n   @a\n      ```\n   @b", want: nil},
		{name: "list marker indented as code continues a paragraph", text: "-    x\n    - y\n\n      @alice", want: []string{"alice"}},
		{name: "thematic break indented as code continues a paragraph", text: "-    x\n    * * *\n\n      @alice", want: []string{"alice"}},
		{name: "fence indented as code is code", text: "    ```\n@c", want: []string{"c"}},

		// HTML comments and escapes.
		{name: "html comment", text: "<!-- cc @a -->@b", want: []string{"b"}},
		{name: "template comment across lines", text: "<!-- Describe the bug.\n  Ping @a if urgent. -->\nBroken, @b", want: []string{"b"}},
		{name: "comment across paragraphs", text: "<!-- start\n\n@a\n\nend --> @b", want: []string{"b"}},
		{name: "unclosed comment starting a line runs to the end", text: "@a\n<!-- @b\n\n@c", want: []string{"a"}},
		{name: "unclosed comment starting the text runs to the end", text: "<!-- @a\n\n@b", want: nil},
		{name: "unclosed comment indented three columns runs to the end", text: "x\n   <!-- @a\n\n@b", want: nil},
		{name: "unclosed comment starting a line in a list item", text: "- x\n  <!-- @a\n\n  @b", want: nil},
		{name: "unclosed comment starting a lazy line", text: "- x\n<!-- @a\n\n@b", want: nil},
		{name: "comment starting a line closed in a later paragraph", text: "x\n<!-- @a\n\n@b -->\n@c", want: []string{"c"}},
		// CommonMark reads a comment inside a paragraph only when it is
		// complete there: an unclosed <!-- is text.
		{name: "unclosed comment inside a paragraph is text", text: "@a <!-- @b\n\n@c", want: []string{"a", "b", "c"}},
		{name: "comment inside a paragraph closed in a later one is text", text: "x <!-- @a\n\nb --> @c", want: []string{"a", "c"}},
		{name: "comment inside a paragraph across lines", text: "x <!-- a\n@b --> @c", want: []string{"c"}},
		{name: "unclosed comments inside a paragraph", text: "x <!-- a <!-- @b", want: []string{"b"}},
		{name: "unclosed comment indented as code continues a paragraph", text: "text\n    <!-- @a", want: []string{"a"}},
		{name: "unclosed comment after a closed one", text: "x <!-- a --> <!-- @b", want: []string{"b"}},
		{name: "comment starting a line ends a code span's paragraph", text: "`x\n<!-- `@a", want: nil},
		{name: "comment starting a line ends a link's paragraph", text: "[@a\n<!-- b -->](y) @c", want: []string{"a", "c"}},
		{name: "pre starting a line ends a code span's paragraph", text: "`x\n<PRE>`@a</pre>", want: nil},
		// An HTML block ends with the line of its end, the rest of which is
		// HTML: there an unclosed comment runs on.
		{name: "unclosed comment on the last line of an HTML block", text: "<!-- a --> <!-- @b\n\n@c", want: nil},
		{name: "unclosed comment on the last line of a long HTML block", text: "<!--\n\n--> <!-- @a\n\n@b", want: nil},
		{name: "unclosed comment on the line of a pre block's end", text: "<pre>x</pre> <!-- @a\n\n@b", want: nil},
		{name: "comments on the last line of an HTML block", text: "<!-- a --> @b <!-- c --> @d\n<!-- @e", want: []string{"b", "d"}},
		// GitHub reads the rest of the line an HTML block ends on as HTML,
		// Markdown and all.
		{name: "backticks after a comment block's end are text", text: "<!-- a --> `@b`\n`@c`", want: []string{"b"}},
		{name: "backticks after a long comment block's end are text", text: "<!--\nx\n--> `@a` [@b](u)\n@c", want: []string{"a", "b", "c"}},
		{name: "backslash after a comment block's end is text", text: "<!-- a --> \\@b _@c_", want: []string{"b"}},
		{name: "backticks after a pre block's end are text", text: "<pre>@a</pre> `@b`", want: []string{"b"}},
		{name: "code span inside a paragraph's comment line is code", text: "x <!-- a --> `@b`", want: nil},
		{name: "comment in a code span is code", text: "`<!--` @a `-->`", want: []string{"a"}},
		{name: "empty comment <!-->", text: "<!--> @alice\n\n@bob", want: []string{"alice", "bob"}},
		{name: "empty comment <!--->", text: "x <!---> @alice", want: []string{"alice"}},
		{name: "empty comment then a comment", text: "<!--><!-- @b --> @c", want: []string{"c"}},
		{name: "less-than is no comment", text: "a <!- @a <b> @b", want: []string{"a", "b"}},

		// HTML code, pre and a elements, and link text: GitHub finds no
		// mention inside <code>, <pre> or <a>.
		{name: "html code element", text: "use <code>@a</code> or @b", want: []string{"b"}},
		{name: "html code element in capitals", text: "<CODE class=\"x\">@a\n@a2</Code > @b", want: []string{"b"}},
		{name: "html pre element", text: "<pre>\n@a\n</pre>\n@b", want: []string{"b"}},
		{name: "html pre block across a blank line", text: "<pre>\n@a\n\n@a2\n</pre>\n\n@b", want: []string{"b"}},
		{name: "html anchor", text: "see <a href=\"https://x\">@a</a> and @b", want: []string{"b"}},
		{name: "unclosed html element runs to the end of the paragraph", text: "x <code>@a\n@a2\n\n@b", want: []string{"b"}},
		{name: "unclosed pre in a list item runs to the end of the paragraph", text: "- <pre>@a\n\n@b", want: []string{"b"}},
		{name: "unclosed inline pre runs to the end of the paragraph", text: "x <pre>@a\n\n@b", want: []string{"b"}},
		{name: "other html element", text: "<abbr>@a</abbr> <b>@b</b>", want: []string{"a", "b"}},
		{name: "less-than and a without a tag", text: "x <a @a", want: []string{"a"}},
		{name: "inline link text", text: "[@a](https://x) @b", want: []string{"b"}},
		{name: "inline link destination", text: "[x](@a) @b", want: []string{"b"}},
		{name: "inline link title", text: "[x](https://x \"@a\") @b", want: []string{"b"}},
		{name: "inline link with a parenthesized title", text: "[x](https://x (@a)) @b", want: []string{"b"}},
		{name: "reference link text", text: "[see @a][ref] @b\n\n[ref]: https://x", want: []string{"b"}},
		{name: "collapsed reference link", text: "[@a][] @b\n\n[@a]: https://x", want: []string{"b"}},
		{name: "reference label with a bracket is no reference", text: "[r][x @a [y]\n\n[r]: /u", want: []string{"a"}},
		{name: "reference with no definition is text", text: "[see @a][ref] @b", want: []string{"a", "b"}},
		{name: "link reference definition", text: "[@a]: https://x\n@b", want: []string{"b"}},
		{name: "link reference definitions one after another", text: "[r]: /u\n[@a]: /v\n@b", want: []string{"b"}},
		{name: "text after a link reference definition continues its paragraph", text: "[r]: /u\n    @b", want: []string{"b"}},
		{name: "link reference definition only at a paragraph start", text: "x\n[@a]: https://x", want: []string{"a"}},
		{name: "image alt text", text: "![@a](shot.png) @b", want: []string{"b"}},
		{name: "link across lines", text: "[cc\n@a](https://x)\n@b", want: []string{"b"}},
		{name: "brackets without a link", text: "[@a] (@b) [@c]: x", want: []string{"a", "b", "c"}},
		{name: "task list item", text: "- [ ] @a do this", want: []string{"a"}},
		{name: "no link destination with blanks", text: "[WIP](still on @a's part)", want: []string{"a"}},
		{name: "unclosed link parenthesis", text: "[x](@a", want: []string{"a"}},
		{name: "escaped bracket ends no link text", text: "[@a\\](x) @b](y) @c", want: []string{"c"}},
		{name: "escaped at", text: "\\@a but @b", want: []string{"b"}},
		{name: "escaped backslash then at", text: "\\\\@a", want: []string{"a"}},
		{name: "escaped less-than opens no comment", text: "\\<!-- @a -->", want: []string{"a"}},

		// HTML blocks of type 6: a line starting with <div>, </details>,
		// <hr/> and the like starts raw HTML, up to a blank line, where
		// GitHub links mentions outside comments and code, pre and a
		// elements, and nothing is Markdown.
		{name: "html block: backticks are text", text: "<div>\n`@alice`\n</div>", want: []string{"alice"}},
		{name: "html block ends at a blank line", text: "<details><summary>@bob</summary>\n\n```\n@carol\n```\n</details>", want: []string{"bob"}},
		{name: "html block: indentation is no code", text: "<p>\n    @dave\n</p>", want: []string{"dave"}},
		{name: "html block: brackets make no link", text: "<div>[@erin](https://x)</div>", want: []string{"erin"}},
		{name: "html block: underscores are word characters", text: "<div>_@frank_</div>", want: nil},
		{name: "html block: code element", text: "<div><code>@gus</code> @hal</div>", want: []string{"hal"}},
		{name: "html block interrupts a paragraph", text: "text\n<div>\n`@ivy`", want: []string{"ivy"}},
		{name: "html block needs a whole tag name", text: "<divx>`@jo`</divx>", want: nil},
		{name: "html block from an end tag", text: "</div>\n`@alice`", want: []string{"alice"}},
		{name: "html block tag in any case, with attributes", text: "<DIV class=\"x\">`@alice`", want: []string{"alice"}},
		{name: "html block tag then a tab", text: "<div\tclass=x>`@alice`", want: []string{"alice"}},
		{name: "html block from a self-closing tag", text: "<hr/>`@alice`", want: []string{"alice"}},
		{name: "html block tag at the end of its line", text: "<table\n  class=\"x\">`@alice`", want: []string{"alice"}},
		{name: "html block heading tag", text: "<h2>`@alice`</h2>", want: []string{"alice"}},
		{name: "tag name running on is no html block", text: "<div-x>`@a` <p.x>", want: nil},
		{name: "space after less-than is no html block", text: "< div>`@a`", want: nil},
		{name: "inline tag is no html block", text: "<span>`@a`</span>", want: nil},
		{name: "html block tag inside a line is inline", text: "x <div>`@a`</div>", want: nil},
		{name: "html block indented three columns", text: "   <div>`@alice`", want: []string{"alice"}},
		{name: "html block tag indented as code is code", text: "    <div>`@a`", want: nil},
		{name: "html block tag indented as code continues a paragraph", text: "text\n    <div>`@a`", want: nil},
		{name: "html block: backslash escapes nothing", text: "<div>\\@alice \\`@bob`</div>", want: []string{"alice", "bob"}},
		{name: "html block: backslash ends a login", text: "<div>@alice\\_x</div>", want: []string{"alice"}},
		{name: "html block: underscore after a login", text: "<div>@alice_ @bob_x_</div>", want: nil},
		{name: "html block: underscore closing nothing", text: "<div>_hi_@alice __@bob__</div>", want: nil},
		{name: "html block: managed user", text: "<div>@mona_acme</div>", want: []string{"mona_acme"}},
		{name: "html block: e-mail address", text: "<div>a@b.com x/@c</div>", want: nil},
		{name: "html block: sender excluded", text: "<div>@a @b</div>", sender: "A", want: []string{"b"}},
		// A line starting with '>' in an HTML block is HTML text, whose
		// mentions GitHub links; the quote rule holds outside them.
		{name: "html block: greater-than starts no quote", text: "<div>\n> @alice\n</div>", want: []string{"alice"}},
		{name: "quoted html block", text: "> <div>\n> @a", want: nil},
		{name: "html block: fence is text", text: "<div>\n```\n@alice\n```\n</div>\n\n@bob", want: []string{"alice", "bob"}},
		{name: "html block: link reference definition is text", text: "<div>\n[@alice]: https://x\n</div>", want: []string{"alice"}},
		{name: "html block after a link reference definition", text: "[r]: /u\n<div>`@alice`", want: []string{"alice"}},
		{name: "html block ends at a line of blanks", text: "<div>\n   \n`@a`\n</div>", want: nil},
		{name: "html block: comments", text: "<div><!-- @a --> @b\n<!-- @c\n@d -->\n@e</div>", want: []string{"b", "e"}},
		// An unclosed comment in an HTML block is raw HTML: it runs on
		// past the block, where one inside a paragraph would be text.
		{name: "html block: unclosed comment runs on", text: "<div>x <!-- @a\n\n@b", want: nil},
		{name: "html block: elements", text: "<div>\n<a href=\"x\">@a</a> <pre>@b</pre> @c\n</div>", want: []string{"c"}},
		{name: "html block: unclosed element runs to its end", text: "<div><code>@a\n@b\n\n@c", want: []string{"c"}},
		{name: "html block: pre block across a blank line", text: "<div>\n<pre>\n@a\n\n@b\n</pre>\n</div>\n\n@c", want: []string{"c"}},
		{name: "html block in a list item", text: "- <div>\n  `@alice`\n  > @bob", want: []string{"alice", "bob"}},
		{name: "html block in a list item ends with it", text: "- <div>\n`@a`\n> @b", want: nil},
		{name: "html block in a list item: indentation is no code", text: "- x\n\n  <div>\n      `@alice`", want: []string{"alice"}},
		{name: "html block is no lazy line", text: "- x\n<div>\n`@alice`", want: []string{"alice"}},
		{name: "html block tag after a list marker", text: "1. <p>_@a_\n2. <p>`@bob`", want: []string{"bob"}},

		// Quotes.
		{name: "quoted line", text: "> @a wrote this\n\n@b replies", want: []string{"b"}},
		{name: "quoted line right before new text", text: "> @a wrote this\n@b replies", want: []string{"b"}},
		{name: "indented quote", text: "  > @a", want: nil},
		{name: "nested quote", text: ">> @a", want: nil},
		{name: "greater-than inside a line", text: "x > @a", want: []string{"a"}},

		// E-mail addresses and other word-attached '@'.
		{name: "e-mail address", text: "mail a@b.com", want: nil},
		{name: "e-mail without dot", text: "foo@bar", want: nil},
		{name: "e-mail with underscore", text: "first_last@example.org", want: nil},
		{name: "e-mail with unicode local part", text: "josé@example.org", want: nil},
		{name: "after a slash", text: "https://medium.com/@writer", want: nil},
		// A backtick is no word character: "`code`@alice" renders a text
		// that starts with @alice, "`@alice" (unmatched) one with `@alice.
		{name: "right after a code span", text: "`code`@alice", want: []string{"alice"}},
		{name: "right after a double-backtick span", text: "``a ` b``@alice", want: []string{"alice"}},
		{name: "after an unmatched backtick", text: "`@alice", want: []string{"alice"}},
		{name: "after an unmatched backtick run", text: "x ``@alice `", want: []string{"alice"}},
		{name: "after an escaped backtick", text: "\\`@alice", want: []string{"alice"}},
		{name: "after a backtick in a code span", text: "`` `@alice ``", want: nil},
		{name: "right after an opening backtick", text: "`@alice`", want: nil},
		{name: "after a code span and a word", text: "`code`foo@alice", want: nil},
		{name: "word before at", text: "foo@alice", want: nil},
		{name: "login running into a domain", text: "@example.com", want: nil},
		{name: "managed user", text: "cc @mona_acme, @Hubot_Octo1.", want: []string{"mona_acme", "Hubot_Octo1"}},
		{name: "login running into a second underscore", text: "@foo_bar_baz", want: nil},
		{name: "login running into a trailing underscore", text: "@foo_ x", want: nil},
		{name: "managed user with a bad handle", text: "@-foo_bar", want: nil},

		// Emphasis with underscores: _@alice_ renders as <em>@alice</em>.
		{name: "underscore emphasis", text: "_@alice_", want: []string{"alice"}},
		{name: "underscore strong emphasis", text: "__@alice__ please", want: []string{"alice"}},
		{name: "underscore emphasis after punctuation", text: "(_@alice_), ok", want: []string{"alice"}},
		{name: "underscore emphasis after unicode punctuation", text: "「_@alice_」", want: []string{"alice"}},
		{name: "underscore emphasis around a managed user", text: "_@mona_acme_", want: []string{"mona_acme"}},
		{name: "underscore emphasis closed after a login", text: "_cc @alice_ and @bob", want: []string{"alice", "bob"}},
		{name: "underscore emphasis closed after trailing dots", text: "_thanks @alice._", want: []string{"alice"}},
		{name: "underscore emphasis opened after trailing dots", text: "thanks @alice._great_", want: []string{"alice"}},
		{name: "underscore emphasis opened earlier", text: "_@alice and @bob_", want: []string{"alice", "bob"}},
		{name: "underscore emphasis closed right before a mention", text: "_hi_@alice", want: []string{"alice"}},
		{name: "underscore closing nothing before a mention", text: "x hi_@alice_", want: nil},
		// An intraword '_' is no delimiter, nor is one that nothing closes
		// or opens: GitHub leaves it literal, a word character.
		{name: "underscore inside a word", text: "foo_@bar_", want: nil},
		{name: "underscore after unicode letter", text: "さ_@alice_", want: nil},
		{name: "unclosed underscore", text: "_@alice", want: nil},
		{name: "escaped underscore", text: "\\_@alice_", want: nil},
		{name: "escaped underscore opens no emphasis", text: "\\_!_@bob", want: nil},
		{name: "escaped underscore after a login", text: "_@alice\\_ x_", want: nil},
		// GitHub's pattern ends a login, and may start one, at anything but
		// an ASCII word character ([^0-9a-zA-Z_.]).
		{name: "login running into unicode", text: "@fooé", want: []string{"foo"}},
		{name: "login before Japanese", text: "@aliceさん、見てください", want: []string{"alice"}},
		{name: "login after Japanese", text: "さん@alice", want: []string{"alice"}},
		{name: "managed user login over 39 in all", text: "@" + strings.Repeat("0", 38) + "_0", want: nil},

		// Teams.
		{name: "team", text: "@octo-org/reviewers please", want: nil},
		{name: "team and person", text: "@octo-org/core and @octo-org", want: []string{"octo-org"}},

		// Login syntax.
		{name: "40 characters", text: "@" + strings.Repeat("a", 40), want: nil},
		{name: "leading hyphen", text: "@-octocat", want: nil},
		{name: "trailing hyphen", text: "@octocat- hi", want: nil},
		{name: "double hyphen", text: "@octo--cat", want: nil},
		{name: "bare at", text: "@ alone and @", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Logins(tc.text, tc.sender)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Logins(%q, %q) = %q, want %q", tc.text, tc.sender, got, tc.want)
			}
		})
	}
}

// TestMentionsCorpus checks the corpus comment in which the commenter
// mentions themself: the body mentions abeyuya, who is the sender.
func TestMentionsCorpus(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.Corpus(t), "github", "issue_comment.created.mention.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Comment struct{ Body string }  `json:"comment"`
		Sender  struct{ Login string } `json:"sender"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if got := Logins(p.Comment.Body, ""); !slices.Equal(got, []string{"abeyuya"}) {
		t.Errorf("without a sender: %q, want [abeyuya]", got)
	}
	if got := Logins(p.Comment.Body, p.Sender.Login); got != nil {
		t.Errorf("with sender %q: %q, want none", p.Sender.Login, got)
	}
}

// TestMentionsPathological runs inputs that would make a naive code-span
// matcher quadratic: many backtick runs of distinct lengths, none closed.
func TestMentionsPathological(t *testing.T) {
	var b strings.Builder
	for n := 1; n <= 2000; n++ {
		b.WriteString(strings.Repeat("`", n))
		b.WriteString(" @a ")
	}
	if got := Logins(b.String(), ""); !slices.Equal(got, []string{"a"}) {
		t.Errorf("distinct unclosed runs: %q, want [a]", got)
	}
	if got := Logins(strings.Repeat("` ", 50000)+"@x", ""); !slices.Equal(got, []string{"x"}) {
		t.Errorf("many closed spans: %q, want [x]", got)
	}
	// Openers of links, elements and emphasis without closers.
	for _, tc := range []struct{ unit, tail string }{
		{"[", "@x"},
		{"[a](", "@x"},
		{"[a][", "@x"},
		{"[a](b \"", strings.Repeat(" ", 50000) + ") @x"},
		{"[a](b (", strings.Repeat(" ", 50000) + ") @x"},
		{"[a](b c ", strings.Repeat(" ", 50000) + ") @x"},
		{"[a](b", strings.Repeat(" ", 50000) + "c) @x"},
		{"<a ", "@x"},
		{"<code ", "@x"},
		{"x <!-- ", "@x"},
		{"_@a ", "@x"},
		{"<div>\n", "@x"},
		{"x\n<div> <a ", "\n\n@x"},
		{"<div>_@a_ ", "@x"},
		{"@a_ ", "@x"},
	} {
		text := strings.Repeat(tc.unit, 200000) + tc.tail
		start := time.Now()
		got := Logins(text, "a")
		// Linear work takes milliseconds; quadratic work on 200,000 units
		// takes hours. The bound sits far from both, so a loaded machine
		// running -race does not fail it and a quadratic scan still does.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%q repeated: %v", tc.unit, d)
		}
		if !slices.Equal(got, []string{"x"}) {
			t.Errorf("%q repeated: %q, want [x]", tc.unit, got)
		}
	}
}

// TestMentionsMany checks distinctness beyond the one-by-one comparison.
func TestMentionsMany(t *testing.T) {
	var b strings.Builder
	var want []string
	for i := range 40 {
		login := fmt.Sprintf("User%d", i)
		want = append(want, login)
		fmt.Fprintf(&b, "@%s @%s @sender ", login, strings.ToLower(login))
	}
	b.WriteString("@user0 @USER39")
	if got := Logins(b.String(), "Sender"); !slices.Equal(got, want) {
		t.Errorf("mentions = %q, want %q", got, want)
	}
}

// mentionBenchBody is a realistic 2 KB pull request description: a
// template comment, a list, code spans, links, a fenced block and a few
// mentions.
var mentionBenchBody = func() string {
	const body = `<!-- Thanks for sending a pull request! Please fill in the sections below.
If this fixes an issue, write "Fixes #1234". Ping @maintainers only if urgent. -->

## What

This changes the retry loop in ` + "`dispatch.Run`" + ` so that a failed delivery is
retried with backoff instead of immediately. See [the design doc](https://example.com/docs/retry)
and the discussion in #4521, where @octocat and @mona-lisa agreed on the approach.

## Why

- Deliveries to slow endpoints were hammered (see ` + "`@retry`" + ` in the logs).
- The ` + "`maxAttempts`" + ` setting was ignored when ` + "`backoff`" + ` was zero.
- Closes [#4499][issue], reported by @hubot.

  Also fixes the flaky test in ` + "`dispatch_test.go`" + `.

## How to test

1. Start NATS locally.
2. Run the dispatcher with ` + "`--retry-backoff 1s`" + `:

   ` + "```sh" + `
   triggerd --retry-backoff 1s --log-format console
   # cc @not-a-mention in code
   ` + "```" + `

3. Point a webhook at https://httpbin.org/status/503 and watch the log.

> @old-reviewer wrote: can we keep the old behaviour behind a flag?

Yes: ` + "`--retry-backoff 0`" + ` keeps it. Thanks @old-reviewer, and cc @Security_acme for
the review. Mail me at someone@example.com with questions.

[issue]: https://github.com/triggerd/triggerd/issues/4499
`
	var b strings.Builder
	for b.Len() < 2048 {
		b.WriteString(body)
		b.WriteString("\n")
	}
	return b.String()
}()

// BenchmarkMentions scans a realistic 2 KB pull request description.
func BenchmarkMentions(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(mentionBenchBody)))
	for b.Loop() {
		Logins(mentionBenchBody, "sender")
	}
}
