package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
	"github.com/mcp-extproc/mcp-extproc/internal/localstack"
)

// The demo's caller: the token check (localstack.Options.Tokens) knows
// this bearer token as this e-mail. Every step but the denied callers'
// sends it.
const (
	demoToken = "demo-token-ada"
	demoUser  = "ada@example.com"
)

// bearer sets Authorization: Bearer token on every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// callerClient is the HTTP client of a caller with token.
func callerClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
}

// identityStep asks as an anonymous caller, as one with a bad token and as
// the demo's caller, and prints the outcomes; it returns 0 when each ended
// as expected: refused (403 from http_auth_check_permission, 401 from
// http_auth_resolve_user), and allowed with the caller's identity in what
// the plugin was sent.
func identityStep(ctx context.Context, st *localstack.Stack, stdout io.Writer) int {
	fmt.Fprintln(stdout, "\n3. Who is calling: the TokenCheck plugin knows bearer tokens (http_auth_resolve_user) and refuses anonymous callers (http_auth_check_permission):")
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"who am I"}}}`
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}`
	outcomes := []e2e.Outcome{
		refusedCall(ctx, st.URL, "a caller without a token", "", call, "tools/call", http.StatusForbidden),
		refusedCall(ctx, st.URL, "a caller with a bad token", "not-a-token", initialize, "initialize", http.StatusUnauthorized),
		allowedCaller(ctx, st),
	}
	return e2e.Print(stdout, outcomes)
}

// refusedCall posts body with token ("" for none) and expects the sidecar
// to refuse it with status and a JSON-RPC error.
func refusedCall(ctx context.Context, url, step, token, body, method string, status int) e2e.Outcome {
	o := e2e.Outcome{Step: step, Method: method, Want: e2e.Blocked}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		o.Verdict, o.Detail = e2e.Failed, err.Error()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.Verdict, o.Detail = e2e.Failed, err.Error()
		return o
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var reply struct {
		Error *struct {
			Message string `json:"message"`
			Data    struct {
				Plugin string `json:"plugin"`
			} `json:"data"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &reply)
	switch {
	case resp.StatusCode == status && reply.Error != nil:
		o.Verdict = e2e.Blocked
		o.Detail = fmt.Sprintf("%d %s (plugin %s)", resp.StatusCode, reply.Error.Message, reply.Error.Data.Plugin)
		if c := resp.Header.Get("WWW-Authenticate"); c != "" {
			o.Detail += ", WWW-Authenticate: " + c
		}
	case resp.StatusCode == http.StatusOK:
		o.Verdict, o.Detail = e2e.Allowed, "got through: "+string(bytes.TrimSpace(raw))
	default:
		o.Verdict, o.Detail = e2e.Failed, fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	return o
}

// allowedCaller calls the echo tool as the demo's caller and checks that
// the plugin's permission check was sent that caller, in the payload and
// in global_context.user, and the address it called from (loopback).
func allowedCaller(ctx context.Context, st *localstack.Stack) e2e.Outcome {
	o := e2e.Outcome{Step: "a caller with a good token", Method: "tools/call", Want: e2e.Allowed}
	st.TakeCallers() // the earlier steps'
	cs, err := e2e.Connect(ctx, st.URL, callerClient(demoToken))
	if err != nil {
		o.Verdict, o.Detail = e2e.Failed, err.Error()
		return o
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "who am I"}})
	if err != nil {
		o.Verdict, o.Detail = e2e.Failed, err.Error()
		return o
	}
	if len(res.Content) != 1 || res.IsError {
		o.Verdict, o.Detail = e2e.Failed, fmt.Sprintf("unexpected result %+v", res.Content)
		return o
	}
	for _, c := range st.TakeCallers() {
		if c.Permission == "tools.execute" {
			if c.UserEmail != demoUser || c.GlobalUser != demoUser || c.ClientHost != "127.0.0.1" {
				o.Verdict, o.Detail = e2e.Failed, fmt.Sprintf("the plugin was sent user_email %q, global_context.user %q, client_host %q, want %q, %q, 127.0.0.1",
					c.UserEmail, c.GlobalUser, c.ClientHost, demoUser, demoUser)
				return o
			}
			o.Verdict, o.Detail = e2e.Allowed, fmt.Sprintf("%s; the plugin was sent user_email %s, global_context.user %s, client_host %s",
				textOf(res.Content[0]), c.UserEmail, c.GlobalUser, c.ClientHost)
			return o
		}
	}
	o.Verdict, o.Detail = e2e.Failed, "the plugin's permission check was not called for the tool call"
	return o
}

func textOf(c mcp.Content) string {
	if t, ok := c.(*mcp.TextContent); ok {
		return t.Text
	}
	return fmt.Sprintf("%T", c)
}
