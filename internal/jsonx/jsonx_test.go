package jsonx

import (
	"encoding/json"
	"testing"
)

// A string appended by AppendString decodes to what encoding/json's own
// encoding of it decodes to.
func checkRoundTrip(t *testing.T, s string) {
	t.Helper()
	enc := AppendString([]byte("x"), s)[1:]
	var got, want string
	if err := json.Unmarshal(enc, &got); err != nil {
		t.Fatalf("AppendString(%q) = %s, not a JSON string: %v", s, enc, err)
	}
	ref, _ := json.Marshal(s)
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("AppendString(%q) decodes to %q; encoding/json's to %q", s, got, want)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and backslash \`, "tab\tnewline\nreturn\r",
		"\x00\x01\x1f\x7f", "<script>&amp;", "naïve ☃ \u2028 \u2029",
		"invalid \xff\xfe utf-8", "cut rune \xe2\x98",
	} {
		checkRoundTrip(t, s)
	}
	if got := string(AppendString(nil, "a\"b")); got != `"a\"b"` {
		t.Fatalf(`AppendString("a\"b") = %s`, got)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\\n", "\xff", "☃"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkRoundTrip(t, s) })
}
