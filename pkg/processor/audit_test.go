package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// auditLog records the events a sidecar emits.
type auditLog struct {
	mu     sync.Mutex
	events []audit.Event
}

func (a *auditLog) Emit(e audit.Event) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, e)
	return true
}

// take returns the events emitted so far and forgets them.
func (a *auditLog) take() []audit.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.events
	a.events = nil
	return out
}

// auditConfig has a verified caller (a JWT in Envoy's metadata), a rule,
// a shadow rule and a guard plugin on tool_pre_invoke.
const auditConfig = `plugins:
  - name: guard
    kind: external
    hooks: [tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
extproc:
  identity:
    sources:
      - jwt_metadata: {key: jwt_payload, claims: {roles: roles}}
  rules:
    - name: admins-delete
      deny: 'mcp.name == "delete_file" && !("admin" in identity.roles)'
    - name: no-search-yet
      deny: 'mcp.name == "search"'
      mode: shadow
%s`

// auditFront serves the rules MCP server behind the fake Envoy with
// jwt_authn in front, a guard plugin that blocks ops_restart, and the
// events recorded in the returned log.
// shadowObserver records the rule decisions and shadowed decisions the
// processor reports; the rest goes to the sidecar's metrics.
type shadowObserver struct {
	processor.Observer
	mu   sync.Mutex
	seen map[string]bool
}

func (o *shadowObserver) note(k string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[k] = true
}

func (o *shadowObserver) RuleDecision(rule, decision string, _ int) { o.note("rule/" + decision) }
func (o *shadowObserver) Shadowed(by, name, decision string) {
	o.note(by + "/" + name + "/" + decision)
}

func (o *shadowObserver) saw(k string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[k]
}

func auditFront(t *testing.T, extra string) (string, *auditLog, *plugintest.Scripted, *shadowObserver) {
	t.Helper()
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	guard.SetFunc(onHook(cpex.ToolPreInvoke, func(_ context.Context, _ cpex.HookType, p json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if strings.Contains(string(p), `"ops_restart"`) {
			return plugintest.Block(cpex.PluginViolation{Reason: "not now", Description: "restarts are frozen", Code: "FROZEN"})(context.Background(), "", p, nil)
		}
		return nil, nil
	}))
	log := &auditLog{}
	obs := &shadowObserver{Observer: metrics.New(prometheus.NewRegistry()), seen: map[string]bool{}}
	h := newHarnessWith(t, fmt.Sprintf(auditConfig, extra), harnessOptions{proc: func(o *processor.Options) { o.Audit, o.Observer = log, obs }}, guard)
	h.filter.Forwarding = envoytest.Forwarding{MetadataNamespaces: []string{"envoy.filters.http.jwt_authn"}}
	up := httptest.NewServer(rulesServer(true))
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := &envoytest.Proxy{Filter: h.filter, Upstream: u, Info: jwtInfo}
	fr := httptest.NewServer(p)
	t.Cleanup(func() {
		fr.Close()
		p.CloseIdleConnections()
		up.Close()
	})
	return fr.URL + "/mcp", log, guard, obs
}

// waitEvents waits until n events were emitted (a stream's events go out
// when Envoy closes it, just after the client has its answer).
func waitEvents(t *testing.T, log *auditLog, n int) []audit.Event {
	t.Helper()
	var got []audit.Event
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got = append(got, log.take()...)
		if len(got) >= n || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond) // one more would show up here
	got = append(got, log.take()...)
	if len(got) != n {
		t.Fatalf("%d audit events, want %d: %+v", len(got), n, got)
	}
	return got
}

