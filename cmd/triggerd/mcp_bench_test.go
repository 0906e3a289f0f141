package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPvsV1Throughput measures tool calls per second through MCP
// against the same step through POST /v1/steps/{id}/run, on one triggerd
// --sandbox built without the race detector, one call at a time as an
// agent makes them. Rounds alternate the two (testing.Benchmark each),
// and the figure is the median of the rounds' ratios (MCP calls/s over
// /v1 calls/s). It takes a minute, so it runs only when asked:
//
//	TRIGGERD_MCP_BENCH=1 go test -run MCPvsV1 -v ./cmd/triggerd/
func TestMCPvsV1Throughput(t *testing.T) {
	if os.Getenv("TRIGGERD_MCP_BENCH") == "" {
		t.Skip("a benchmark: set TRIGGERD_MCP_BENCH=1 to run it")
	}
	const rounds = 5
	plain := filepath.Join(t.TempDir(), "triggerd")
	if out, err := exec.Command("go", "build", "-o", plain, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	raced := binary
	binary = plain
	defer func() { binary = raced }()

	{
		dir := t.TempDir()
		p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox")
		key := readKey(t, dir)
		_, ids := sandboxAPI(t, &p, dir)
		account := ids["codehost"]
		const step = "codehost.get_repository_info"
		input := `{"owner":"octocat","repo":"hello-world"}`
		rest := func(b *testing.B) {
			body := `{"account":"` + account + `","input":` + input + `}`
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, p.httpURL+"/v1/steps/"+step+"/run", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("/v1: %d", resp.StatusCode)
				}
			}
		}
		for _, version := range mcpVersions {
			c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
				Endpoint: p.httpURL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1,
			}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: "codehost_get_repository_info", Arguments: map[string]any{"owner": "octocat", "repo": "hello-world"}}
			viaMCP := func(b *testing.B) {
				for b.Loop() {
					res, err := cs.CallTool(context.Background(), params)
					if err != nil || res.IsError {
						b.Fatalf("MCP: %v %+v", err, res)
					}
				}
			}
			var ratios, restRates, mcpRates []float64
			for range rounds {
				r := testing.Benchmark(rest)
				m := testing.Benchmark(viaMCP)
				rr, mr := 1e9/float64(r.NsPerOp()), 1e9/float64(m.NsPerOp())
				restRates, mcpRates, ratios = append(restRates, rr), append(mcpRates, mr), append(ratios, mr/rr)
			}
			cs.Close()
			t.Logf("MCP %s: /v1 %s calls/s, MCP %s calls/s, ratios %s; median ratio %.3f",
				version, floats(restRates), floats(mcpRates), floats(ratios), median(ratios))
		}
		p.stop()
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func floats(v []float64) string {
	parts := make([]string, len(v))
	for i, f := range v {
		parts[i] = fmt.Sprintf("%.2f", f)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
