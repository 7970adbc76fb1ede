package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

// No client can switch the plugins off for the others: whatever one client
// puts in its request headers, and whatever a plugin answers about one
// call, stays that call's business. Through the whole pipeline: the strict
// fake Envoy, the processor, the executor, the plugin client and a real
// plugin server whose HTTP layer refuses headers over 16 KiB as Node does.

// denyWord is what the guard's policy refuses in tool arguments.
const denyWord = "forbidden"

// policyGuard is a plugin "guard" running the example deny-list policy on
// tool_pre_invoke (a call whose arguments contain denyWord is blocked),
// recording every call it gets.
func policyGuard(t *testing.T) *plugintest.Scripted {
	t.Helper()
	pol, err := policy.New(policy.Config{Name: "guard", Deny: []string{denyWord}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	guard.SetFunc(pol.InvokeHook)
	return guard
}

// toolCall is a tools/call of echo whose message is msg.
func toolCall(id int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q}}}`, id, msg)
}

// waitSessions waits until every session of plugin is ready, so that the
// initializes counted afterwards are rebuilds only.
func (h *harness) waitSessions(plugin string, want int) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for h.pool.Stats(plugin).Sessions.Ready != want {
		if time.Now().After(deadline) {
			h.t.Fatalf("plugin %s: sessions %+v, want %d ready", plugin, h.pool.Stats(plugin).Sessions, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOversizedHeadersCannotSwitchPluginsOff: 40 ordinary tools/call
// requests run at the same moment as 40 forbidden ones carrying a 20 KiB
// tracestate (or x-request-id), with the plugin failing closed or open.
// Every forbidden call is blocked by the policy itself, every ordinary call
// is inspected once and forwarded, and no session is rebuilt.
func TestOversizedHeadersCannotSwitchPluginsOff(t *testing.T) {
	const n = 40
	huge := strings.Repeat("v", 20<<10)
	headers := []struct {
		name string
		kv   []string
	}{
		{"tracestate", []string{"Traceparent", validTraceparent, "Tracestate", "big=" + huge}},
		{"x-request-id", []string{"X-Request-Id", huge}},
	}
	for _, onError := range []string{"fail", "ignore"} {
		for _, hdr := range headers {
			t.Run(onError+"/"+hdr.name, func(t *testing.T) {
				guard := policyGuard(t)
				h := newHarnessWith(t, guardConfig(onError, "5"), harnessOptions{
					server: []plugintest.Option{plugintest.HeaderLimit(plugintest.NodeHeaderLimit)},
				}, guard)
				h.waitSessions("guard", pluginclient.DefaultSlots)
				initializes, invokes := h.server.Initializes(), h.server.InvokeHooks()
				if initializes != int64(pluginclient.DefaultSlots) {
					t.Fatalf("%d initializes at start, want one per session (%d)", initializes, pluginclient.DefaultSlots)
				}

				ordinary := make([]*envoytest.Result, n)
				forbidden := make([]*envoytest.Result, n)
				errs := make(chan error, 2*n)
				var wg sync.WaitGroup
				start := make(chan struct{})
				run := func(dst []*envoytest.Result, i int, req *envoytest.Request) {
					<-start
					ctx, cancel := context.WithTimeout(context.Background(), 2*messageTimeout)
					defer cancel()
					res, err := h.filter.Do(ctx, req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":1,"result":{}}`))
					if err != nil {
						errs <- err
					}
					dst[i] = res
				}
				for i := range n {
					wg.Go(func() {
						run(ordinary, i, mcpPost(toolCall(i, fmt.Sprintf("ordinary-%d", i)),
							"Traceparent", validTraceparent, "X-Request-Id", fmt.Sprintf("req-%d", i)))
					})
					wg.Go(func() {
						run(forbidden, i, mcpPost(toolCall(n+i, fmt.Sprintf("%s-%d", denyWord, i)), hdr.kv...))
					})
				}
				close(start)
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("Do: %v", err)
				}

				var failed, uninspected, passed, otherwise int
				seen := inspectedMessages(t, guard)
				for i, res := range ordinary {
					msg := fmt.Sprintf("ordinary-%d", i)
					switch {
					case !exchangeOK(res) || res.Immediate || res.UpstreamRequest == nil ||
						string(res.UpstreamRequest.Body) != toolCall(i, msg):
						failed++
						if failed == 1 {
							t.Logf("first failed ordinary call: status %d %s, local error %q", res.Status, res.Body, res.LocalError)
						}
					case seen[msg] != 1:
						uninspected++
					}
				}
				for i, res := range forbidden {
					switch {
					case res.UpstreamRequest != nil:
						passed++
					case !exchangeOK(res) || !deniedByPolicy(res, n+i):
						otherwise++
						if otherwise == 1 {
							t.Logf("first forbidden call not denied by the policy: status %d %s", res.Status, res.Body)
						}
					}
				}
				if failed+uninspected+passed+otherwise != 0 {
					t.Errorf("ordinary calls: %d failed, %d not inspected exactly once; forbidden calls: %d passed, %d refused otherwise than by the policy (of %d each)",
						failed, uninspected, passed, otherwise, n)
				}
				if got := h.server.InvokeHooks() - invokes; got != 2*n {
					t.Errorf("plugin server got %d invoke_hook calls, want %d (one per call)", got, 2*n)
				}
				if got := h.server.Initializes() - initializes; got != 0 {
					t.Errorf("%d initializes after the %d sessions opened at start, want 0 (no rebuild)", got, initializes)
				}
				if st := h.pool.Stats("guard"); st.Rebuilds != 0 || st.Connects != uint64(pluginclient.DefaultSlots) {
					t.Errorf("stats %+v: want no rebuild, %d connects", st, pluginclient.DefaultSlots)
				}
			})
		}
	}
}