// TestAuditEvents: through the strict fake Envoy, a call blocked by a
// rule and one blocked by a plugin produce one audit event each, with the
// verified caller; an allowed call one event; a tools/list none unless
// configured; a shadow rule that would deny lets the call through, and
// its event and metric say it would have.
func TestAuditEvents(t *testing.T) {
	endpoint, log, _, obs := auditFront(t, "")
	s := with(goSession(t, endpoint), "Authorization", "Bearer dev-token")
	waitEvents(t, log, 0) // initialize and its notification are not calls
	call := func(id int, tool string) answer {
		return rpcDo(t, endpoint, http.MethodPost, s, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool), nil)
	}
	for _, tc := range []struct {
		tool      string
		wantError bool
		decision  audit.Decision
		by        audit.DecidedBy
		rules     int
	}{
		{"delete_file", true, audit.DecisionDeny, audit.DecidedBy{Kind: audit.KindRule, Name: "admins-delete"}, 1},
		{"ops_restart", true, audit.DecisionDeny, audit.DecidedBy{Kind: audit.KindPlugin, Name: "guard"}, 0},
		{"echo", false, audit.DecisionAllow, audit.DecidedBy{}, 0},
		{"search", false, audit.DecisionWouldDeny, audit.DecidedBy{Kind: audit.KindRule, Name: "no-search-yet"}, 1},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			a := call(7, tc.tool)
			if got := strings.Contains(string(a.Body), `"error"`); got != tc.wantError {
				t.Fatalf("answer %s: error %v, want %v", a.Body, got, tc.wantError)
			}
			e := waitEvents(t, log, 1)[0]
			if e.Method != "tools/call" || e.Target != tc.tool || e.JSONRPCID != "7" || e.Decision != tc.decision || e.DecidedBy != tc.by {
				t.Errorf("event %s %s id %s: %s by %+v; want %s by %+v", e.Method, e.Target, e.JSONRPCID, e.Decision, e.DecidedBy, tc.decision, tc.by)
			}
			if e.Caller.Subject != "dev" || !e.Caller.Verified || e.Caller.Source != audit.SourceJWTMetadata {
				t.Errorf("caller %+v, want the verified dev", e.Caller)
			}
			if e.RequestID == "" || e.SessionID == "" || !strings.HasPrefix(e.ArgumentsHash, "sha256:") {
				t.Errorf("request %q session %q arguments %q", e.RequestID, e.SessionID, e.ArgumentsHash)
			}
			if len(e.Rules) != tc.rules {
				t.Errorf("rules %+v, want %d", e.Rules, tc.rules)
			}
			wantVerdict := "allow"
			if tc.by.Kind == audit.KindPlugin {
				wantVerdict = "deny"
			}
			if tc.by.Kind != audit.KindRule || tc.decision == audit.DecisionWouldDeny {
				if len(e.Plugins) != 1 || e.Plugins[0].Plugin != "guard" || e.Plugins[0].Verdict != wantVerdict || e.Plugins[0].Duration <= 0 {
					t.Errorf("plugins %+v, want guard's %s with its latency", e.Plugins, wantVerdict)
				}
			}
			if tc.decision == audit.DecisionWouldDeny && e.Mode != audit.ModeEnforce {
				t.Errorf("mode %s: only the rule is shadowed", e.Mode)
			}
			if tc.decision == audit.DecisionWouldDeny && !obs.saw("rule/no-search-yet/would_deny") {
				t.Error("the shadow rule's would_deny was not counted")
			}
		})
	}
	rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, nil)
	waitEvents(t, log, 0)
}

// TestAuditListsWhenConfigured: extproc.audit.include.lists audits a
// tools/list.
func TestAuditListsWhenConfigured(t *testing.T) {
	endpoint, log, _, _ := auditFront(t, "  audit:\n    include: {lists: true}\n")
	s := with(goSession(t, endpoint), "Authorization", "Bearer dev-token")
	waitEvents(t, log, 0)
	rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, nil)
	e := waitEvents(t, log, 1)[0]
	if e.Method != "tools/list" || e.ResultHash == "" || e.Decision != audit.DecisionModify {
		t.Errorf("list event %s result %q decision %s; want tools/list, its result's hash, modify (delete_file hidden from dev)", e.Method, e.ResultHash, e.Decision)
	}
}

// TestShadowEnforcesNothing: with extproc.shadow every plugin and rule
// decides and nothing is refused or changed; the events say what would
// have been.
func TestShadowEnforcesNothing(t *testing.T) {
	endpoint, log, guard, obs := auditFront(t, "  shadow: true\n")
	s := with(goSession(t, endpoint), "Authorization", "Bearer dev-token")
	waitEvents(t, log, 0)
	for _, tool := range []string{"delete_file", "ops_restart"} {
		a := rpcDo(t, endpoint, http.MethodPost, s, fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, tool), nil)
		if !strings.Contains(string(a.Body), tool+" done") {
			t.Errorf("%s under shadow: %s, want the server's answer", tool, a.Body)
		}
		e := waitEvents(t, log, 1)[0]
		if e.Decision != audit.DecisionWouldDeny || e.Mode != audit.ModeShadow {
			t.Errorf("%s: %s in mode %s, want would_deny in shadow", tool, e.Decision, e.Mode)
		}
	}
	if n := len(guard.Calls()); n < 2 {
		t.Errorf("the guard was asked %d times under shadow, want every call", n)
	}
	l := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, nil)
	if !strings.Contains(string(l.Body), "delete_file") {
		t.Errorf("list under shadow hid delete_file: %s", l.Body)
	}
	if got := obs.saw("rule/hide"); got {
		t.Error("under shadow a rule counted a hidden item")
	}
	if !obs.saw("rule/would_hide") {
		t.Error("under shadow the item a rule would hide was not counted")
	}
}
