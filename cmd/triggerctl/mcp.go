package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/triggerd/triggerd/tenants"
)

// mcpCmd implements "triggerctl mcp": a bridge between an MCP client that
// starts a local command (stdio) and triggerd's Streamable HTTP endpoint,
// as the tenant of the key.
func mcpCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return mcpCommand(ctx, args, os.Stdin, stdout, stderr)
}

func mcpCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", defaultURL, "root URL of triggerd (its /mcp endpoint is used), or the endpoint's own URL")
	dataDir := fs.String("data-dir", "./data", "triggerd's data dir, where it wrote default_tenant_key (used when TRIGGERD_API_KEY is unset)")
	synopsis := "usage: triggerctl mcp [--url URL]\n\n" +
		"Serves MCP on stdin and stdout (newline-delimited JSON-RPC) and relays every message to triggerd's\n" +
		"Streamable HTTP endpoint, and every message from it back, for MCP clients that start a local\n" +
		"command. Uses the tenant key in TRIGGERD_API_KEY, else <data-dir>/default_tenant_key. Logs go to\n" +
		"stderr.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, "mcp takes no arguments")
	}
	key, err := managementKey(apiKeyFlag(fs), "TRIGGERD_API_KEY", tenants.DefaultKeyFile, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl mcp: %v\n", err)
		return 1
	}
	endpoint := strings.TrimRight(*baseURL, "/")
	if !strings.HasSuffix(endpoint, "/mcp") {
		endpoint += "/mcp"
	}
	b := &mcpBridge{endpoint: endpoint, key: key, hc: &http.Client{}, out: stdout, log: stderr}
	if err := b.run(ctx, stdin); err != nil {
		fmt.Fprintf(stderr, "triggerctl mcp: %v\n", err)
		return 1
	}
	return 0
}

// metaProtocolVersion is the _meta key of a request's protocol revision
// (SEP-2575).
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// maxMCPLine bounds one message read from stdin (a step's input may
// carry a file's content).
const maxMCPLine = 16 << 20

// mcpBridge relays JSON-RPC messages between stdio and a Streamable HTTP
// endpoint: each message read is POSTed (its answer, JSON or a stream of
// server-sent events, is written back), and once the session is
// initialized a GET stream brings what the server sends on its own
// (list_changed, resource updates).
type mcpBridge struct {
	endpoint, key string
	hc            *http.Client

	logMu sync.Mutex
	log   io.Writer

	outMu sync.Mutex
	out   io.Writer

	mu        sync.Mutex
	sessionID string
	version   string
	// initID is the id of the initialize request in flight.
	initID    string
	listening bool
	lastEvent string
}

// rpcMessage is what the bridge reads of a message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	// Params' _meta names the protocol revision of each request from
	// 2026-07-28 on; the request's MCP-Protocol-Version header must say
	// it too.
	Params *struct {
		Meta map[string]any `json:"_meta"`
		// Name (tools/call, prompts/get) or URI (resources/read) is
		// repeated in the Mcp-Name header.
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"params,omitempty"`
	Result *struct {
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"result,omitempty"`
}

// drainGrace is how long the requests in flight when stdin ends may
// still be answered (a stream of notifications never is).
const drainGrace = 2 * time.Second

// run relays until stdin ends or ctx does, then ends the session.
func (b *mcpBridge) run(ctx context.Context, stdin io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	// posts are the requests in flight; streams the GET stream.
	var posts, streams sync.WaitGroup
	defer func() {
		drained := make(chan struct{})
		go func() { posts.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-ctx.Done():
		case <-time.After(drainGrace):
		}
		cancel()
		posts.Wait()
		streams.Wait()
		b.endSession()
	}()
	rd := bufio.NewReaderSize(stdin, 64<<10)
	for {
		line, err := readLine(rd)
		if len(bytes.TrimSpace(line)) > 0 {
			var m rpcMessage
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				b.logf("triggerctl mcp: skipping a line that is not a JSON-RPC message: %v\n", jerr)
			} else {
				if m.Method == "initialize" {
					b.mu.Lock()
					b.initID = string(m.ID)
					b.mu.Unlock()
				}
				msg := bytes.Clone(line)
				posts.Add(1)
				go func() {
					defer posts.Done()
					b.post(ctx, msg, m, &streams)
				}()
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("read stdin: %w", err)
		}
	}
}

// readLine reads one line of at most maxMCPLine bytes.
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxMCPLine {
			return nil, fmt.Errorf("a message is over %d bytes", maxMCPLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// logf writes a line to the log (stderr), one goroutine at a time.
func (b *mcpBridge) logf(format string, a ...any) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	fmt.Fprintf(b.log, format, a...)
}

// write sends one message to stdout, on a line of its own.
func (b *mcpBridge) write(msg []byte) {
	var buf bytes.Buffer
	if json.Compact(&buf, msg) != nil {
		return
	}
	buf.WriteByte('\n')
	b.outMu.Lock()
	defer b.outMu.Unlock()
	_, _ = b.out.Write(buf.Bytes())
}

// fail answers a request the endpoint could not: the client must not
// wait for ever.
func (b *mcpBridge) fail(m rpcMessage, msg string) {
	b.logf("triggerctl mcp: %s\n", msg)
	if len(m.ID) == 0 || m.Method == "" {
		return
	}
	out, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": m.ID,
		"error": map[string]any{"code": -32603, "message": "triggerctl mcp: " + msg},
	})
	b.write(out)
}

