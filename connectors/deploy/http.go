package deploy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/oauth2"
)

// maxBody bounds how much of a response is read.
const maxBody = 1 << 20

// defaultClient times out after 30 s and does not follow redirects.
func defaultClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// do sends req and reads the bounded response body.
func do(c *http.Client, req *http.Request) (int, http.Header, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read response: %w", err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// checkURL accepts absolute http and https URLs.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an absolute http or https URL")
	}
	return nil
}

// extraString reads a string field of the token response.
func extraString(tok *oauth2.Token, key string) string {
	if s, ok := tok.Extra(key).(string); ok {
		return s
	}
	return ""
}

// errorCode keeps a provider's error code printable: codes are short
// words of letters, digits, '_', '-' and '.'; anything else is replaced.
func errorCode(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > 64 {
		return "an unrecognised error"
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return "an unrecognised error"
		}
	}
	return s
}

// clip bounds a server-supplied message.
func clip(s string) string {
	const limit = 200
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return s
}