// exchangeOK reports whether Envoy would have completed the exchange: no
// local error or reset, one reply per message.
func exchangeOK(res *envoytest.Result) bool {
	return res != nil && res.LocalError == "" && !res.Reset && res.StreamErr == nil && len(res.Received) == len(res.Sent)
}

// deniedByPolicy reports whether res is the policy's refusal of request id:
// a JSON-RPC error carrying the guard's violation code, answered by the
// sidecar.
func deniedByPolicy(res *envoytest.Result, id int) bool {
	var env struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
			Data struct {
				Plugin string `json:"plugin"`
				Code   string `json:"code"`
			} `json:"data"`
		} `json:"error"`
	}
	if !res.Immediate || res.Status != http.StatusOK || res.Headers.Get("X-Mcp-Denied") != "true" ||
		json.Unmarshal(res.Body, &env) != nil {
		return false
	}
	return env.ID == id && env.Error.Code == -32000 && env.Error.Data.Plugin == "guard" && env.Error.Data.Code == policy.ViolationCode
}

// inspectedMessages counts, by tool argument message, the calls guard got.
func inspectedMessages(t *testing.T, guard *plugintest.Scripted) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, c := range guard.Calls() {
		var p struct {
			Args struct {
				Message string `json:"message"`
			} `json:"args"`
		}
		if err := json.Unmarshal(c.Payload, &p); err != nil {
			t.Fatalf("payload %s: %v", c.Payload, err)
		}
		seen[p.Args.Message]++
	}
	return seen
}

// TestPluginRefusalIsThatCallsError: a plugin server that refuses one
// call's request (413, 431, a 400 that says nothing of a session) or
// answers it with a tool error gives that call the plugin's on_error policy
// — refused with the plugin error when failing closed, forwarded when
// failing open — once, without a retry or a rebuild; the next call is
// inspected on the same session.
func TestPluginRefusalIsThatCallsError(t *testing.T) {
	faults := []plugintest.Fault{plugintest.Status413, plugintest.Status431, plugintest.Status400, plugintest.ToolError}
	for _, onError := range []string{"fail", "ignore"} {
		t.Run(onError, func(t *testing.T) {
			guard := policyGuard(t)
			// One session: the next call can only go where the refused one went.
			h := newHarness(t, guardConfig(onError, "5")+"extproc:\n  plugin_sessions: 1\n", guard)
			h.waitSessions("guard", 1)
			for _, f := range faults {
				t.Run(f.String(), func(t *testing.T) {
					initializes, invokes, before := h.server.Initializes(), h.server.InvokeHooks(), h.pool.Stats("guard")
					seen := len(invokeSessions(h.server))
					h.server.SetFaultOnce(f)
					res := h.do(mcpPost(echoCall), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
					if onError == "ignore" {
						if res.Immediate || res.UpstreamRequest == nil || string(res.UpstreamRequest.Body) != echoCall {
							t.Errorf("fail open: immediate %v (%d %s), want the call forwarded unchanged", res.Immediate, res.Status, res.Body)
						}
					} else if !pluginErrorReply(res, 3) {
						t.Errorf("fail closed: immediate %v, status %d, body %s; want the plugin error for id 3", res.Immediate, res.Status, res.Body)
					}
					if got := h.server.InvokeHooks() - invokes; got != 1 {
						t.Errorf("plugin server got %d invoke_hook calls for one request, want 1 (no retry)", got)
					}

					calls := guard.CallCount()
					next := h.do(mcpPost(toolCall(4, denyWord)), noUpstream(t))
					if !deniedByPolicy(next, 4) || guard.CallCount() != calls+1 {
						t.Errorf("next call: status %d %s, plugin calls %d; want it inspected and denied", next.Status, next.Body, guard.CallCount()-calls)
					}
					if ids := invokeSessions(h.server)[seen:]; len(ids) < 2 || ids[0] == "" || ids[0] != ids[len(ids)-1] {
						t.Errorf("sessions of the invoke_hook requests: %q; want the refused call and the next one on the same session", ids)
					}
					if got := h.server.Initializes() - initializes; got != 0 {
						t.Errorf("%d initializes, want 0 (no rebuild)", got)
					}
					if st := h.pool.Stats("guard"); st.Rebuilds != before.Rebuilds || st.Retries != before.Retries {
						t.Errorf("stats %+v, before %+v: want no rebuild and no retry", st, before)
					}
				})
			}
		})
	}
}

// pluginErrorReply reports whether res is the sidecar's refusal of request
// id because plugin guard failed: JSON-RPC error -32603 naming the plugin.
func pluginErrorReply(res *envoytest.Result, id int) bool {
	var env struct {
		ID    int `json:"id"`
		Error struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	if !res.Immediate || res.Status != http.StatusOK || res.UpstreamRequest != nil ||
		res.Headers.Get("X-Mcp-Denied") != "true" || json.Unmarshal(res.Body, &env) != nil {
		return false
	}
	return env.ID == id && env.Error.Code == -32603 && env.Error.Data["plugin"] == "guard"
}

// invokeSessions returns the session id of each invoke_hook request srv
// received, oldest first.
func invokeSessions(srv *plugintest.Server) []string {
	var ids []string
	for _, r := range srv.Requests() {
		if r.Tool == cpex.ToolInvokeHook {
			ids = append(ids, r.SessionID)
		}
	}
	return ids
}
