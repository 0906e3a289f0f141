// Package provhttp holds the small HTTP helpers the connector packages
// share: a client that does not follow redirects, bounded response reads,
// URL checks, and sanitising of provider error text so that no token or
// code can leak through an error.
package provhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// MaxBody bounds how much of a response is read.
const MaxBody = 1 << 20

// DefaultClient times out after 30 s and does not follow redirects.
func DefaultClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Do sends req and reads the bounded response body.
func Do(c *http.Client, req *http.Request) (int, http.Header, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read response: %w", err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// CheckURL accepts absolute http and https URLs.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an absolute http or https URL")
	}
	return nil
}

// ExtraString reads a string field of the token response.
func ExtraString(tok *oauth2.Token, key string) string {
	if s, ok := tok.Extra(key).(string); ok {
		return s
	}
	return ""
}

// SplitScopes splits a comma- or space-separated scope list.
func SplitScopes(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	if len(f) == 0 {
		return nil
	}
	return f
}

// ErrorCode keeps a provider's error code printable: codes are short
// words of letters, digits, '_', '-' and '.'; anything else is replaced.
func ErrorCode(s string) string {
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

// Clip bounds a server-supplied message.
func Clip(s string) string {
	const limit = 200
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return s
}

// GetJSON GETs url with token as a bearer credential and decodes a 200
// answer into v; any other status becomes apiError(status, body), so each
// provider keeps its own error shape.
func GetJSON(ctx context.Context, c *http.Client, url, token string, v any, apiError func(status int, body []byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	status, _, body, err := Do(c, req)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return apiError(status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}
