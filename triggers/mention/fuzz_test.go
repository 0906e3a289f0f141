package mention

import (
	"strings"
	"testing"
)

// FuzzMentions checks that Logins never panics and returns distinct,
// valid logins other than the sender.
func FuzzMentions(f *testing.F) {
	for _, s := range []string{"hey @a!", "`@a` @b", "```\n@a\n```\n@b", "> @a\n@b", "a@b.com @c/d @e-", "@x @X", "<!-- @a\n\n--> \\@b @c_d", "- x\n<div>\n`@a` _@b_ \\@c\n> @d <pre>\n\n    @e"} {
		f.Add(s, "b")
	}
	f.Fuzz(func(t *testing.T, text, sender string) {
		got := Logins(text, sender)
		for i, login := range got {
			if !validLogin(login) || strings.EqualFold(login, sender) {
				t.Fatalf("Logins(%q, %q) = %q: bad login %q", text, sender, got, login)
			}
			for _, other := range got[:i] {
				if strings.EqualFold(login, other) {
					t.Fatalf("Logins(%q, %q) = %q: duplicate", text, sender, got)
				}
			}
			if !strings.Contains(text, "@"+login) {
				t.Fatalf("Logins(%q, %q) = %q: %q not in text", text, sender, got, login)
			}
		}
	})
}
