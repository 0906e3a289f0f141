// Package jsonx appends JSON strings to byte slices, for the few messages
// triggerd encodes by hand because they are written for every delivery (the
// delivery index, the webhook answer): reflection-based encoding cost more
// there than the rest of the message.
package jsonx

import (
	"encoding/json"
	"unicode/utf8"
)

// AppendString appends s as a JSON string. Quotes, backslashes and control
// characters are escaped; other bytes are copied. A string that is not
// valid UTF-8 is left to encoding/json, which replaces the invalid bytes as
// decoders expect.
func AppendString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		b, _ := json.Marshal(s)
		return append(dst, b...)
	}
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
