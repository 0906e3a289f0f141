package poll

import "github.com/triggerd/triggerd/connectors/codehost"

// HTMLURL and SubjectNumber expose the notification helpers to the tests.
var HTMLURL = htmlURL

func SubjectNumber(typ, url string) int64 {
	return subjectNumber(codehost.NotificationSubject{Type: typ, URL: url})
}

// CursorKey exposes the key an account's cursor for kind is stored under.
var CursorKey = cursorKey
