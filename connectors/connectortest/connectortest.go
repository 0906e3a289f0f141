// Package connectortest holds the helpers the connectors' tests share:
// checking a step's typed error, that an error leaks no secret, and
// reading JSON the way the step schemas are validated. Only tests import
// it.
package connectortest

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/triggerd/triggerd/connectors"
)

// NoLeak fails the test if err's message contains any of secrets.
func NoLeak(t testing.TB, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q leaks a secret", err)
		}
	}
}

// WantCode fails the test unless err is a *connectors.Error with code,
// and returns it.
func WantCode(t testing.TB, err error, code connectors.ErrorCode) *connectors.Error {
	t.Helper()
	var ce *connectors.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *connectors.Error %s", err, err, code)
	}
	if ce.Code != code {
		t.Fatalf("code = %s (%v), want %s", ce.Code, ce, code)
	}
	return ce
}

// JSON decodes s as the schema validator does (numbers kept exact), or
// fails the test.
func JSON(t testing.TB, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return v
}
