package processor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// The paths a result can take besides the answer to its own POST
// (docs/mcp-result-paths.md), through the strict fake Envoy with real MCP
// servers (internal/mcpecho) and recordings of the TypeScript SDK's server.

// secret is the word the "words" plugin's tool_post_invoke (and every post
// hook) replaces with rewritten in every result.
const (
	secret    = "secret"
	rewritten = "REWRITTEN"
)

const wordsConfig = `
plugins:
  - name: words
    kind: external
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`

// rewriteWords is a post hook script that replaces each of words with
// rewritten in the payload (plain words: the JSON stays valid).
func rewriteWords(words ...string) pluginserver.HookFunc {
	return func(_ context.Context, h cpex.HookType, p json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if h != cpex.ToolPostInvoke && h != cpex.PromptPostFetch && h != cpex.ResourcePostFetch {
			return nil, nil
		}
		out := []byte(p)
		for _, w := range words {
			out = bytes.ReplaceAll(out, []byte(w), []byte(rewritten))
		}
		if bytes.Equal(out, p) {
			return nil, nil
		}
		return pluginserver.Modify("", json.RawMessage(out))
	}
}

// wordsHarness is a sidecar whose one plugin rewrites secret in results.
func wordsHarness(t *testing.T) (*harness, *plugintest.Scripted) {
	words := plugintest.NewScripted("words")
	words.SetFunc(rewriteWords(secret))
	return newHarness(t, wordsConfig, words), words
}

// front serves upstream behind the fake Envoy running h's processor and
// returns the MCP endpoint's URL.
func (h *harness) front(upstream http.Handler) string {
	t := h.t
	up := httptest.NewServer(upstream)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := &envoytest.Proxy{Filter: h.filter, Upstream: u}
	fr := httptest.NewServer(p)
	t.Cleanup(func() {
		fr.Close()
		p.CloseIdleConnections()
		up.Close()
	})
	return fr.URL + "/mcp"
}

// event is one SSE event as the client got it.
type event struct{ ID, Data string }

// answer is an HTTP answer as the client got it.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
	Events []event
}

// rpcDo sends one request to endpoint and reads the whole answer; stop, if
// set, ends the read early when it returns true for an event (a client
// dropping the stream).
func rpcDo(t *testing.T, endpoint, method string, header map[string]string, body string, stop func(event) bool) answer {
	t.Helper()
	h := http.Header{}
	for k, v := range header {
		h.Set(k, v)
	}
	return rpcDoHeader(t, endpoint, method, h, body, stop)
}

// rpcDoHeader is rpcDo with headers that may repeat.
func rpcDoHeader(t *testing.T, endpoint, method string, header http.Header, body string, stop func(event) bool) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	a := answer{Status: resp.StatusCode, Header: resp.Header}
	var d sse.Decoder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		a.Body = append(a.Body, buf[:n]...)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && n > 0 {
			evs, ferr := d.Feed(buf[:n])
			if ferr != nil {
				t.Fatalf("sse: %v", ferr)
			}
			for _, e := range evs {
				ev := event{ID: string(e.ID), Data: string(e.Data)}
				a.Events = append(a.Events, ev)
				if stop != nil && stop(ev) {
					return a
				}
			}
		}
		if err == io.EOF {
			return a
		}
		if err != nil {
			t.Fatalf("%s: read: %v", method, err)
		}
	}
}

// rpcResponse is the part of a JSON-RPC response the tests read.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// responsesOf returns the JSON-RPC responses of an answer, by id.
func responsesOf(t *testing.T, a answer) map[string]rpcResponse {
	t.Helper()
	out := map[string]rpcResponse{}
	add := func(data []byte) {
		var r rpcResponse
		if json.Unmarshal(data, &r) == nil && r.Method == "" && len(r.ID) > 0 {
			out[string(r.ID)] = r
		}
	}
	if len(a.Events) == 0 {
		add(a.Body)
	}
	for _, e := range a.Events {
		add([]byte(e.Data))
	}
	return out
}

// mustRewritten fails unless the response with id is a result holding
// rewritten and not secret.
func mustRewritten(t *testing.T, what string, a answer, id string) {
	t.Helper()
	r, ok := responsesOf(t, a)[id]
	if !ok || r.Result == nil || bytes.Contains(r.Result, []byte(secret)) || !bytes.Contains(r.Result, []byte(rewritten)) {
		t.Fatalf("%s: response %s = %+v (result %s), want a rewritten result; body %q", what, id, r, r.Result, a.Body)
	}
}

// TestMCPPathVariants: /mcp/ and /MCP reach an Express-routed MCP server as
// /mcp, so they are inspected like /mcp (pre and post hooks); /mcp2 is not.
func TestMCPPathVariants(t *testing.T) {
	h, words := wordsHarness(t)
	for _, path := range []string{"/mcp", "/mcp/", "/MCP", "/Mcp/?x=1"} {
		req := mcpPost(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"a secret"}}}`)
		req.Path = path
		res := h.do(req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"echo: a secret"}]}}`))
		if !bytes.Contains(res.Body, []byte(rewritten)) {
			t.Errorf("%s: not inspected: %s", path, res.Body)
		}
	}
	words.Reset()
	req := mcpPost(echoCall)
	req.Path = "/mcp2"
	h.do(req, jsonUpstream(http.StatusOK, echoCall))
	if n := words.CallCount(); n != 0 {
		t.Errorf("/mcp2: %d plugin calls", n)
	}
}