func (b *mcpBridge) request(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.endpoint, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.key)
	b.mu.Lock()
	if b.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", b.sessionID)
	}
	if b.version != "" {
		req.Header.Set("Mcp-Protocol-Version", b.version)
	}
	b.mu.Unlock()
	return req, nil
}

// post sends one message and writes back what answers it.
func (b *mcpBridge) post(ctx context.Context, msg []byte, m rpcMessage, wg *sync.WaitGroup) {
	req, err := b.request(ctx, http.MethodPost, msg)
	if err != nil {
		b.fail(m, err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if m.Params != nil {
		if v, ok := m.Params.Meta[metaProtocolVersion].(string); ok && v != "" {
			// From this revision on a request also names its method,
			// and the tool, prompt or resource it is about, in headers.
			req.Header.Set("Mcp-Protocol-Version", v)
			req.Header.Set("Mcp-Method", m.Method)
			switch m.Method {
			case "tools/call", "prompts/get":
				req.Header.Set("Mcp-Name", headerValue(m.Params.Name))
			case "resources/read":
				req.Header.Set("Mcp-Name", headerValue(m.Params.URI))
			}
		}
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			b.fail(m, "triggerd could not be reached at "+b.endpoint+": "+err.Error())
		}
		return
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		b.mu.Lock()
		b.sessionID = id
		b.mu.Unlock()
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		b.fail(m, "triggerd refused the key (401): set TRIGGERD_API_KEY to a current key of the tenant")
		return
	case resp.StatusCode == http.StatusAccepted:
		return
	case resp.StatusCode != http.StatusOK:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		b.fail(m, fmt.Sprintf("triggerd answered %s: %s", resp.Status, strings.TrimSpace(string(body))))
		return
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if err := readEvents(resp.Body, func(id string, data []byte) { b.deliver(ctx, data, wg) }); err != nil && ctx.Err() == nil {
			b.logf("triggerctl mcp: an answer's stream broke: %v\n", err)
		}
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.fail(m, "reading triggerd's answer: "+err.Error())
		return
	}
	b.deliver(ctx, body, wg)
}

// deliver writes a message from the server. The answer to initialize
// fixes the protocol version, and opens the stream of what the server
// sends on its own.
func (b *mcpBridge) deliver(ctx context.Context, msg []byte, wg *sync.WaitGroup) {
	if len(bytes.TrimSpace(msg)) == 0 {
		return
	}
	var m rpcMessage
	if json.Unmarshal(msg, &m) == nil && m.Result != nil && m.Result.ProtocolVersion != "" {
		b.mu.Lock()
		start := false
		if b.initID != "" && string(m.ID) == b.initID {
			b.version = m.Result.ProtocolVersion
			b.initID = ""
			// Protocol revisions from 2026-07-28 on have no standalone
			// stream (the client asks with subscriptions/listen).
			start = !b.listening && b.version < "2026-07-28"
			b.listening = b.listening || start
		}
		b.mu.Unlock()
		if start {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.listen(ctx)
			}()
		}
	}
	b.write(msg)
}

// listen keeps the GET stream open while the session lives, resuming
// after the last event seen when it breaks.
func (b *mcpBridge) listen(ctx context.Context) {
	const maxFailures = 10
	failures := 0
	for ctx.Err() == nil && failures < maxFailures {
		req, err := b.request(ctx, http.MethodGet, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		b.mu.Lock()
		if b.lastEvent != "" {
			req.Header.Set("Last-Event-ID", b.lastEvent)
		}
		b.mu.Unlock()
		resp, err := b.hc.Do(req)
		if err == nil {
			switch resp.StatusCode {
			case http.StatusOK:
				failures = 0
				err = readEvents(resp.Body, func(id string, data []byte) {
					if id != "" {
						b.mu.Lock()
						b.lastEvent = id
						b.mu.Unlock()
					}
					if len(bytes.TrimSpace(data)) > 0 {
						b.write(data)
					}
				})
			case http.StatusMethodNotAllowed, http.StatusNotFound:
				// No stream offered, or the session is gone: the
				// client's next request says so.
				resp.Body.Close()
				return
			default:
				err = fmt.Errorf("triggerd answered %s", resp.Status)
			}
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		b.logf("triggerctl mcp: the stream of server messages broke (%v); reopening\n", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(failures) * 500 * time.Millisecond):
		}
	}
}

// headerValue is s as an MCP header carries it: as it is when it is
// printable ASCII without surrounding blanks, else Base64 in the
// =?base64?...?= wrapper (SEP-2243).
func headerValue(s string) string {
	plain := s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t') &&
		!(strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?="))
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			plain = false
		}
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// endSession tells the server the session is over.
func (b *mcpBridge) endSession() {
	b.mu.Lock()
	id := b.sessionID
	b.mu.Unlock()
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := b.request(ctx, http.MethodDelete, nil)
	if err != nil {
		return
	}
	if resp, err := b.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// readEvents calls fn with each event's id and data of a server-sent
// events stream, until it ends.
func readEvents(r io.Reader, fn func(id string, data []byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxMCPLine)
	var id, event string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if event == "" || event == "message" {
				fn(id, data)
			}
			event, data = "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		case "id":
			id = value
		case "event":
			event = value
		}
	}
	return sc.Err()
}
