package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTimeout = 10 * time.Second

func TestConfigsFromFlags(t *testing.T) {
	policyFile := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(policyFile, []byte("plugins:\n  - name: FromFile\n    deny: [x]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifty, seven := 50, 7
	tests := []struct {
		name    string
		args    []string
		want    []policy.Config
		wantErr bool
	}{
		{name: "defaults", args: nil, want: []policy.Config{{Name: "ExamplePolicy", Priority: &fifty}}},
		{
			name: "rules and names",
			args: []string{"--name", "A", "--name", "B", "--deny", "^rm", "--deny", "drop", "--redact", `\d{4}=####`, "--priority", "7", "--mode", "transform"},
			want: []policy.Config{
				{Name: "A", Deny: []string{"^rm", "drop"}, Redact: []policy.Redaction{{Pattern: `\d{4}`, Replacement: "####"}}, Mode: "transform", Priority: &seven},
				{Name: "B", Deny: []string{"^rm", "drop"}, Redact: []policy.Redaction{{Pattern: `\d{4}`, Replacement: "####"}}, Mode: "transform", Priority: &seven},
			},
		},
		{name: "policy file", args: []string{"--policy", policyFile}, want: []policy.Config{{Name: "FromFile", Deny: []string{"x"}}}},
		{name: "policy file excludes rules", args: []string{"--policy", policyFile, "--deny", "x"}, wantErr: true},
		{name: "bad redaction", args: []string{"--redact", "novalue"}, wantErr: true},
		{name: "missing policy file", args: []string{"--policy", filepath.Join(t.TempDir(), "none.yaml")}, wantErr: true},
		{name: "stray argument", args: []string{"extra"}, wantErr: true},
		{name: "relative path", args: []string{"--path", "mcp"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			var got []policy.Config
			if err == nil {
				got, err = o.configs()
			}
			if tt.wantErr {
				if err == nil {
					t.Errorf("got %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("configs (-want +got):\n%s", diff)
			}
		})
	}
}

// startRun runs the command with --addr 127.0.0.1:0 and args in the
// background and waits until it serves. stop cancels it, as SIGTERM does,
// and returns run's error; the test fails if run does not end before ctx
// does. Run is stopped in t.Cleanup at the latest.
func startRun(ctx context.Context, t *testing.T, logs io.Writer, args ...string) (addr string, stop func() error) {
	t.Helper()
	runCtx, cancel := context.WithCancel(ctx)
	addrCh := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, append([]string{"--addr", "127.0.0.1:0"}, args...), logs, func(a string) { addrCh <- a })
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-ctx.Done():
				t.Fatal("shutdown hangs")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case addr = <-addrCh:
	case err := <-done:
		once.Do(cancel) // run has ended: nothing for stop to wait for
		t.Fatalf("run: %v", err)
	case <-ctx.Done():
		t.Fatal("server never ready")
	}
	return addr, stop
}

func TestServeAndShutDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	logs := &syncbuf.Buffer{}
	addr, stop := startRun(ctx, t, logs, "--name", "Guard", "--deny", `(?i)rm\s+-rf`, "--redact", `\d{3}-\d{2}-\d{4}=[SSN]`)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	resp, err := hc.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("healthz: %d", resp.StatusCode)
	}

	// A client with the long-lived standalone SSE stream open, as the
	// sidecar has: shutdown must not wait for it.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, args any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(call(cpex.ToolGetPluginConfig, map[string]any{"name": "guard"})), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["name"] != "Guard" || cfg["mode"] != "sequential" {
		t.Errorf("config = %v", cfg)
	}
	var reply cpex.InvokeHookReply
	if err := json.Unmarshal([]byte(call(cpex.ToolInvokeHook, map[string]any{
		"hook_type": "tool_pre_invoke", "plugin_name": "Guard",
		"payload": map[string]any{"name": "shell", "args": map[string]any{"cmd": "rm -rf /"}},
		"context": map[string]any{"global_context": map[string]any{"request_id": "1"}},
	})), &reply); err != nil {
		t.Fatal(err)
	}
	if reply.Result == nil || reply.Result.Continue() || reply.Result.Violation == nil || reply.Result.Violation.Code != policy.ViolationCode {
		t.Errorf("deny reply = %+v", reply)
	}

	if err := stop(); err != nil { // as SIGTERM does
		t.Errorf("run after shutdown: %v", err)
	}
	if !strings.Contains(logs.String(), `"message":"stopped"`) || !strings.Contains(logs.String(), `"message":"denied"`) {
		t.Errorf("logs lack the expected lines:\n%s", logs)
	}
	_ = cs.Close()
	if _, err := hc.Get("http://" + addr + "/healthz"); err == nil {
		t.Error("still serving after shutdown")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for _, args := range [][]string{
		{"--log-level", "loud"},
		{"--deny", "("},
		{"--addr", "256.0.0.1:1"},
	} {
		if err := run(ctx, args, io.Discard, nil); err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("run(%q) = %v, want a configuration error", args, err)
		}
	}
}
