package match

import (
	"strconv"
	"testing"
)

// BenchmarkMatch matches an issues.opened-like event against indexes of
// growing size; ns/op should stay roughly flat.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 1000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			x := bigIndex(b, n)
			ev := issueEvent("org-0/repo-0", "bug")
			b.ReportAllocs()
			for b.Loop() {
				x.Match(ev)
			}
		})
	}
}
