package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// benchConn is one bench worker's keep-alive HTTP/1.1 connection. It writes
// each request from prepared bytes and parses the answer with net/http's
// reader. net/http's client costs about 60 µs of CPU per 13.5 KB request on
// the 2-core machine the benchmarks run on, which the client then takes from
// the server it measures and which capped the bare handler at about 35k
// requests a second; this costs a fraction of that, so the baseline is
// measured near what the machine can serve (wrk reaches the same).
type benchConn struct {
	target  *url.URL
	dialer  net.Dialer
	tlsConf *tls.Config // nil for http
	c       net.Conn
	br      *bufio.Reader
	head    []byte
	// stop unhooks the connection from the run's context.
	stop func() bool
}

// newBenchConn prepares a connection to endpoint; it dials on first use.
func newBenchConn(endpoint string) (*benchConn, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	bc := &benchConn{target: u, dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}}
	switch u.Scheme {
	case "http":
	case "https":
		bc.tlsConf = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	default:
		return nil, fmt.Errorf("scheme %q: use http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host in %q", endpoint)
	}
	return bc, nil
}

// hostPort is the address to dial.
func (bc *benchConn) hostPort() string {
	if bc.target.Port() != "" {
		return bc.target.Host
	}
	if bc.tlsConf != nil {
		return net.JoinHostPort(bc.target.Hostname(), "443")
	}
	return net.JoinHostPort(bc.target.Hostname(), "80")
}

// dial opens the connection; ctx's end later interrupts its reads and
// writes.
func (bc *benchConn) dial(ctx context.Context) error {
	var c net.Conn
	var err error
	if bc.tlsConf != nil {
		d := tls.Dialer{NetDialer: &bc.dialer, Config: bc.tlsConf}
		c, err = d.DialContext(ctx, "tcp", bc.hostPort())
	} else {
		c, err = bc.dialer.DialContext(ctx, "tcp", bc.hostPort())
	}
	if err != nil {
		return err
	}
	bc.c = c
	if bc.br == nil {
		bc.br = bufio.NewReaderSize(c, 16<<10)
	} else {
		bc.br.Reset(c)
	}
	bc.stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	return nil
}

// Close closes the connection, if open.
func (bc *benchConn) Close() {
	if bc.c == nil {
		return
	}
	bc.stop()
	bc.c.Close()
	bc.c = nil
}

// post sends one POST with header (in the order given, already canonical)
// and body, and reads the whole answer into answer. It returns the status.
func (bc *benchConn) post(ctx context.Context, header [][2]string, body []byte, answer *bytes.Buffer) (int, error) {
	if bc.c == nil {
		if err := bc.dial(ctx); err != nil {
			return 0, err
		}
	}
	h := append(bc.head[:0], "POST "...)
	h = append(h, bc.target.RequestURI()...)
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, bc.target.Host...)
	for _, kv := range header {
		h = append(h, "\r\n"...)
		h = append(h, kv[0]...)
		h = append(h, ": "...)
		h = append(h, kv[1]...)
	}
	h = append(h, "\r\nContent-Length: "...)
	h = strconv.AppendInt(h, int64(len(body)), 10)
	h = append(h, "\r\n\r\n"...)
	bc.head = h
	bufs := net.Buffers{h, body}
	if _, err := bufs.WriteTo(bc.c); err != nil {
		bc.Close()
		return 0, err
	}
	resp, err := http.ReadResponse(bc.br, nil)
	if err != nil {
		bc.Close()
		return 0, err
	}
	answer.Reset()
	_, err = answer.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		bc.Close()
		return resp.StatusCode, fmt.Errorf("read the answer: %w", err)
	}
	if resp.Close {
		bc.Close()
	}
	return resp.StatusCode, nil
}
