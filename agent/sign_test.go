package agent_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/agent"
)

// The test vector published with the Standard Webhooks specification and
// its reference libraries.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func headers(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set(agent.HeaderID, id)
	h.Set(agent.HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(agent.HeaderSignature, sig)
	return h
}

func TestSignStandardWebhooksVector(t *testing.T) {
	for _, secret := range []string{vectorSecret, strings.TrimPrefix(vectorSecret, agent.SecretPrefix)} {
		got, err := agent.Sign(secret, vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
		if err != nil {
			t.Fatal(err)
		}
		if got != vectorSignature {
			t.Errorf("Sign with %q = %s, want %s", secret, got, vectorSignature)
		}
	}
	// Sub-second parts of the time are not signed.
	got, err := agent.Sign(vectorSecret, vectorID, time.Unix(vectorTimestamp, 999_999_999), []byte(vectorBody))
	if err != nil || got != vectorSignature {
		t.Errorf("Sign with nanoseconds = %s, %v", got, err)
	}
}

func TestVerifyStandardWebhooksVector(t *testing.T) {
	h := headers(vectorID, vectorTimestamp, vectorSignature)
	signed := time.Unix(vectorTimestamp, 0)
	for _, now := range []time.Time{signed, signed.Add(agent.DefaultTolerance), signed.Add(-agent.DefaultTolerance)} {
		if err := agent.Verify([]string{vectorSecret}, h, []byte(vectorBody), now, 0); err != nil {
			t.Errorf("Verify at %s: %v", now.Sub(signed), err)
		}
	}
	for _, now := range []time.Time{signed.Add(agent.DefaultTolerance + time.Second), signed.Add(-agent.DefaultTolerance - time.Second)} {
		if err := agent.Verify([]string{vectorSecret}, h, []byte(vectorBody), now, 0); !errors.Is(err, agent.ErrTimestamp) {
			t.Errorf("Verify at %s = %v, want ErrTimestamp", now.Sub(signed), err)
		}
	}
}

func TestVerify(t *testing.T) {
	secret, err := agent.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, err := agent.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"run_1"}`)
	sign := func(secret, id string, ts time.Time, body []byte) string {
		t.Helper()
		s, err := agent.Sign(secret, id, ts, body)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := sign(secret, "run_1", now, body)
	byOther := sign(other, "run_1", now, body)

	tests := []struct {
		name      string
		secrets   []string
		header    http.Header
		body      string
		tolerance time.Duration
		want      error
	}{
		{"valid", []string{secret}, headers("run_1", now.Unix(), good), string(body), 0, nil},
		{"body tampered", []string{secret}, headers("run_1", now.Unix(), good), `{"id":"run_2"}`, 0, agent.ErrSignature},
		{"body extended", []string{secret}, headers("run_1", now.Unix(), good), string(body) + " ", 0, agent.ErrSignature},
		{"id tampered", []string{secret}, headers("run_2", now.Unix(), good), string(body), 0, agent.ErrSignature},
		{"timestamp tampered", []string{secret}, headers("run_1", now.Unix()+1, good), string(body), 0, agent.ErrSignature},
		{"wrong secret", []string{other}, headers("run_1", now.Unix(), good), string(body), 0, agent.ErrSignature},
		{"signature truncated", []string{secret}, headers("run_1", now.Unix(), good[:len(good)-4]), string(body), 0, agent.ErrSignature},
		{"unknown version", []string{secret}, headers("run_1", now.Unix(), "v2,"+strings.TrimPrefix(good, "v1,")), string(body), 0, agent.ErrSignature},
		{"no version", []string{secret}, headers("run_1", now.Unix(), strings.TrimPrefix(good, "v1,")), string(body), 0, agent.ErrSignature},
		{"not base64", []string{secret}, headers("run_1", now.Unix(), "v1,!!!"), string(body), 0, agent.ErrSignature},
		{"sender rotating: several signatures", []string{secret},
			headers("run_1", now.Unix(), "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,xyz "+byOther+"  "+good), string(body), 0, nil},
		{"sender rotating: only others", []string{secret},
			headers("run_1", now.Unix(), byOther+" v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), string(body), 0, agent.ErrSignature},
		{"receiver rotating: old secret signed", []string{other, secret}, headers("run_1", now.Unix(), good), string(body), 0, nil},
		{"receiver rotating: new secret signed", []string{other, secret}, headers("run_1", now.Unix(), byOther), string(body), 0, nil},
		{"missing id", []string{secret}, headers("", now.Unix(), good), string(body), 0, agent.ErrMissingHeaders},
		{"missing signature", []string{secret}, headers("run_1", now.Unix(), ""), string(body), 0, agent.ErrMissingHeaders},
		{"missing timestamp", []string{secret}, func() http.Header {
			h := headers("run_1", now.Unix(), good)
			h.Del(agent.HeaderTimestamp)
			return h
		}(), string(body), 0, agent.ErrMissingHeaders},
		{"no headers", []string{secret}, http.Header{}, string(body), 0, agent.ErrMissingHeaders},
		{"timestamp not a number", []string{secret}, func() http.Header {
			h := headers("run_1", now.Unix(), good)
			h.Set(agent.HeaderTimestamp, "2023-11-14T22:13:20Z")
			return h
		}(), string(body), 0, agent.ErrTimestamp},
		{"too old", []string{secret}, headers("run_1", now.Unix()-301, sign(secret, "run_1", now.Add(-301*time.Second), body)), string(body), 0, agent.ErrTimestamp},
		{"too new", []string{secret}, headers("run_1", now.Unix()+301, sign(secret, "run_1", now.Add(301*time.Second), body)), string(body), 0, agent.ErrTimestamp},
		{"old but within a custom tolerance", []string{secret}, headers("run_1", now.Unix()-301, sign(secret, "run_1", now.Add(-301*time.Second), body)), string(body), 10 * time.Minute, nil},
		{"recent but outside a custom tolerance", []string{secret}, headers("run_1", now.Unix()-2, sign(secret, "run_1", now.Add(-2*time.Second), body)), string(body), time.Second, agent.ErrTimestamp},
		{"no secret", nil, headers("run_1", now.Unix(), good), string(body), 0, agent.ErrSecret},
		{"invalid secret", []string{secret, "whsec_%%%"}, headers("run_1", now.Unix(), good), string(body), 0, agent.ErrSecret},
		{"empty secret", []string{"whsec_"}, headers("run_1", now.Unix(), good), string(body), 0, agent.ErrSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := agent.Verify(tt.secrets, tt.header, []byte(tt.body), now, tt.tolerance)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyReadsEverySignatureHeader(t *testing.T) {
	secret, _ := agent.NewSecret()
	now := time.Now()
	sig, err := agent.Sign(secret, "run_1", now, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	h := headers("run_1", now.Unix(), "v1,AAAA")
	h.Add(agent.HeaderSignature, sig)
	if err := agent.Verify([]string{secret}, h, []byte("x"), now, 0); err != nil {
		t.Fatal(err)
	}
}

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		s, err := agent.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		enc, ok := strings.CutPrefix(s, agent.SecretPrefix)
		if !ok {
			t.Fatalf("secret %q lacks %q", s, agent.SecretPrefix)
		}
		key, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatal(err)
		}
		if len(key) < 24 {
			t.Fatalf("key of %d bytes, want 24 or more", len(key))
		}
		if seen[s] {
			t.Fatalf("secret %q made twice", s)
		}
		seen[s] = true
	}
}

func TestSignRefusesInvalidSecretWithoutEchoingIt(t *testing.T) {
	for _, secret := range []string{"", "whsec_", "whsec_not-base64-at-all!", "hunter2hunter2"} {
		_, err := agent.Sign(secret, "id", time.Now(), nil)
		if !errors.Is(err, agent.ErrSecret) {
			t.Errorf("Sign(%q) = %v, want ErrSecret", secret, err)
			continue
		}
		if rest := strings.TrimPrefix(secret, agent.SecretPrefix); rest != "" && strings.Contains(err.Error(), rest) {
			t.Errorf("error %q contains the secret", err)
		}
	}
}
