package triggers

import (
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
)

// FormPayload extracts the JSON of a form-encoded code-hosting delivery
// from its "payload" field. Its errors say whether the body is not URL
// encoding at all or lacks the field.
func FormPayload(body []byte) ([]byte, error) {
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		// url's errors show at most the bad escape ("%ZZ") of the body.
		return nil, fmt.Errorf("the form-encoded body is not valid URL encoding (%v): "+
			"send application/x-www-form-urlencoded with the JSON, URL-escaped, in the form field \"payload\", or set the webhook's content type to application/json", err)
	}
	payload := vals.Get("payload")
	if payload == "" {
		return nil, errors.New("a form-encoded delivery must carry the JSON in the form field \"payload\"")
	}
	return []byte(payload), nil
}

// Payload returns the webhook JSON of an archived delivery: the
// body itself, or for a form-encoded code-hosting delivery its "payload"
// field.
func (c Capture) Payload() ([]byte, error) {
	for k, vs := range c.Header {
		if strings.EqualFold(k, "Content-Type") && len(vs) > 0 {
			if mt, _, _ := mime.ParseMediaType(vs[0]); mt == "application/x-www-form-urlencoded" {
				return FormPayload(c.Body)
			}
		}
	}
	return c.Body, nil
}
