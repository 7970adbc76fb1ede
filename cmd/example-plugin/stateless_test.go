package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
)

// TestStatelessFlag: with --stateless an initialize gets no session and the
// session-only methods are refused.
func TestStatelessFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	logs := &syncbuf.Buffer{}
	addr, stop := startRun(ctx, t, logs, "--stateless")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	do := func(method, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	init := do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if init.StatusCode != http.StatusOK || init.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("initialize: %d, Mcp-Session-Id %q; want 200 and none", init.StatusCode, init.Header.Get("Mcp-Session-Id"))
	}
	if get := do(http.MethodGet, ""); get.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", get.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
	if !strings.Contains(logs.String(), `"stateless":true`) {
		t.Errorf("serving log lacks stateless:true:\n%s", logs)
	}
}
