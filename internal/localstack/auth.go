package localstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// authServer serves the example plugin's token check (policy.NewTokenCheck)
// over MCP, and remembers the caller the last maxCallers permission checks
// were sent. It is not restarted with the policy plugins.
type authServer struct {
	addr string
	srv  *http.Server
	ps   *pluginserver.Server

	mu   sync.Mutex
	seen []Caller
}

// maxCallers bounds the callers an authServer remembers.
const maxCallers = 100

// Caller is what the token check was told about a caller in one
// http_auth_check_permission: the payload's user_email, permission and
// client_host, and the e-mail of global_context.user ("" for an anonymous
// caller).
type Caller struct {
	UserEmail, Permission, ClientHost, GlobalUser string
}

// startAuth serves the token check for tokens on a loopback port.
func startAuth(tokens map[string]string) (*authServer, error) {
	tc, err := policy.NewTokenCheck("", tokens)
	if err != nil {
		return nil, err
	}
	a := &authServer{}
	a.ps = pluginserver.New(recording{Plugin: tc, a: a})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.ps.Close()
		return nil, err
	}
	a.addr = lis.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/mcp", a.ps.Handler())
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go a.srv.Serve(lis)
	return a, nil
}

// recording is the token check, recording each permission check it gets.
type recording struct {
	pluginserver.Plugin
	a *authServer
}

func (r recording) InvokeHook(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	if hook == cpex.HTTPAuthCheckPermission {
		r.a.record(payload, pctx)
	}
	return r.Plugin.InvokeHook(ctx, hook, payload, pctx)
}

func (a *authServer) record(payload json.RawMessage, pctx *cpex.PluginContext) {
	var p cpex.HTTPAuthCheckPermissionPayload
	_ = json.Unmarshal(payload, &p)
	c := Caller{UserEmail: p.UserEmail, Permission: p.Permission, ClientHost: p.ClientHost}
	if pctx != nil {
		var u struct {
			Email string `json:"email"`
		}
		if json.Unmarshal(pctx.GlobalContext.User, &u) == nil {
			c.GlobalUser = u.Email
		}
	}
	a.mu.Lock()
	if len(a.seen) == maxCallers {
		a.seen = append(a.seen[:0], a.seen[1:]...)
	}
	a.seen = append(a.seen, c)
	a.mu.Unlock()
}

// takeCallers returns the callers recorded since the last call, oldest
// first, and forgets them.
func (a *authServer) takeCallers() []Caller {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.seen
	a.seen = nil
	return out
}

// entry is the token check's plugins: entry of the sidecar config.
func (a *authServer) entry() string {
	return fmt.Sprintf("  - name: %s\n    kind: external\n    on_error: fail\n    mcp:\n      proto: STREAMABLEHTTP\n      url: http://%s/mcp\n",
		policy.DefaultTokenCheckName, a.addr)
}

func (a *authServer) close() {
	a.ps.Close()
	a.srv.Close()
}
