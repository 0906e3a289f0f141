package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/ingest"
)

// httpReadTimeout is the test server's --http-read-timeout, which bounds
// a whole request, body included.
const httpReadTimeout = 3 * time.Second

// TestSlowBodyIsCutOff sends a delivery's headers at once, then drips its
// body a byte at a time (slowloris on the body, reliability catalogue #3):
// the server must give up on it once the read timeout passes, while a valid
// delivery sent meanwhile is answered promptly.
func TestSlowBodyIsCutOff(t *testing.T) {
	const secret = "slow-body-secret"
	p := startTriggerd(t, []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_DATA_DIR=" + t.TempDir(),
		"TRIGGERD_HTTP_READ_TIMEOUT=" + httpReadTimeout.String()})
	addr := strings.TrimPrefix(p.httpURL, "http://")

	// A signed, valid body, padded so that dripping it takes far longer
	// than the bound below.
	body := append(issueBody(1), bytes.Repeat([]byte(" "), 2000)...)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST /webhooks/codehost HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: issues\r\n" +
		"X-GitHub-Delivery: slow-body-1\r\nX-Hub-Signature-256: " + ingest.CodeHostScheme.Sign([]byte(secret), body) + "\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))
	start := time.Now()
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel and conn.Close: deferred calls run last-in, first-out
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := range body {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := conn.Write(body[i : i+1]); err != nil {
				return // the server hung up
			}
		}
	}()

	// Other senders are not held up by the slow one.
	for i := range 3 {
		t0 := time.Now()
		r, err := post(p.httpURL, secret, delivery{event: "issues", id: fmt.Sprintf("beside-slow-body-%d", i), body: issueBody(2 + i)})
		if err != nil || r.status != http.StatusAccepted {
			t.Fatalf("delivery beside a slow body: %v %d", err, r.status)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("a delivery took %s while a slow body was dripping", d)
		}
	}

	// The server answers an error and hangs up, or just hangs up, once
	// the read timeout has passed; the bound leaves it some slack.
	bound := httpReadTimeout + 10*time.Second
	if err := conn.SetReadDeadline(start.Add(bound)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	elapsed := time.Since(start)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the server still read the dripping body %s after its headers: no read timeout cut it off", elapsed)
	case err == nil:
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("the slow body got %d after %s; want 400 or 408", resp.StatusCode, elapsed)
		}
		// And the connection is closed behind the answer.
		if _, err := conn.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("the connection stayed open after the slow body was refused (%v)", err)
		}
	}
	// Otherwise the server hung up (EOF, reset): cut off.
	t.Logf("slow body cut off after %s (%v)", elapsed, err)
	if elapsed < httpReadTimeout-time.Second {
		t.Errorf("the slow body was cut off after %s, before the read timeout (%s): something else ended it", elapsed, httpReadTimeout)
	}

	// And deliveries still go through afterwards.
	if r, err := post(p.httpURL, secret, delivery{event: "issues", id: "after-slow-body", body: issueBody(9)}); err != nil || r.status != http.StatusAccepted {
		t.Fatalf("delivery after the slow body: %v %d", err, r.status)
	}
}
